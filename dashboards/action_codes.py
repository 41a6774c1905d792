"""What the `action` column of each study's trajectories means (the Trajectories page's legend).
Written from the code that names the actions; a study not listed gets a generic line."""

from __future__ import annotations

ACTION_CODES: dict[str, list[tuple[str, str]]] = {
    "coordinator": [
        ("A", "management (Song et al.): the manager asks solver A; the step's executors list who answered."),
        ("AB|A:to_B,B:answer,C:answer", "delegation: the kick-off set before `|` (A and B get the item), then each "
         "agent's local choice — `answer` itself or `to_X` pass the item to X (coordinator.actions.delegation_actions)."),
    ],
    "routers": [("A", "the solver the router sends the item to; executors lists every solver called (a cascade calls several).")],
    "margent": [
        ("commit", "submit the current candidate answer, calling no further sub-agent."),
        ("delegate:Reasoner>Extractor", "call these sub-agents in this order before committing (Extractor, Reasoner, Verifier)."),
    ],
    "market": [
        ("Fr>Sp#0", "chain market: the task goes to the agent serving the hop French→Spanish, bidder slot 0 of that hop "
         "(languages En, Fr, Ge, Ja, Sp)."),
        ("none", "no bid won: the task was not served this round."),
        ("A#1", "answers market: solver A's bidder slot 1 won the item."),
    ],
    "redref": [
        ("A", "the agent (solver) the task was delegated to."),
        ("finance", "on the simulated split-knowledge runs (split `tasks`) agents are named by their domain of expertise: the agent delegated to."),
    ],
    "credit": [
        ("plan:2,1", "the planner's plan: workers per hop (here two hops, with 2 and 1 workers)."),
        ("direct / search / search_refined / search_scrape", "a worker's tool (credit.env.TOOL_NAMES)."),
    ],
    "history_game": [("Null / Yes", "the help game's physical action: do nothing, or help the other agent at a cost (games.help_game).")],
}


def action_legend(study: str) -> list[tuple[str, str]]:
    return ACTION_CODES.get(study, [("(any)", "this study names its actions itself; see its docs under docs/studies/.")])
