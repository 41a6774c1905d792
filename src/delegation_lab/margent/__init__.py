"""MARGENT (seed 001): when is a delegation worth it?

A manager writes the candidate it would submit now, then commits or delegates to one of three
frozen sub-agents (Extractor, Reasoner, Verifier), revises from the structured signal and decides
again. The interventional collector (`collect`) branches from one shared state into commitment
and every delegation and scores each branch; `analysis` reads off marginal values (Tables 1-2);
`distill` turns the shortest successes into supervision under the ρ cap; `policy` is the learned
manager; `evaluate` replays it, the baselines and the oracle on collection-disjoint items.
Teams: `simulator.SimulatedTeam` (embedded default) and `llm_team.LLMTeam` (real models through
the solver protocol). `params.MargentParams` is the `margent:` params section.
"""
