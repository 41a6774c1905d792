"""Domain 1: synthetic chain translation (seed 004 §5.1).

Languages are nodes, translator agents sit on edges (N per edge, with slightly different costs).
A task is a text in the source language that must end in its target language; the state
concatenates the task's 64-dim embedding (around its target's prototype) and the current
language's 64-dim embedding. An agent is eligible where its edge starts; it bids for the state,
translates (paying its cost) and resells. Reaching the target earns the terminal reward. A text
stranded in a language nobody will buy it from fails.

Monopsonies arise structurally (a node with one outgoing edge, Sp in the default graph) or per task
(Ge has two edges, but only one leads to a given task's target).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from delegation_lab.market.engine import Worlds
from delegation_lab.market.params import ChainParams
from delegation_lab.market.protocols import PROTOCOL_CODES


@dataclass
class ChainState:
    node: torch.Tensor  # [W, K] current language
    task: torch.Tensor  # [W, K] index into the task pool
    target: torch.Tensor  # [W, K] target language
    base_cost: torch.Tensor  # [W, K] route cost so far at the edges' base costs (clones' premiums excluded)


@dataclass(frozen=True)
class ChainCell:
    """One market: its protocol, agents per edge, seed, the cost spread between an edge's agents, the
    belief reading of a Thompson / Bayes-optimal bidder, and which part of the study it serves
    (`main` density sweep, `spread` sweep, `other_reading`)."""

    protocol: str
    density: int
    seed: int
    cost_spread: float = 0.2
    reading: str = "rival_bid"
    group: str = "main"


def density_cells(params: ChainParams, protocols: list[str], seeds: list[int], reading: str = "rival_bid") -> list[ChainCell]:
    """The density sweep's cells: protocol x N x seed at the configured cost spread."""
    return [ChainCell(p, n, s, params.cost_spread, reading) for p in protocols for n in params.densities for s in seeds]


