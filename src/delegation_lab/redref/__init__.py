"""REDEREF (seed 003): training-free belief-guided delegation with Thompson sampling over Beta
posteriors, a calibrated judge, cooldown, memory-aware priors, and its experiments."""
