"""History game: exact equilibrium solver vs literal Algorithm 1 and brute force; seed-batched vs per-seed IQL.

Prints, measured in this run: how much faster `solve_history` is than enumerating Algorithm 1's
continuation selectors and than the exhaustive profile searches (same value sets, checked), and
how much faster training 20 IQL seeds in one batch is than training them one after another.
"""

from __future__ import annotations

import time

from delegation_lab.games.bruteforce import every_profile_history_values, random_game_spec, spe_history_values
from delegation_lab.games.equilibria import algorithm1_history_values, fmt_count, solve_history
from delegation_lab.games.help_game import HelpGame
from delegation_lab.games.iql import train_iql
from delegation_lab.games.params import HelpGameParams, IQLParams
from delegation_lab.games.spec import compile_game, load_game, parse_game_spec


def timed(fn, repeat: int = 1):
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return out, (time.perf_counter() - start) / repeat


def rounded(values) -> set:
    return {tuple(round(float(x), 9) for x in v) for v in values}


def main() -> None:
    builtin = load_game("motivating_example")
    two = compile_game(parse_game_spec(random_game_spec(32, n_states=2, horizon=2)))
    three = compile_game(parse_game_spec(random_game_spec(46, n_states=2, horizon=3, max_support=1)))
    for name, game in (("motivating_example", builtin), ("random 2-step, 2 states", two)):
        sol, t_fast = timed(lambda g=game: solve_history(g), repeat=20)
        lit, t_lit = timed(lambda g=game: algorithm1_history_values(g, 10**7))
        every, t_every = timed(lambda g=game: every_profile_history_values(g))
        assert rounded(sol.values()) == rounded(lit) == every[0]
        print(f"{name}: {len(sol.values())} SPE values; {sol.selector_count():,} Algorithm 1 selectors; "
              f"solver vs literal Algorithm 1 {t_lit / t_fast:,.0f}x faster, vs every profile ({every[1]:,} SPE "
              f"of {4 ** 9:,}) {t_every / t_fast:,.0f}x faster")
    sol, t_fast = timed(lambda: solve_history(three), repeat=5)
    brute, t_brute = timed(lambda: spe_history_values(three, 10**6))
    assert rounded(sol.values()) == rounded(brute)
    print(f"random 3-step, 2 states: {len(sol.values())} SPE values from {len(brute):,} SPE profiles; "
          f"Algorithm 1 would enumerate {fmt_count(sol.selector_count())} selectors; "
          f"solver vs exhaustive SPE-profile search {t_brute / t_fast:,.0f}x faster")

    game = HelpGame.from_params(HelpGameParams(), True)
    params = IQLParams(episodes=300, seeds=20)
    _, t_batch = timed(lambda: train_iql(game, params))
    _, t_one = timed(lambda: [train_iql(game, params, seeds=[s]) for s in range(4)])
    t_one *= params.seeds / 4
    print(f"IQL with money, {params.seeds} seeds x {params.episodes} episodes: batched "
          f"{params.seeds * params.episodes / t_batch:,.0f} seed-episodes/s, {t_one / t_batch:.1f}x faster "
          "than one seed at a time")


if __name__ == "__main__":
    main()
