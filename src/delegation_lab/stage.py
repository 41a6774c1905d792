"""What every stage script shares: argument parsing, params validation, error handling, tracking.

A stage body raises; this wrapper turns bad params into exit code 2 and bad input into exit code
1, each with a message naming the key, file or item, and never a traceback for those.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from delegation_lab.config import Params, load_params
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.tables import Layout
from delegation_lab.tracking import Tracker


@dataclass
class StageContext:
    name: str
    params: Params
    layout: Layout
    tracker: Tracker
    args: argparse.Namespace

    @property
    def progress(self) -> bool:
        return not (self.args.no_progress or os.environ.get("DLAB_NO_PROGRESS"))


def run_stage(
    name: str,
    body: Callable[[StageContext], None],
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: list[str] | None = None,
) -> None:
    parser = argparse.ArgumentParser(prog=f"stages/{name}.py", description=body.__doc__)
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)
        if "torch" in sys.modules:  # the stage's library imported torch: make its numbers repeatable
            from delegation_lab.torch_runtime import make_deterministic

            make_deterministic()
        ctx = StageContext(name, params, Layout(Path(".")), Tracker(params.tracking), args)
        body(ctx)
    except ConfigError as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(2)
    except (InputError, FileNotFoundError, KeyError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"{name}: error: {message}", file=sys.stderr)
        sys.exit(1)
