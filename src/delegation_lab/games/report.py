"""Readable and JSON forms of an equilibrium solution (values rounded to 1e-9, exact fractions kept)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from delegation_lab.games.equilibria import ProfileNode, Solution, fmt_count, history_profile, history_text
from delegation_lab.games.limits import PROFILE_NODE_CAP
from delegation_lab.games.spec import Game, Value
DEFAULT_MAX_PROFILES = 100  # example profiles per value set in the JSON
FAVOUR_RULE = "max V[favoured], then max sum of values, then the first in sorted order"


def number(x: Fraction) -> float:
    return round(float(x), 9) + 0.0  # + 0.0 turns -0.0 into 0.0


def number_text(x: Fraction) -> str:
    text = f"{number(x):.9f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def values_dict(game: Game, v: Value) -> dict[str, float]:
    return {p: number(x) for p, x in zip(game.players, v, strict=True)}


def exact_dict(game: Game, v: Value) -> dict[str, str]:
    return {p: str(x) for p, x in zip(game.players, v, strict=True)}


def value_text(game: Game, v: Value) -> str:
    return "(" + ", ".join(f"{p} {number_text(x)}" for p, x in zip(game.players, v, strict=True)) + ")"


def _history_json(game: Game, history: tuple[int, ...]) -> list[Any]:
    return [game.states[h] if k % 2 == 0 else game.joint_dict(h) for k, h in enumerate(history)]


def profile_json(game: Game, nodes: list[ProfileNode]) -> dict[str, Any]:
    truncated = len(nodes) > PROFILE_NODE_CAP
    kept = [n for n in nodes if n.on_path] if truncated else nodes
    return {
        "histories": len(nodes),
        "truncated_to_on_path": truncated,
        "nodes": [
            {"step": n.step, "history": _history_json(game, n.history), "actions": game.joint_dict(n.action),
             "role": n.role, "on_path": n.on_path, "values": values_dict(game, n.value)}
            for n in kept
        ],
    }


def markov_profile_json(game: Game, profile: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    return [{"step": t, "state": game.states[x], "actions": game.joint_dict(j)} for t, x, j in profile]


def solution_json(sol: Solution, max_profiles: int = DEFAULT_MAX_PROFILES) -> dict[str, Any]:
    """`{"history": [{"values", "exact", "example_profile"}], "markov": [...], "favoured": {...}, ...}`;
    example profiles for the first `max_profiles` values of each set (null beyond)."""
    game, hist, markov = sol.game, sol.history, sol.markov
    history = []
    for k, v in enumerate(hist.values()):
        prof = profile_json(game, history_profile(hist, v)) if k < max_profiles else None
        history.append({"values": values_dict(game, v), "exact": exact_dict(game, v), "example_profile": prof})
    markov_out = []
    for k, v in enumerate(markov.values()):
        prof = markov_profile_json(game, markov.profile(v)) if k < max_profiles else None
        markov_out.append({"values": values_dict(game, v), "exact": exact_dict(game, v), "example_profile": prof})
    favoured = None
    if sol.favoured is not None:
        favoured = {
            "player": sol.favour, "rule": FAVOUR_RULE, "values": values_dict(game, sol.favoured),
            "exact": exact_dict(game, sol.favoured), "profile": profile_json(game, history_profile(hist, sol.favoured)),
        }
    selectors = hist.selector_count()
    return {
        "game": game.name,
        "players": list(game.players),
        "history": history,
        "markov": markov_out,
        "favoured": favoured,
        "cost": {
            "history": {
                "algorithm1_selectors": selectors,
                "algorithm1_selectors_log10": round(math.log10(selectors), 3) if selectors else None,
                "combinations_enumerated": hist.combinations,
                "per_state": [
                    {"step": c.step, "state": c.state, "selectors": c.selectors, "candidates": c.candidates, "equilibria": c.equilibria}
                    for c in hist.costs
                ],
            },
            "markov": {"profiles": markov.profile_count, "combinations_enumerated": markov.combinations},
        },
    }


def _table(rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _values_table(game: Game, values: list[Value]) -> str:
    if not values:
        return "  (none: some reachable subgame has no pure equilibrium)"
    return _table([["#", *game.players]] + [[str(k + 1), *(number_text(x) for x in v)] for k, v in enumerate(values)])


def profile_text(game: Game, nodes: list[ProfileNode]) -> str:
    shown = [n for n in nodes if n.on_path] if len(nodes) > 200 else nodes
    rows = [["step", "history", *game.players, "role"]]
    rows += [[str(n.step), history_text(game, n.history), *game.joint_dict(n.action).values(), n.role] for n in shown]
    note = f"\n  ({len(nodes)} histories; only the on-path ones are shown)" if shown is not nodes else ""
    return _table(rows) + note


def solution_text(sol: Solution) -> str:
    game, hist, markov = sol.game, sol.history, sol.markov
    out = [
        f"{game.name}: players {', '.join(game.players)}; states {', '.join(game.states)}; "
        f"horizon {game.horizon}; discount {number_text(game.discount)}",
        "",
        f"History-dependent subgame-perfect equilibria (deterministic): {len(hist.values())} distinct value vectors",
        _values_table(game, hist.values()),
        "",
        f"Markov perfect equilibria (deterministic): {len(markov.values())} distinct value vectors",
        _values_table(game, markov.values()),
        "",
    ]
    if sol.favoured is not None:
        who = f"player {sol.favour}" if sol.favour else "no player (--favour not given)"
        out += [f"Algorithm 1's selection favouring {who} ({FAVOUR_RULE}): V = {value_text(game, sol.favoured)}",
                profile_text(game, history_profile(hist, sol.favoured)), ""]
    per_state = "; ".join(f"step {c.step} {c.state}: {fmt_count(c.selectors)}" for c in hist.costs if c.selectors > 1)
    out.append(
        f"Cost: the literal Algorithm 1 enumerates {fmt_count(hist.selector_count())} continuation selectors"
        f"{' (' + per_state + ')' if per_state else ''}; this solver enumerated {hist.combinations:,} continuation "
        f"combinations (history) and {markov.combinations:,} (Markov, of {fmt_count(markov.profile_count)} Markov profiles)."
    )
    return "\n".join(out)
