"""Resource limits of `dlab game solve` and the `history_game` stage, checked before any work.

Two limits: the work budget (continuation combinations, `equilibria.Budget`) and memory. Memory is
dominated not by the value sets but by the equilibrium *profile* the report prints and writes: it
prescribes an action after every history of the game tree, so it holds one node per history, and
the histories multiply by (joint actions x next states) per step (2 players x 10 actions, 2 states,
horizon 5: 1.6e9 histories). `estimate_memory` counts them exactly (one pass over the transition
table) and prices each kind of object by what it was measured to take (tracemalloc, CPython 3.11):

  tables       one (step, state, joint action) cell of the compiled game     ~600 B
  profile      one history of `history_profile`                               ~450 B
  JSON         one history kept in an example profile of `--json`             ~1100 B
  combination  one continuation combination `solve_history` enumerates        <= 500 B

The first three are known before solving; the last is spent during the solve against the room the
estimate leaves under the limit (see `equilibria.Budget`).

The IQL study (`estimate_iql_memory`) is sized by params alone, so it is checked when params load:
per condition, a batch of seeds x learners rows (`HistoryGameParams.iql_blocks`) holds its
Q-tables, three float64 curves per (row, episode) and int8 / float32 / int16 step logs of the
reported learner's seeds per (seed, episode, step); the trajectory rows of one condition at a time
(every `trajectory_every`-th episode) then take ~TRAJECTORY_ROW_BYTES each (polars frames and the
JSON `extra` column; measured by ru_maxrss: 490-550 B a row past a fixed ~25 MiB at 80k-640k rows,
with money), and polars' and numpy's working memory at first use IQL_RUNTIME_BYTES (20-60 MiB).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from delegation_lab.errors import InputError
from delegation_lab.games.spec import Game, GameSpec

if TYPE_CHECKING:  # games.params imports this module
    from delegation_lab.games.params import HistoryGameParams

DEFAULT_MAX_MEMORY = "2GiB"
CELL_BYTES = 600
NODE_BYTES = 450
JSON_NODE_BYTES = 1100
COMBINATION_BYTES = 500
PROFILE_NODE_CAP = 5000  # a JSON profile with more histories keeps only its on-path ones (report.py)
RAISE_HINT = "raise --max-memory (params: history_game.equilibria.max_memory) to try anyway"
TRAJECTORY_ROW_BYTES = 800
IQL_RUNTIME_BYTES = 64 * 1024**2

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


class GameTooLarge(InputError):
    """The solve would exceed its work budget or memory limit; the message carries the estimate."""


def parse_size(text: str) -> int:
    """Bytes of a size such as `2GiB`, `512MiB`, `1.5GB` or `1000000` (plain bytes)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise InputError(f"memory size {text!r}: expected a number with an optional unit (B, KB, KiB, MB, MiB, GB, GiB, TB, TiB)")
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size <= 0:
        raise InputError(f"memory size {text!r}: must be positive")
    return size


def fmt_bytes(n: float) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _fmt_big(n: int) -> str:
    return f"{n:,}" if n < 10**7 else f"{n / 10 ** int(math.log10(n)):.1f}e{int(math.log10(n))}"


def size_text(players: list[str] | tuple[str, ...], action_counts: list[int], n_states: int, horizon: int) -> str:
    """`2 players, 10 x 10 = 100 joint actions, 2 states, horizon 5`: what makes a game big."""
    joint = math.prod(action_counts)
    per = " x ".join(str(c) for c in action_counts)
    states = f"{n_states} state" + ("s" if n_states != 1 else "")
    return f"{len(players)} players, {per} = {_fmt_big(joint)} joint actions, {states}, horizon {horizon}"


def history_count(game: Game) -> int:
    """Histories of the game tree (nodes of a history-dependent profile), without enumerating them."""
    counts = {game.initial: 1}
    total = 1
    for t in range(game.horizon - 1):
        following: dict[int, int] = {}
        for x, c in counts.items():
            for j in range(len(game.joint)):
                for y, _ in game.transition[t][x][j]:
                    following[y] = following.get(y, 0) + c
        counts = following
        total += sum(following.values())
    return total


@dataclass(frozen=True)
class MemoryEstimate:
    size: str
    """The game's size in words (players, actions, states, horizon)."""
    histories: int
    bytes: int
    """Estimated peak before the solve's own continuation combinations."""
    parts: dict[str, int]

    def text(self) -> str:
        parts = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in self.parts.items() if v)
        return f"{self.size}: {_fmt_big(self.histories)} histories; estimated {fmt_bytes(self.bytes)} ({parts})"


def _tables_bytes(cells: int, joint: int, action_counts: list[int]) -> int:
    return cells * CELL_BYTES + joint * sum(action_counts) * 8  # + the deviation lists of every joint action


