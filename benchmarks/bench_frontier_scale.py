"""Frontier build time for N = 3, 10, 20, 42 solvers on ZeroEval's GSM8K answers, as ratios to N = 3.

The data: ../shared/data/zeroeval_gsm/gsm (42 models' raw replies to the 1,319 GSM8K test questions;
`BENCH_ZEROEVAL` names another folder), skipped with a message when absent. The items every model
answered (one model answers 681) are split in two by position: even rows are the search split
(`train`, where the cascades are searched), odd rows the reported split (`test`). The N solvers are
the first N of one fixed shuffle of the 42 (so each set holds the smaller ones). An answer is the
reply's JSON `answer` (else its final number), graded by the `numeric` matcher against the gold;
its cost is the estimated tokens (prompt + reply, `pricing.estimate_tokens`) at a per-model price
drawn log-uniform in [0.1, 15] US$/Mtok from the model's name: the timing depends on how many
solvers, items and kept cascades there are, not on which model costs what.

One run times `frontier.build_frontier` (the frontier stage's computation; reading its tables and
drawing its plot are left out) with the default `FrontierParams` (max_length 4, beam 16,
5 verifier seeds, 1000 bootstrap resamples; a judge with 5 % false-positive and false-negative
rates), best of 3, per N, and prints each time as a ratio to N = 3's, the search size, and the
growth exponent between N = 10 and N = 42 (time ~ N^x); it says whether the growth is at most about
N^2. N = 3 is exhaustive (4 cascades, every pair's mixtures, an interval on every point); the
larger sets are searched. A last line checks the search against exhaustive enumeration at N = 20
(6,175 cascades): how many of the exhaustive Pareto front's cascades the search keeps, on the
search split.

`read_answers` reads one model's file into the columns the `zeroeval` replay format gives
(model, source_index, prompt, response, gold, parsed_answer), so the registered reader,
`FORMATS["zeroeval"].read`, can replace it when that format is on the branch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.params.root import FrontierParams
from delegation_lab.evaluation import Verifier
from delegation_lab.frontier.build import SolverMatrix, build_frontier, pareto_mask
from delegation_lab.frontier.cascades import all_cascades, run_cascade, search_cascades, verdicts, verifier_seeds
from delegation_lab.labeling.matchers import MatchSettings, MatchStats, ToMatch, match_numeric
from delegation_lab.parsing import normalise_number, parse_number_answer
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.solvers.pricing import estimate_tokens

DATA = Path(os.environ.get("BENCH_ZEROEVAL", Path(__file__).resolve().parents[2] / "shared" / "data" / "zeroeval_gsm" / "gsm"))
SIZES = (3, 10, 20, 42)
REPEATS = 3
JUDGE = Verifier("judge", 0.05, 0.05, 0, "configured")
_JSON_BLOCK = re.compile(r"\{.*?\}", re.DOTALL)


def reply_answer(reply: str | None) -> str | None:
    """The reply's JSON `answer`, else the number its text commits to."""
    if not reply:
        return None
    for block in _JSON_BLOCK.findall(reply):
        try:
            answer = json.loads(block, strict=False).get("answer")
        except (json.JSONDecodeError, AttributeError):
            continue
        if answer not in (None, ""):
            return normalise_number(str(answer)) or parse_number_answer(str(answer)) or str(answer)
    return parse_number_answer(reply)


def read_answers(path: Path) -> pl.DataFrame:
    """One ZeroEval result file as the `zeroeval` replay format's columns."""
    rows = [{"model": path.stem, "source_index": r["id"], "prompt": r["question"], "response": (r["output"] or [None])[0],
             "gold": normalise_number(r["answer"].replace("#", "")) or r["answer"]}
            for r in json.loads(path.read_text(encoding="utf-8"))]
    return pl.DataFrame(rows).with_columns(pl.col("response").map_elements(reply_answer, return_dtype=pl.String).alias("parsed_answer"))


def price_per_token(model: str) -> float:
    u = int(hashlib.sha256(model.encode()).hexdigest()[:8], 16) / 16**8
    return 0.1 * 150**u / 1e6


