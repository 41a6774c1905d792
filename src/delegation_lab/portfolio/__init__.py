"""Portfolio selection: which k models, in what arrangement (single, cascade, router).

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
