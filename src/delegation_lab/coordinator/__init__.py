"""The coordinator study (History Matters §3.1-3.2): management and delegation environments over
cached answers, a DQN coordinator trained with every seed batched, baselines, and the reporting.

Modules: `params` (the params section), `data` (cache + labels + ability map -> arrays, input
checks), `actions` (route and joint-action tables), `envs` (vectorised envs and Gymnasium
wrappers), `dqn` (the seed-batched trainer), `reference` (the plain single-seed loop it must match),
`baselines`, `study` (orchestration), `results` (metrics, summaries, trajectories), `plots`, and
`hardness` (how the simulated solvers' hardness_weight sets the oracle's accuracy, for the doc).
"""