def labeled_answers(folder: Path) -> pl.DataFrame:
    """(item_id, solver, correct, cost_usd, split) for the items every model answered."""
    frames = []
    for path in sorted(folder.glob("*.json")):
        answers = read_answers(path)
        correct = match_numeric([ToMatch(p, r, g) for p, r, g in answers.select("parsed_answer", "response", "gold").iter_rows()],
                                MatchSettings(), MatchStats())
        tokens = [estimate_tokens(q) + estimate_tokens(r) for q, r in answers.select("prompt", "response").iter_rows()]
        frames.append(answers.select(pl.col("source_index").alias("item_id"), pl.col("model").alias("solver")).with_columns(
            pl.Series("correct", correct), pl.Series("cost_usd", np.array(tokens) * price_per_token(path.stem))))
    labeled = pl.concat(frames)
    models = labeled["solver"].n_unique()
    everyone = labeled.group_by("item_id").agg(pl.col("solver").n_unique() == models).filter(pl.col("solver"))["item_id"].sort()
    split = pl.DataFrame({"item_id": everyone, "split": ["train" if k % 2 == 0 else "test" for k in range(len(everyone))]})
    return labeled.join(split, on="item_id")


def best_time(labeled: pl.DataFrame, solvers: list[str], params: FrontierParams) -> tuple[float, dict, int]:
    mine = labeled.filter(pl.col("solver").is_in(solvers))
    test, train = mine.filter(pl.col("split") == "test"), mine.filter(pl.col("split") == "train")
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        table, metrics = build_frontier(test, pl.DataFrame(schema=SUMMARY_SCHEMA), params, "gsm8k", verifier=JUDGE,
                                        search_labeled=train)
        times.append(time.perf_counter() - start)
    return min(times), metrics["search"], table.height


def front_recall(labeled: pl.DataFrame, solvers: list[str], params: FrontierParams) -> tuple[int, int]:
    """(exhaustive front cascades the search kept, exhaustive front cascades), both on the search split."""
    m = SolverMatrix.from_labeled(labeled.filter((pl.col("split") == "train") & pl.col("solver").is_in(solvers)))
    table = verdicts(m, JUDGE, verifier_seeds(params.cascade, JUDGE))
    orders = all_cascades(m, params).orders
    runs = [run_cascade(m, list(o), table, JUDGE) for o in orders]
    cost = np.array([r.mean_cost() for r in runs] + m.mean_cost().tolist())
    acc = np.array([r.accuracy() for r in runs] + m.accuracy().tolist())
    front = {o for o, on in zip(orders, pareto_mask(cost, acc)[: len(orders)], strict=True) if on}
    return len(front & set(search_cascades(m, params, JUDGE).orders)), len(front)


def main() -> None:
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (ZeroEval's GSM8K answers; set BENCH_ZEROEVAL to their folder)")
        return
    labeled = labeled_answers(DATA)
    models = labeled["solver"].unique().sort().to_list()
    order = [models[i] for i in np.random.default_rng(0).permutation(len(models))]
    params = FrontierParams()
    print(f"{len(models)} models, {labeled['item_id'].n_unique()} items every one answered ({labeled.filter(pl.col('split') == 'test')['item_id'].n_unique()} "
          f"reported, the rest searched on); best of {REPEATS}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'N':>3} {'cascades possible':>18} {'considered':>11} {'kept':>5} {'rows':>5} {'time / time(N=3)':>17} {'(N/3)^2':>8}")
    times = {}
    for n in SIZES:
        seconds, search, rows = best_time(labeled, order[:n], params)
        times[n] = seconds
        print(f"{n:>3} {search['cascades_possible']:>18,} {search['cascades_considered']:>11,} {search['cascades_kept']:>5} {rows:>5} "
              f"{seconds / times[SIZES[0]]:>17.2f} {(n / SIZES[0]) ** 2:>8.1f}")
    exponent = math.log(times[42] / times[10]) / math.log(42 / 10)
    within = times[42] / times[3] <= (42 / 3) ** 2 and exponent <= 2.2
    print(f"growth between N = 10 and 42: time ~ N^{exponent:.2f}; at most about N^2: {'yes' if within else 'NO'}")
    found, front = front_recall(labeled, order[:20], params)
    print(f"search vs exhaustive at N = 20 (search split): the search keeps {found} of the {front} cascades on the exhaustive front")


if __name__ == "__main__":
    main()