def estimate_memory(game: Game, json_profiles: int = 0) -> MemoryEstimate:
    """Peak memory of solving `game` and reporting it, with `json_profiles` example profiles in the
    JSON (0: text only; `dlab game solve --json` and the stage write up to max_profiles + 1)."""
    counts = [len(a) for a in game.actions]
    joint = len(game.joint)
    histories = history_count(game)
    on_path = sum(len(game.states) ** t for t in range(game.horizon))  # at most, if every step branches everywhere
    kept = histories if histories <= PROFILE_NODE_CAP else min(histories, on_path)
    parts = {
        "tables": _tables_bytes(game.horizon * len(game.states) * joint, joint, counts),
        "profile": histories * NODE_BYTES,
        "JSON": json_profiles * kept * JSON_NODE_BYTES,
    }
    return MemoryEstimate(size_text(game.players, counts, len(game.states), game.horizon), histories,
                          sum(parts.values()), parts)


def check_memory(game: Game, max_memory: int, json_profiles: int = 0) -> MemoryEstimate:
    """The estimate, or GameTooLarge naming it when it exceeds `max_memory` bytes."""
    est = estimate_memory(game, json_profiles)
    if est.bytes > max_memory:
        raise GameTooLarge(f"game {game.name!r} too large for the memory limit: {est.text()} > limit "
                           f"{fmt_bytes(max_memory)}; {RAISE_HINT}")
    return est


def check_spec_memory(spec: GameSpec, max_memory: int) -> None:
    """Before compiling: the compiled tables alone must fit (a spec of a few rules can name
    thousands of actions, and compiling fills one cell per step, state and joint action)."""
    counts = [len(spec.actions[p]) for p in spec.players]
    joint = math.prod(counts)
    need = _tables_bytes(spec.horizon * len(spec.states) * joint, joint, counts)
    if need > max_memory:
        size = size_text(spec.players, counts, len(spec.states), spec.horizon)
        raise GameTooLarge(f"game {spec.name!r} too large for the memory limit: {size}: its tables alone need "
                           f"~{fmt_bytes(need)} > limit {fmt_bytes(max_memory)}; {RAISE_HINT}")


def estimate_iql_memory(params: HistoryGameParams) -> dict[str, int]:
    """Bytes of the history_game IQL study by part (`BatchedIQL`'s arrays for every condition, then
    the trajectory rows of the larger condition), from params alone: nothing is allocated."""
    T, E, S = params.game.steps, params.iql.episodes, params.iql.seeds
    money = params.game.money
    parts = {"Q-tables": 0, "curves": 0, "step logs": 0, "trajectories": 0, "runtime": IQL_RUNTIME_BYTES}
    for has_money in (False, True):
        rows = S * len(params.iql_blocks(has_money))
        dims = len(money.initial_balance["A"]) if has_money else 0
        offers = [len(money.contracts[a]) for a in ("A", "B")] if has_money else [0, 0]
        balances = math.prod(money.initial_balance["A"][k] + money.initial_balance["B"][k] + 1 for k in range(dims))
        states = T * balances * (2 * (1 + max(offers)) + 1) * 2  # (t, balances, last joint action, paid)
        columns = sum(max(2, 1 + n) for n in offers)
        parts["Q-tables"] += rows * states * columns * 8 + states * columns + balances * 2 * dims * 8 * 3
        parts["curves"] += rows * E * 3 * 2 * 8 + E * 40 + rows * T * 2 * (2 + max(offers)) * 8 * 2
        parts["step logs"] += S * (E + 1) * T * (3 + 2 * 4 + 2 * dims * 2)
        kept = S * (-(-E // params.trajectory_every) + 1) * T
        parts["trajectories"] = max(parts["trajectories"], kept * TRAJECTORY_ROW_BYTES)
    return parts


def check_iql_memory(params: HistoryGameParams) -> int:
    """The estimate in bytes, or InputError (a ValueError: pydantic names the section) naming the
    sizes and the estimate when it passes `iql.max_memory`."""
    parts = estimate_iql_memory(params)
    total, limit = sum(parts.values()), parse_size(params.iql.max_memory)
    if total > limit:
        p = params.iql
        detail = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in parts.items() if v)
        raise InputError(
            f"iql.seeds {_fmt_big(p.seeds)} x iql.episodes {_fmt_big(p.episodes)} x game.steps {params.game.steps} "
            f"({len(params.iql_blocks(False))} learners per seed without money, {len(params.iql_blocks(True))} with; "
            f"trajectory_every {params.trajectory_every}) need an estimated {fmt_bytes(total)} ({detail}) > iql.max_memory "
            f"{fmt_bytes(limit)}: lower iql.seeds or iql.episodes (or raise trajectory_every"
            f"{'; the Q-tables grow with the product of game.money balances' if parts['Q-tables'] > total / 2 else ''}), "
            "or raise iql.max_memory")
    return total
