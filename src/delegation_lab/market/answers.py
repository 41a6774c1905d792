"""Domain 2: a market over the platform's cached solver answers.

The frozen solvers (A, B, C by default) become bidding agents. A task is a benchmark item: the
consumer posts it, the solvers bid for the right to answer it, and the winner pays its own cached
solve cost (`cost_usd` of its answer) and holds the answer. With the verifier step on, the shared
verifier (`evaluation.verifier`: the same verdict on (solver, item, seed) as in every other method)
then checks the answer: accepted, the task ends; rejected, the state (the item plus who already
failed on it) goes back to the market and the holder resells it to another solver, up to
`max_solves` solves. A solver never bids on an item it already answered (its cached answer would
not change). The final answer earns the terminal reward when it is correct (the gold labels, never
the verdict), paid by the consumer to the agent that produced it.

No solver is ever called: correctness and cost come from `tables.read_labeled_answers`. Bidders
learn on the train split; the test split is then auctioned once with learning and exploration off.
The terminal reward sets the market's willingness to pay, so each reward level is one operating
point on the cost-accuracy frontier.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from delegation_lab.errors import InputError
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.market.engine import Worlds
from delegation_lab.market.params import AnswersParams
from delegation_lab.market.protocols import PROTOCOL_CODES

MAX_DIFFICULTY_BUCKETS = 16


@dataclass
class SplitMatrix:
    """Per-item correctness and cost of every solver on one split."""

    item_ids: list[str]
    correct: torch.Tensor  # [n_items, S] bool
    cost: torch.Tensor  # [n_items, S] $
    bucket: torch.Tensor  # [n_items] difficulty bucket index


def solver_matrices(labeled: pl.DataFrame, solvers: list[str]) -> tuple[dict[str, SplitMatrix], int]:
    """Train and test matrices from labeled answers, checking every (item, solver) is present."""
    present = set(labeled["solver"].unique().to_list())
    missing = [s for s in solvers if s not in present]
    if missing:
        raise InputError(
            f"market.answers.solvers: no labeled answers for {missing} in data/labels.parquet "
            f"(labeled solvers: {sorted(present)}); run `dvc repro label` or fix the list"
        )
    rows = labeled.filter(pl.col("solver").is_in(solvers))
    difficulties = sorted(rows.filter(pl.col("split").is_in(["train", "test"]))["difficulty"].drop_nulls().unique().to_list())
    if len(difficulties) > MAX_DIFFICULTY_BUCKETS:  # quantile buckets keep the features small
        edges = np.quantile(np.array(difficulties), np.linspace(0, 1, MAX_DIFFICULTY_BUCKETS + 1)[1:-1])
        bucket_of = {d: int(np.searchsorted(edges, d, side="right")) for d in difficulties}
    else:
        bucket_of = {d: i for i, d in enumerate(difficulties)}
    out = {}
    for split in ("train", "test"):
        part = rows.filter(pl.col("split") == split)
        if part.is_empty():
            raise InputError(f"{Layout().labels} has no labeled `{split}` items for solvers {solvers}; run `dvc repro label`")
        wide_c = part.pivot(on="solver", index=["item_id", "difficulty"], values="correct").sort("item_id")
        wide_k = part.pivot(on="solver", index="item_id", values="cost_usd").sort("item_id")
        incomplete = wide_c.select(solvers).null_count().sum_horizontal().item() + wide_k.select(solvers).null_count().sum_horizontal().item()
        if incomplete:
            raise InputError(
                f"{Layout().labels}: {incomplete} ({split} item, solver) answers are missing for {solvers}; "
                "every solver must have answered every item (run `dvc repro label`)"
            )
        out[split] = SplitMatrix(
            item_ids=wide_c["item_id"].to_list(),
            correct=torch.tensor(wide_c.select(solvers).to_numpy().astype(bool)),
            cost=torch.tensor(wide_k.select(solvers).to_numpy().astype(np.float32)),
            bucket=torch.tensor([bucket_of.get(d, 0) for d in wide_c["difficulty"].fill_null(difficulties[0] if difficulties else 0).to_list()]),
        )
    return out, max(1, len(set(bucket_of.values())))


@dataclass
class AnswersState:
    item: torch.Tensor  # [W, K] item index in the current split
    tried: torch.Tensor  # [W, K, S] solvers that already answered
    solves: torch.Tensor  # [W, K] answers so far
    last_correct: torch.Tensor  # [W, K] the held answer is correct


@dataclass(frozen=True)
class AnswersCell:
    protocol: str
    multiple: float
    seed: int


class AnswersDomain:
    """Every (protocol, reward multiple, seed) world of one bidder."""

    def __init__(
        self,
        matrices: dict[str, SplitMatrix],
        n_buckets: int,
        solvers: list[str],
        params: AnswersParams,
        protocols: list[str],
        seeds: list[int],
        verifier: Verifier,
        device: str | torch.device = "cpu",
    ):
        self.matrices = {k: SplitMatrix(m.item_ids, m.correct.to(device), m.cost.to(device), m.bucket.to(device)) for k, m in matrices.items()}
        self.solvers, self.params, self.device = solvers, params, device
        self.cells = [AnswersCell(p, float(m), s) for p in protocols for m in params.reward_multiples for s in seeds]
        S, n = len(solvers), params.agents_per_solver
        W = len(self.cells)
        self.n_agents = S * n
        self.agent_solver = torch.arange(self.n_agents, device=device) // n
        slot = torch.arange(self.n_agents) % n
        self.agent_names = [solvers[a // n] if n == 1 else f"{solvers[a // n]}#{a % n}" for a in range(self.n_agents)]
        self.cost_mult = (1 + params.cost_spread * (slot / max(n - 1, 1))).to(device)  # [A]
        self.reward_unit = float(matrices["train"].cost.mean(0).max())  # the priciest solver's mean cost per item
        self.reward = torch.tensor([c.multiple * self.reward_unit for c in self.cells], device=device)
        self.max_steps = params.verifier.max_solves if params.verifier.enabled else 1
        self.max_steps = min(self.max_steps, S)
        self.n_places = self.max_steps
        self.n_buckets = n_buckets
        self.n_state = n_buckets + S + 1
        one_hot = torch.nn.functional.one_hot
        ident = torch.cat([one_hot(self.agent_solver.cpu(), S).float(), (self.cost_mult.cpu() - 1)[:, None]], dim=-1)
        self.identity = ident[None].expand(W, -1, -1).to(device)
        self.exists = torch.ones(W, self.n_agents, dtype=torch.bool, device=device)
        self._worlds = torch.arange(W, device=device)[:, None]
        self.seeds = seeds
        self.world_seed_index = torch.tensor([seeds.index(c.seed) for c in self.cells], device=device)
        self.split = "train"
        self.order: torch.Tensor | None = None
        self.verifier = verifier
        # verdicts[split][seed index, item, solver]: looked up, never drawn, so every method sees the same ones
        self.verdicts = {
            k: torch.tensor(verifier.table(solvers, m.item_ids, m.correct.cpu().numpy(), seeds), device=device)
            for k, m in matrices.items()
        } if params.verifier.enabled else {}

    @property
    def verifier_name(self) -> str:
        """What decided acceptance: the shared verifier's name, or `none` (the first answer is final)."""
        return self.verifier.name if self.params.verifier.enabled else "none"

    def worlds(self) -> Worlds:
        return Worlds(
            protocol=torch.tensor([PROTOCOL_CODES[c.protocol] for c in self.cells], device=self.device),
            reward=self.reward,
            exists=self.exists,
            init_seeds=[1_000_003 * c.seed + int(1000 * c.multiple) + 13 * PROTOCOL_CODES[c.protocol] for c in self.cells],
        )

    def begin(self, split: str, epoch: int) -> int:
        """Switch to a split and shuffle its items per seed; returns the number of items."""
        self.split = split
        n = len(self.matrices[split].item_ids)
        orders = []
        for seed in self.seeds:
            rng = np.random.default_rng([seed, epoch, 0 if split == "train" else 1])
            orders.append(torch.tensor(rng.permutation(n)))
        self.order = torch.stack(orders).to(self.device)[self.world_seed_index]  # [W, n]
        self.cursor = 0
        return n

    # ------------------------------------------------------------------ Domain protocol

    def start(self, round_index: int, n_tasks: int, gen: torch.Generator) -> AnswersState:
        assert self.order is not None, "call begin(split, epoch) first"
        item = self.order[:, self.cursor : self.cursor + n_tasks]
        self.cursor += n_tasks
        W, K = item.shape
        S = len(self.solvers)
        return AnswersState(
            item=item,
            tried=torch.zeros(W, K, S, dtype=torch.bool, device=self.device),
            solves=torch.zeros(W, K, dtype=torch.long, device=self.device),
            last_correct=torch.zeros(W, K, dtype=torch.bool, device=self.device),
        )

    def features(self, state: AnswersState) -> torch.Tensor:
        m = self.matrices[self.split]
        bucket = torch.nn.functional.one_hot(m.bucket[state.item], self.n_buckets).float()
        return torch.cat([bucket, state.tried.float(), torch.ones_like(state.item, dtype=torch.float32)[..., None]], dim=-1)

    def state_codes(self, state: AnswersState) -> torch.Tensor:
        """[W, K] index of each state's features among `code_features()` (bucket x solvers tried):
        the states are few, so a frozen trunk's activations are computed once per code."""
        S = len(self.solvers)
        bucket = self.matrices[self.split].bucket[state.item]
        tried = (state.tried.long() << torch.arange(S, device=self.device)).sum(-1)
        return bucket * (1 << S) + tried

    def code_features(self) -> torch.Tensor:
        """[n_buckets x 2^S, F]: the features of every state code, as `features` builds them."""
        S = len(self.solvers)
        code = torch.arange(self.n_buckets * (1 << S), device=self.device)
        bucket = torch.nn.functional.one_hot(code >> S, self.n_buckets).float()
        tried = ((code[:, None] >> torch.arange(S, device=self.device)) & 1).float()
        return torch.cat([bucket, tried, torch.ones(code.shape[0], 1, device=self.device)], dim=-1)

    def candidates(self, state: AnswersState) -> tuple[torch.Tensor, torch.Tensor]:
        W, K = state.item.shape
        agents = torch.arange(self.n_agents, device=self.device).expand(W, K, -1)
        valid = ~state.tried[..., self.agent_solver] & (state.solves < self.max_steps)[..., None]
        return agents, valid

    def place(self, state: AnswersState) -> torch.Tensor:
        return state.solves.clamp_max(self.n_places - 1)

    def item(self, state: AnswersState) -> torch.Tensor:
        return state.item

    def act(self, state: AnswersState, winner: torch.Tensor, acting: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        m = self.matrices[self.split]
        solver = self.agent_solver[winner]  # [W, K]
        correct = m.correct[state.item, solver]
        cost = m.cost[state.item, solver] * self.cost_mult[winner]
        if self.params.verifier.enabled:
            seed = self.world_seed_index[:, None].expand_as(solver)
            accepted = self.verdicts[self.split][seed, state.item, solver]
        else:
            accepted = torch.ones_like(correct)
        state.tried = state.tried | (acting[..., None] & torch.nn.functional.one_hot(solver, len(self.solvers)).bool())
        state.solves = state.solves + acting.long()
        state.last_correct = torch.where(acting, correct, state.last_correct)
        out_of_solvers = state.tried.all(-1) | (state.solves >= self.max_steps)
        done = acting & (accepted | out_of_solvers)
        return cost, done, correct

    def holds_success(self, state: AnswersState) -> torch.Tensor:
        return state.last_correct & (state.solves > 0)

    def item_ids(self, item: np.ndarray) -> np.ndarray:
        return np.asarray(self.matrices[self.split].item_ids, dtype=object)[item]
