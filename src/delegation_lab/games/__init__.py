"""Games of History Matters §2.3–§2.4, §3.3: a YAML game-spec format with exact solvers for
deterministic history-dependent and Markov perfect equilibria, and the alternating help game with
virtual money transfer learned by seed-batched independent Q-learning."""
