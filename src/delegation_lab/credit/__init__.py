"""The credit study (SHARP, seed 002): Shapley credit for planner-worker teams, as a general tool
(`dlab credit` on any stored trajectories whose study can replay a coalition) and as a training
study (agent-normalised GRPO on a simulated planner-worker tool-use task).

Modules: `shapley` (exact batched over all coalitions, permutation Monte Carlo with intervals,
leave-one-out), `env` (the multi-hop tool-use environment and its coalition game), `policy` (the
shared seed-ensemble policy), `grpo` (rollout groups, the decomposed reward, per-agent advantages,
clipped updates), `evaluate` (held-out metrics on common draws), `study` (orchestration), `report`
(metrics, summaries, trajectories), `plots`, `replay` (coalition replayers of stored trajectories:
coordinator, credit), `cli` (`dlab credit`), `params` (the params section).
"""
