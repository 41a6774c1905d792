"""`routerbench_pickle`: RouterBench's pandas DataFrame pickle (the wide frame `routerbench` reads).
Unpickling runs code: refused unless trusted (`trust_pickle: true`, `dlab import --trust-pickle`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from delegation_lab.solvers.replay.records import CacheFormat, ReadOptions, ReplayError, threshold_of
from delegation_lab.solvers.replay.routerbench import read_frame

PICKLE_WARNING = (
    "unpickling runs arbitrary code: a RouterBench .pkl can do anything your user can (delete files, "
    "read keys, open connections). Load only a pickle you trust, e.g. one you downloaded yourself from "
    "RouterBench's own release and checked against its published hash."
)


def read_routerbench_pickle(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """RouterBench: wide pandas pickle, `<model>` score, `<model>|model_response`, `<model>|total_cost`."""
    import pandas as pd

    try:
        raw = pd.read_pickle(path)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is bad input
        raise ReplayError(f"{path}: not a readable pandas pickle ({type(e).__name__}: {e})") from None
    if not isinstance(raw, pd.DataFrame):
        raise ReplayError(f"{path}: expected a pickled pandas DataFrame, got {type(raw).__name__}")
    return read_frame(path, raw, "the RouterBench pickle", threshold_of(options))


ROUTERBENCH_PICKLE = CacheFormat(
    read=read_routerbench_pickle, suffixes=(".pkl", ".pickle"), trust_warning=PICKLE_WARNING)