class ChainDomain:
    """Every world (cell) of one bidder, agents padded to the largest density. `cells` default to
    the density sweep over `protocols` x densities x `seeds`."""

    def __init__(
        self, params: ChainParams, protocols: list[str], seeds: list[int], device: str | torch.device = "cpu", cells: list[ChainCell] | None = None
    ):
        g = params.graph
        self.params = params
        self.languages = g.languages()
        self.lang_index = {name: i for i, name in enumerate(self.languages)}
        self.edges = [(e.src, e.dst, e.cost) for e in g.edges]
        self.cells = cells if cells is not None else density_cells(params, protocols, seeds)
        if not self.cells:
            raise ValueError("a chain market needs at least one cell")
        W, E, n_max = len(self.cells), len(self.edges), max(c.density for c in self.cells)
        self.n_per_edge = n_max
        self.n_agents = E * n_max
        self.max_steps = params.max_steps
        self.n_places = len(self.languages)
        self.device = device
        L, D = len(self.languages), params.embedding_dim
        self.n_state = 2 * D
        edge_of = torch.arange(self.n_agents) // n_max
        slot = torch.arange(self.n_agents) % n_max
        self.agent_edge = edge_of
        self.agent_slot = slot
        self.agent_src = torch.tensor([self.lang_index[self.edges[e][0]] for e in edge_of.tolist()], device=device)
        self.agent_dst = torch.tensor([self.lang_index[self.edges[e][1]] for e in edge_of.tolist()], device=device)
        self.agent_names = [f"{self.edges[e][0]}>{self.edges[e][1]}#{j}" for e, j in zip(edge_of.tolist(), slot.tolist(), strict=True)]
        base_cost = torch.tensor([self.edges[e][2] for e in edge_of.tolist()], dtype=torch.float32)
        density = torch.tensor([c.density for c in self.cells])
        cost_spread = torch.tensor([c.cost_spread for c in self.cells], dtype=torch.float32)
        exists = slot[None, :] < density[:, None]
        spread = torch.where(density[:, None] > 1, slot[None, :] / (density[:, None] - 1).clamp_min(1), torch.zeros(1))
        self.agent_cost = (base_cost[None, :] * (1 + cost_spread[:, None] * spread)).to(device)  # [W, A]
        self.agent_base_cost = base_cost.to(device)
        self.exists = exists.to(device)
        self.reward = torch.full((W,), float(params.terminal_reward), device=device)
        self.source = self.lang_index[g.source]
        self.targets = torch.tensor([self.lang_index[t] for t in g.targets], device=device)
        # embeddings: languages, target prototypes and the task pool, drawn per seed
        lang_emb, task_emb, task_target = [], [], []
        for cell in self.cells:
            gen = torch.Generator().manual_seed(10_007 * cell.seed + 17)
            lang_emb.append(torch.randn(L, D, generator=gen))
            proto = torch.randn(len(g.targets), D, generator=gen)
            target = torch.randint(len(g.targets), (params.n_tasks,), generator=gen)
            task_target.append(target)
            task_emb.append(proto[target] + params.task_noise * torch.randn(params.n_tasks, D, generator=gen))
        self.lang_emb = torch.stack(lang_emb).to(device)  # [W, L, D]
        self.task_emb = torch.stack(task_emb).to(device)  # [W, n_tasks, D]
        self.task_target = self.targets[torch.stack(task_target).to(device)]  # [W, n_tasks] language index
        one_hot = torch.nn.functional.one_hot
        ident = torch.cat(
            [one_hot(self.agent_src.cpu(), L).float(), one_hot(self.agent_dst.cpu(), L).float()], dim=-1
        )  # [A, 2L]
        self.identity = torch.cat(
            [ident[None].expand(W, -1, -1), (self.agent_cost.cpu() / params.terminal_reward)[..., None]], dim=-1
        ).to(device)
        self._worlds = torch.arange(W, device=device)[:, None]
        self.protocols = list(dict.fromkeys(c.protocol for c in self.cells))
        cheapest = self.optimal_route_cost()
        self.optimal_cost = torch.tensor([cheapest.get(lang, 0.0) for lang in self.languages], device=device)  # by target
        # candidate table: per language, the agents on its outgoing edges (padded to the max out-degree)
        by_src = [[a for a in range(self.n_agents) if int(self.agent_src[a]) == lang] for lang in range(L)]
        M = max(1, max(len(group) for group in by_src))
        table = torch.zeros(L, M, dtype=torch.long)
        table_valid = torch.zeros(L, M, dtype=torch.bool)
        for lang, group in enumerate(by_src):
            table[lang, : len(group)] = torch.tensor(group, dtype=torch.long)
            table_valid[lang, : len(group)] = True
        self.table, self.table_valid = table.to(device), table_valid.to(device)

    def worlds(self) -> Worlds:
        return Worlds(
            protocol=torch.tensor([PROTOCOL_CODES[c.protocol] for c in self.cells], device=self.device),
            reward=self.reward,
            exists=self.exists,
            init_seeds=[1_000_003 * c.seed + 7919 * c.density + 13 * PROTOCOL_CODES[c.protocol] for c in self.cells],
            win_loss=torch.tensor([c.reading == "win_loss" for c in self.cells], device=self.device),
        )

    # ------------------------------------------------------------------ Domain protocol

    def start(self, round_index: int, n_tasks: int, gen: torch.Generator) -> ChainState:
        W = len(self.cells)
        task = torch.randint(self.params.n_tasks, (W, n_tasks), generator=gen, device=self.device)
        node = torch.full((W, n_tasks), self.source, dtype=torch.long, device=self.device)
        return ChainState(node=node, task=task, target=self.task_target[self._worlds, task], base_cost=torch.zeros(W, n_tasks, device=self.device))

    def features(self, state: ChainState) -> torch.Tensor:
        return torch.cat([self.task_emb[self._worlds, state.task], self.lang_emb[self._worlds, state.node]], dim=-1)

    def feature_tables(self) -> list[torch.Tensor]:
        """The feature blocks `features` concatenates, as per-world tables [W, n, D] (task pool,
        languages), so a frozen trunk's state part is computed once per table row."""
        return [self.task_emb, self.lang_emb]

    def feature_rows(self, state: ChainState) -> list[torch.Tensor]:
        """Each state's row in every `feature_tables` table, [W, K] each."""
        return [state.task, state.node]

    def candidates(self, state: ChainState) -> tuple[torch.Tensor, torch.Tensor]:
        agents = self.table[state.node]  # [W, K, M]
        exists = torch.gather(self.exists, 1, agents.reshape(agents.shape[0], -1)).view_as(agents)
        return agents, self.table_valid[state.node] & exists

    def place(self, state: ChainState) -> torch.Tensor:
        return state.node

    def item(self, state: ChainState) -> torch.Tensor:
        return state.task

    def act(self, state: ChainState, winner: torch.Tensor, acting: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        new_node = self.agent_dst[winner]
        cost = self.agent_cost[self._worlds, winner]
        state.node = torch.where(acting, new_node, state.node)
        state.base_cost = state.base_cost + torch.where(acting, self.agent_base_cost[winner], torch.zeros_like(cost))
        done = acting & (state.node == state.target)
        return cost, done, done

    def holds_success(self, state: ChainState) -> torch.Tensor:
        return torch.zeros_like(state.node, dtype=torch.bool)

    def task_stats(self, state: ChainState, success: torch.Tensor) -> dict[str, torch.Tensor]:
        """Successful tasks that took a cheapest route (at the edges' base costs)."""
        optimal = self.optimal_cost[state.target]
        on_route = success & (state.base_cost <= optimal + 1e-6)
        return {"optimal_route": on_route.float().sum(1)}

    # ------------------------------------------------------------------ reference values

    def centralised_route_cost(self) -> torch.Tensor:
        """[W, n_tasks]: what one planner that sees every agent's cost pays for each task of the pool:
        the cheapest route to the task's target over the agents that exist in that world (at their
        own costs, clones' premiums included), by Bellman-Ford over languages."""
        W, L = len(self.cells), len(self.languages)
        best = torch.full((W, L), float("inf"), device=self.device)
        best[:, self.source] = 0.0
        cost = torch.where(self.exists, self.agent_cost, torch.full_like(self.agent_cost, float("inf")))  # [W, A]
        for _ in range(L):
            via = best[:, self.agent_src] + cost  # [W, A]: reach dst through each agent
            best = best.scatter_reduce(1, self.agent_dst[None].expand(W, -1), via, reduce="amin", include_self=True)
        return torch.gather(best, 1, self.task_target)

    def optimal_route_cost(self) -> dict[str, float]:
        """Cheapest route cost to each target at the base edge costs."""
        best = cheapest_costs(self.languages[self.source], self.edges)
        return {self.languages[int(t)]: best[self.languages[int(t)]] for t in self.targets}


def cheapest_costs(source: str, edges: list[tuple[str, str, float]]) -> dict[str, float]:
    """Cheapest route cost from `source` to every reachable language (Bellman-Ford over the small graph)."""
    best = {source: 0.0}
    for _ in range(len(edges) + 1):
        for src, dst, cost in edges:
            if src in best and best[src] + cost < best.get(dst, float("inf")):
                best[dst] = best[src] + cost
    return best
