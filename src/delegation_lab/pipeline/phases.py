"""Wall seconds of the named parts of a run: the one clock a stage and its study time themselves by.

A stage times a part with `ctx.phase(name)` (its `Phases`), which lands in
metrics/timings/<stage>.json; a study gets the same `Phases` passed in when a part happens inside it
(e.g. one DQN batch). A part that runs in a worker process is timed there with `stopwatch` and its
seconds `add`ed here when the result arrives; a figure that is not a phase of the stage (one
method's share of a batch) comes from `stopwatch` too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass


@dataclass
class Lap:
    """The seconds of one timed part, set when its block ends."""

    seconds: float = 0.0


class Phases(dict[str, float]):
    """Phase name -> wall seconds (3 decimals), summed over every time the phase ran."""

    def add(self, name: str, seconds: float) -> None:
        self[name] = round(self.get(name, 0.0) + seconds, 3)

    @contextmanager
    def __call__(self, name: str) -> Iterator[Lap]:
        lap, start = Lap(), time.perf_counter()
        try:
            yield lap
        finally:
            lap.seconds = time.perf_counter() - start
            self.add(name, lap.seconds)


def stopwatch() -> AbstractContextManager[Lap]:
    """Time a block that is not a phase of its own (a worker's job, one method's share)."""
    return Phases()("lap")
