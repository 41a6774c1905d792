"""`dlab game ...`: solve game specs exactly, list and print the builtin games."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from delegation_lab.errors import InputError
from delegation_lab.games.equilibria import DEFAULT_MAX_COMBINATIONS
from delegation_lab.games.limits import DEFAULT_MAX_MEMORY
from delegation_lab.games.report import DEFAULT_MAX_PROFILES

game_app = typer.Typer(help="Exact history-dependent and Markov equilibria of game specs (History Matters §2.3).",
                       no_args_is_help=True)


@game_app.command("solve")
def solve_command(
    spec: Annotated[str, typer.Argument(help="game spec YAML file, or a builtin name (see `dlab game builtin`)")],
    favour: Annotated[str | None, typer.Option(help="player whose value Algorithm 1's selection maximises")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the full result as JSON here")] = None,
    max_combinations: Annotated[int, typer.Option(help="work budget; a larger game fails fast with its estimate")] = DEFAULT_MAX_COMBINATIONS,
    max_profiles: Annotated[int, typer.Option(help="example profiles written per value set in the JSON")] = DEFAULT_MAX_PROFILES,
    max_memory: Annotated[str, typer.Option(help="memory limit (2GiB, 512MiB, ...); a game whose estimate exceeds it is refused before any work")] = DEFAULT_MAX_MEMORY,
) -> None:
    """Every distinct value vector of the deterministic history-dependent subgame-perfect
    equilibria and of the deterministic Markov perfect equilibria, and Algorithm 1's selected
    profile (who does what after which history). Exact arithmetic; values printed to 1e-9."""
    from delegation_lab.games.equilibria import GameTooLarge, solve
    from delegation_lab.games.limits import check_spec_memory, parse_size
    from delegation_lab.games.report import solution_json, solution_text
    from delegation_lab.games.spec import GameSpecError, compile_game, load_game_spec
    from delegation_lab.pipeline.tables import write_json_atomic

    try:
        limit = parse_size(max_memory)
        game_spec = load_game_spec(spec)
        check_spec_memory(game_spec, limit)  # before compiling its tables
        game = compile_game(game_spec)
        json_profiles = 0 if json_out is None else max_profiles + 1  # + the favoured profile
        solution = solve(game, favour, max_combinations, limit, json_profiles)
    except GameSpecError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except GameTooLarge as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    except InputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(solution_text(solution))
    if json_out is not None:
        write_json_atomic(solution_json(solution, max_profiles), json_out)
        typer.echo(f"wrote {json_out}")


@game_app.command("builtin")
def builtin_command(
    name: Annotated[str | None, typer.Argument(help="print this builtin spec (omit to list them)")] = None,
) -> None:
    """List the builtin game specs, or print one (a starting point for your own)."""
    from delegation_lab.games.spec import builtin_names, builtin_text

    if name is None:
        typer.echo("\n".join(builtin_names()))
        return
    try:
        typer.echo(builtin_text(name), nl=False)
    except InputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


__all__ = ["game_app"]
