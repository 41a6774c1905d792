"""`routerbench_csv`: RouterBench's wide frame exported to CSV, as RouterBench derivatives commit it:
one file per dataset, columns `sample_id`, `prompt`, `eval_name` and per model `<model>` (a score in
[0, 1]), `<model>|model_response`, `<model>|total_cost` (read by `routerbench`, as the pickle is).
A leading unnamed column (pandas' index) is dropped; only an empty cell is missing, so a reply
reading "None" or "NA" stays text. The domain is `eval_name`, else the file's stem."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from delegation_lab.solvers.replay.records import CacheFormat, ReadOptions, ReplayError, check_csv, threshold_of
from delegation_lab.solvers.replay.routerbench import read_frame


def read_routerbench_csv(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """One dataset's RouterBench frame as CSV; rows are named as the file's data rows (the header is row 1)."""
    import pandas as pd

    check_csv(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])  # text kept as written
    except pd.errors.EmptyDataError:
        raise ReplayError(f"{path}: empty file (expected a RouterBench CSV with a header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise ReplayError(f"{path}: not a readable CSV ({type(e).__name__}: {e})") from None
    raw = raw.drop(columns=[c for c in raw.columns if str(c).startswith("Unnamed: ")])
    if raw.empty:
        raise ReplayError(f"{path}: no rows (a header only)")
    return read_frame(path, raw, "the RouterBench CSV", threshold_of(options), first_row=2)


ROUTERBENCH_CSV = CacheFormat(read=read_routerbench_csv, suffixes=(".csv",))
