"""What every stage script shares: argument parsing, params validation, error handling, tracking.

A stage body raises; this wrapper turns bad params (ConfigError) into exit code 2 and bad input
(InputError, a missing input file) into exit code 1 (2 for input refused outright: its `exit_code`), each one line naming the key, file or item.
Anything else (a KeyError included) is a bug: it propagates with its traceback.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from delegation_lab.params.root import Params, load_params
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.numerics import describe, pin_numerics
from delegation_lab.params.model import StudyParams
from delegation_lab.pipeline.phases import Lap, Phases, stopwatch
from delegation_lab.pipeline.skip import skip_stage
from delegation_lab.tracking.tracker import Tracker


@dataclass
class StageContext:
    name: str
    params: Params
    layout: Layout
    tracker: Tracker
    args: argparse.Namespace
    phases: Phases = field(default_factory=Phases)

    @property
    def progress(self) -> bool:
        return not (self.args.no_progress or os.environ.get("DLAB_NO_PROGRESS"))

    def phase(self, name: str) -> AbstractContextManager[Lap]:
        """Time a part of the stage that matters (wall seconds), reported in metrics/timings/; a
        study times its own parts with `ctx.phases` passed in."""
        return self.phases(name)


def _cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def write_timings(ctx: StageContext, stage: str, wall: float, cpu: float) -> None:
    """Write metrics/timings/<stage>.json: wall and CPU seconds and the phases, so `dvc metrics diff` shows a
    slowdown like any other regression, and the numerics the stage's figures were computed under (pins,
    library versions, CPU: `numerics.describe`), which `dlab repro check` compares."""
    from delegation_lab.pipeline.tables import write_json_atomic

    write_json_atomic({"seconds": round(wall, 3), "cpu_seconds": round(cpu, 3), "phases": dict(ctx.phases),
                       "numerics": describe()}, ctx.layout.timings(stage))


def run_stage(
    name: str,
    body: Callable[[StageContext], None],
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: list[str] | None = None,
    section: str | None = None,
) -> None:
    """Run `body` as stage `name`. `section` names the study section whose `enabled: false` makes the
    stage write its outputs as skipped instead (default: the section called like the stage).
    Run from the command line (`argv` None), the process first takes the pinned numerics
    (numerics.pin_numerics: the same figures on every x86-64 machine)."""
    if argv is None:
        pin_numerics()
    parser = argparse.ArgumentParser(prog=f"stages/{name}.py", description=body.__doc__)
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)
        if "torch" in sys.modules:  # the stage's library imported torch: make its numbers repeatable
            from delegation_lab.pipeline.torch_runtime import make_deterministic

            make_deterministic()
        ctx = StageContext(name, params, Layout(Path(".")), Tracker(params.tracking), args)
        cpu = _cpu_seconds()
        with stopwatch() as wall:
            if switched_off(params, name, section):
                skip_stage(ctx.layout, name, f"{section or name}.enabled is false in {args.params}")
            else:
                body(ctx)
        write_timings(ctx, name, wall.seconds, _cpu_seconds() - cpu)
    except ConfigError as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(2)
    except (InputError, FileNotFoundError) as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        sys.exit(getattr(e, "exit_code", 1))


def switched_off(params: Params, name: str, section: str | None = None) -> bool:
    """Does the stage's study section (`section`, default the stage's name) say `enabled: false`?"""
    study = getattr(params, section or name, None)
    return isinstance(study, StudyParams) and not study.enabled


def skip_if_disabled(name: str, section: str | None = None) -> None:
    """A study stage script's first call, after the pins and before its own imports: when the study
    is switched off, the stage writes its outputs as skipped (`run_stage`, as for any skipped study)
    and the process exits, without loading the study's code and libraries (torch and the rest: 3-5
    CPU s a stage, paid by every experiment that switches the study off). Params that do not load
    are left to `run_stage` to report."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--params", default="params.yaml")
    try:
        params = load_params(parser.parse_known_args()[0].params)
    except (ConfigError, InputError, OSError):
        return
    if switched_off(params, name, section):
        run_stage(name, _switched_off_body, argv=sys.argv[1:], section=section)
        sys.exit(0)


def _switched_off_body(ctx: StageContext) -> None:
    raise AssertionError(f"stage {ctx.name}: its study is switched off, yet its body ran")
