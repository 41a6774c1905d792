"""Bidder networks: every agent of every market evaluated on every state in one batched pass.

The valuation network is a small MLP over the state features and the agent's identity features
(the edge it serves or the solver behind it, and its cost), predicting v and sigma, plus two raw
shade outputs each bidder interprets. By default the hidden layer is shared within a market (its
state part is computed once per state for all agents), while each agent's output heads are its
own; `trunk: private` gives every agent its own hidden layer as well (seed 004 §4: "a lightweight
MLP for each agent"). Weights are stacked [worlds, agents, ...], so one call evaluates all bidders
of all markets; values are in units of the terminal reward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

N_OUT = 4  # value, value spread, shade output 1, shade output 2


@dataclass
class Heads:
    value: torch.Tensor  # [..., A] expected P_in + reward - cost, in units of the terminal reward
    value_std: torch.Tensor
    s1: torch.Tensor  # raw shade outputs, read by the bidder
    s2: torch.Tensor


def inverse_softplus(y: float) -> float:
    return math.log(math.expm1(y))


VALUE_STD_INIT = 0.5


def read_heads(out: torch.Tensor, value_init: float) -> Heads:
    return Heads(
        value=value_init + out[..., 0],
        value_std=F.softplus(out[..., 1] + inverse_softplus(VALUE_STD_INIT)) + 0.01,
        s1=out[..., 2],
        s2=out[..., 3],
    )


class AgentNets(nn.Module):
    """Bidder networks of `n_worlds` independent markets with `n_agents` agents each.

    trunk "shared": one hidden layer per market over (state, agent identity), computed once per
    state for all agents (the state part) plus a per-agent identity term; every agent's output
    heads (value, spread, shade) are its own. trunk "private": every agent its own hidden layer
    too (seed 004 §4's "lightweight MLP for each agent"), A times the compute.
    """

    def __init__(
        self,
        n_worlds: int,
        n_agents: int,
        n_state: int,
        identity: torch.Tensor,  # [W, A, I]
        hidden: int,
        trunk: str,
        seeds: list[int],
        device: str | torch.device = "cpu",
    ):
        super().__init__()
        if len(seeds) != n_worlds:
            raise ValueError(f"one init seed per world: got {len(seeds)} for {n_worlds} worlds")
        if trunk not in ("frozen", "shared", "private"):
            raise ValueError(f"trunk must be 'frozen', 'shared' or 'private', got {trunk!r}")
        self.n_agents, self.trunk = n_agents, trunk
        per = n_agents if trunk == "private" else 1
        n_id = identity.shape[-1]
        fan_in = n_state + n_id
        w_state = torch.empty(n_worlds, per, n_state, hidden)
        w_id = torch.empty(n_worlds, per, n_id, hidden)
        for w, seed in enumerate(seeds):  # each market's init depends on its own seed only
            gen = torch.Generator().manual_seed(int(seed))
            w_state[w] = torch.randn(per, n_state, hidden, generator=gen) / math.sqrt(fan_in)
            w_id[w] = torch.randn(per, n_id, hidden, generator=gen) / math.sqrt(fan_in)
        trainable = trunk != "frozen"
        self.w_state = nn.Parameter(w_state.to(device), requires_grad=trainable)  # [W, per, F, H]
        self.w_id = nn.Parameter(w_id.to(device), requires_grad=trainable)  # [W, per, I, H]
        self.b_hidden = nn.Parameter(torch.zeros(n_worlds, per, hidden, device=device), requires_grad=trainable)
        self.w_out = nn.Parameter(torch.zeros(n_worlds, n_agents, hidden, N_OUT, device=device))  # private heads
        self.b_out = nn.Parameter(torch.zeros(n_worlds, n_agents, N_OUT, device=device))
        self.register_buffer("identity", identity.to(device))  # [W, A, I]

    def hidden_layer(self, x: torch.Tensor) -> torch.Tensor:
        """x: [W, N, F] -> [W, N, A, H]."""
        if self.trunk != "private":
            state = x @ self.w_state[:, 0]  # [W, N, H]: once per state, whatever the number of agents
            ident = self.identity @ self.w_id[:, 0] + self.b_hidden  # [W, A, H]
            return torch.tanh(state[:, :, None, :] + ident[:, None, :, :])
        state = x.unsqueeze(1) @ self.w_state  # [W, A, N, H]
        ident = (self.identity.unsqueeze(2) @ self.w_id).squeeze(2) + self.b_hidden  # [W, A, H]
        return torch.tanh(state + ident[:, :, None, :]).transpose(1, 2)

    def output(self, h: torch.Tensor) -> torch.Tensor:
        """Hidden activations [W, N, A, H] -> every agent's private heads [W, N, A, N_OUT]."""
        return torch.einsum("wnah,waho->wnao", h, self.w_out) + self.b_out[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [W, N, F] states -> [W, N, A, N_OUT]: every agent on every state in one pass."""
        return self.output(self.hidden_layer(x))

    @property
    def frozen(self) -> bool:
        return self.trunk == "frozen"

    @staticmethod
    def pick(out: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
        """[W, N, A, N_OUT] -> the bidders' rows [W, N, M, N_OUT]."""
        return torch.gather(out, 2, agents[..., None].expand(-1, -1, -1, out.shape[-1]))

    def code_hidden(self, codes_x: torch.Tensor) -> torch.Tensor:
        """Features of every distinct state [C, F] (shared by all markets) -> [W, C, A, H]."""
        return self.hidden_layer(codes_x[None].expand(self.w_state.shape[0], -1, -1))

    def candidate_hidden(self, x: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
        """x: [W, N, F], agents: [W, N, M] -> hidden activations of the candidates only [W, N, M, H]
        (the state part once per state, the identity part gathered per candidate)."""
        if self.trunk == "private":
            h = self.hidden_layer(x)
            return torch.gather(h, 2, agents[..., None].expand(-1, -1, -1, h.shape[-1]))
        W, N, M = agents.shape
        state = x @ self.w_state[:, 0]  # [W, N, H]
        ident = self.identity @ self.w_id[:, 0] + self.b_hidden  # [W, A, H]
        ident = torch.gather(ident, 1, agents.reshape(W, -1, 1).expand(-1, -1, ident.shape[-1])).view(W, N, M, -1)
        return torch.tanh(state[:, :, None, :] + ident)

    def candidate_output(self, h: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
        """Candidates' hidden activations [W, N, M, H] -> their private heads [W, N, M, N_OUT]: each
        candidate's head weights gathered, so no work is spent on agents that do not bid."""
        world = torch.arange(agents.shape[0], device=agents.device)[:, None, None]
        return torch.einsum("wnmh,wnmho->wnmo", h, self.w_out[world, agents]) + self.b_out[world, agents]

    def hidden_at(self, x: torch.Tensor, at: tuple[torch.Tensor, ...], agent: torch.Tensor) -> torch.Tensor:
        """Hidden activations [J, H] of listed (world, state, slot) entries `at` for the agents there
        (x: [W, N, F]); the state part is computed once per state."""
        world, n = at[0], at[1]
        if self.trunk == "private":
            h = self.hidden_layer(x)  # [W, N, A, H]
            return h[world, n, agent]
        state = (x @ self.w_state[:, 0])[world, n]  # [J, H]
        return torch.tanh(state + self.identity_part()[world, agent])

    def table_parts(self, tables: list[torch.Tensor]) -> list[torch.Tensor]:
        """A frozen trunk's state part of each feature block: tables [W, n_i, D_i] (concatenated in
        order they make the features) -> [W, n_i, H] each."""
        parts, start = [], 0
        with torch.no_grad():
            for table in tables:
                parts.append(table @ self.w_state[:, 0, start : start + table.shape[-1]])
                start += table.shape[-1]
        return parts

    def hidden_from_parts(self, parts: list[torch.Tensor], rows: list[torch.Tensor], at: tuple[torch.Tensor, ...], agent: torch.Tensor) -> torch.Tensor:
        """`hidden_at` from precomputed state parts: rows [W, N] per part, entries `at` -> [J, H]."""
        world, n = at[0], at[1]
        state = sum(part[world, row[world, n]] for part, row in zip(parts, rows, strict=True))
        return torch.tanh(state + self.identity_part()[world, agent])

    def identity_part(self) -> torch.Tensor:
        """[W, A, H] the identity term of the (non-private) hidden layer; a frozen trunk's is computed once."""
        if self.frozen:
            if getattr(self, "_identity_part", None) is None:
                with torch.no_grad():
                    self._identity_part = self.identity @ self.w_id[:, 0] + self.b_hidden
            return self._identity_part
        return self.identity @ self.w_id[:, 0] + self.b_hidden

    def output_at(self, h: torch.Tensor, world: torch.Tensor, agent: torch.Tensor) -> torch.Tensor:
        """Heads of listed (world, agent) pairs from their hidden activations: h [J, H] -> [J, N_OUT]."""
        flat = world * self.n_agents + agent  # index_select: its backward is one index_add, not an accumulating index_put
        W, A, H, O = self.w_out.shape
        weights = torch.index_select(self.w_out.reshape(W * A, H * O), 0, flat).view(-1, H, O)
        # a multiply-and-sum over H, not J tiny matrix products
        return (h[:, :, None] * weights).sum(1) + torch.index_select(self.b_out.reshape(W * A, O), 0, flat)

    @staticmethod
    def by_candidates(agents: torch.Tensor, n_agents: int) -> bool:
        """Gather per candidate when auctions see a minority of the agents (chain: an edge's N agents
        out of all of them); evaluate every agent and pick when most agents bid everywhere (answers)."""
        return 2 * agents.shape[-1] <= n_agents

    def forward_candidates(self, x: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
        """x: [W, N, F] states, agents: [W, N, M] the bidders of each state's auction (any valid
        index where padded) -> [W, N, M, N_OUT]. Every agent is evaluated in the one batched pass
        and the bidders' outputs are picked out (cheaper than gathering per-bidder weights)."""
        return self.pick(self(x), agents)

    def forward_agent(self, x: torch.Tensor, agent: int) -> torch.Tensor:
        """x: [W, N, F] -> [W, N, N_OUT] for one agent alone: the per-agent path the benchmark compares against."""
        j = agent if self.trunk == "private" else 0
        h = x @ self.w_state[:, j] + (self.identity[:, agent : agent + 1] @ self.w_id[:, j]) + self.b_hidden[:, None, j]
        return torch.tanh(h) @ self.w_out[:, agent] + self.b_out[:, None, agent]
