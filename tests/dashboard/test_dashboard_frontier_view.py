"""The frontier chart's reading aids (dashboards/frontier_points.py, frontier_chart.py): best point
and Pareto set by default, the contested band, log-dollar budget stops, ticks on every log axis,
labels that never overlap, study colours fixed by name, a legend entry per method."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from dashboards import frontier_points as fp
from dashboards.charts import dollar_ticks
from dashboards.frontier_chart import (
    HEIGHT_PX, LINE_PX, POSITIONS, WIDTH_PX, frontier_figure, label_width, place_labels, study_colors,
)
from dashboards.queries import with_pareto


def crowd(n_methods: int = 40, points_each: int = 5, seed: int = 0) -> pl.DataFrame:
    """A 200-point frontier: most points in a narrow 94-97.5 % band, a few far-off outliers, singles."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_methods):
        study = ["coordinator", "market", "routers", "redref"][m % 4]
        for k in range(points_each):
            acc = 0.4 + 0.2 * rng.random() if m == 0 else 0.94 + 0.035 * rng.random()
            rows.append({"study": study, "method": f"m{m:02d}@x.y", "operating_point": f"lambda={k}", "kind": "study",
                         "accuracy": acc, "cost_per_item_usd": 10 ** rng.uniform(-4, -2.5)})
    for s, (acc, cost) in {"A": (0.967, 2e-3), "B": (0.845, 3e-4), "C": (0.537, 3e-5)}.items():
        rows.append({"study": "baselines", "method": f"always-{s}", "operating_point": "default", "kind": "single",
                     "accuracy": acc, "cost_per_item_usd": cost})
    rows.append({"study": "baselines", "method": "oracle", "operating_point": "default", "kind": "oracle",
                 "accuracy": 0.99, "cost_per_item_usd": 1e-4})
    frame = pl.DataFrame(rows).with_columns(
        pl.lit(1).alias("n_seeds"), pl.lit("").alias("run_ids"), pl.lit(1.0).alias("calls_per_item"),
        *[pl.lit(None, dtype=pl.Float64).alias(c) for c in ("accuracy_ci_low", "accuracy_ci_high", "cost_ci_low", "cost_ci_high")])
    return with_pareto(frame)


def test_the_default_view_keeps_each_methods_best_point_and_the_front() -> None:
    points = crowd()
    shown = fp.best_and_pareto(points)
    assert shown.select("study", "method").n_unique() == points.select("study", "method").n_unique()
    assert shown["on_pareto"].sum() == points["on_pareto"].sum()
    best = points.group_by("study", "method").agg(pl.col("accuracy").max())
    assert best.join(shown, on=["study", "method", "accuracy"]).height == best.height
    assert shown.height < 0.5 * points.height


def test_the_band_leaves_out_the_outliers() -> None:
    points = crowd()
    band = fp.contested_band(points)
    assert band is not None and 0.9 < band[0] < 0.945 and band[1] >= 0.99
    assert fp.outside(points, band) >= 5  # the outlier method's points and the weak singles
    assert fp.contested_band(points.filter(pl.col("accuracy") > 0.9).head(3)) is None


@pytest.mark.parametrize(("lo", "hi"), [(3.1e-3, 4.2e-3), (3e-5, 2e-3), (1e-6, 10.0), (0.0451, 0.0452), (7e-4, 7e-4)])
def test_every_log_cost_axis_has_labelled_ticks(lo: float, hi: float) -> None:
    ticks = dollar_ticks([lo, hi])
    inside = [v for v in ticks["tickvals"] if lo * 0.999 <= v <= hi * 1.001]
    assert len(inside) >= (1 if lo == hi else 2), ticks
    assert len(ticks["ticktext"]) == len(ticks["tickvals"]) and all(t.startswith("$") for t in ticks["ticktext"])


def test_budget_stops_are_evenly_spaced_in_log_dollars() -> None:
    points = crowd()
    stops = fp.budget_stops(points)
    costs = points.filter(pl.col("kind") != "oracle")["cost_per_item_usd"]
    assert stops[0] == costs.min() and stops[-1] == costs.max()
    gaps = np.diff(np.log10(stops))
    assert gaps.min() > 0 and gaps.max() < 1 / 12 + 0.01


def boxes(fig) -> list[tuple[float, float, float, float]]:
    """The pixel boxes of the placed labels, as place_labels models them."""
    x_range, y_range = fig.layout.xaxis.range, fig.layout.yaxis.range
    labels = next(t for t in fig.data if t.name == "labels")
    out = []
    for x, y, text, where in zip(labels.x, labels.y, labels.text, labels.textposition, strict=True):
        px = (math.log10(x) - x_range[0]) * WIDTH_PX / (x_range[1] - x_range[0])
        py = (y - y_range[0]) * HEIGHT_PX / (y_range[1] - y_range[0])
        w, h = label_width(text), LINE_PX
        dx, dy = POSITIONS[where]
        cx, cy = px + dx * (w / 2 + 7), py + dy * (h / 2 + 7)
        out.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return out


@pytest.mark.parametrize("n_methods", [10, 42])
def test_labels_never_overlap_and_highlights_differ(n_methods: int) -> None:
    points = crowd(n_methods)
    shown = fp.best_and_pareto(points)
    band = fp.contested_band(shown)
    picked = sorted({f"{s}/{m}" for s, m in shown.filter(pl.col("study") != "baselines").select("study", "method").iter_rows()})[:6]
    fig = frontier_figure(shown, highlight=picked, band=band, costs=fp.cost_range(shown, band), budget=5e-4)
    placed = boxes(fig)
    assert placed
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    rings = [(t.marker.symbol, t.marker.color) for t in fig.data if t.name and t.name.startswith("highlighted")]
    assert len(rings) == len(set(rings)) == 6
    assert fig.layout.xaxis.tickvals and fig.layout.xaxis.ticktext
    legend = [(t.legendgroup, t.name) for t in fig.data if t.showlegend is not False and t.legendgroup]
    assert len(legend) == len(set(legend)) >= n_methods
    assert next(t for t in fig.data if t.name == "budget $0.0005").x == (5e-4, 5e-4)


def test_labels_outside_the_plot_are_left_out() -> None:
    assert place_labels([0.0], [0.5], ["x" * 400], (0.0, 1.0), (0.0, 1.0)) == [None]
    where = place_labels([0.5, 0.5], [0.5, 0.5], ["abc", "abc"], (0.0, 1.0), (0.0, 1.0))
    assert where[0] is not None and where[1] != where[0]


def test_study_colours_do_not_depend_on_the_project() -> None:
    one = study_colors(["coordinator", "market", "zeta"])
    two = study_colors(["zeta", "redref", "market", "alpha", "coordinator"])
    assert all(one[s] == two[s] for s in one)
    assert len(set(study_colors(["coordinator", "margent", "redref", "market", "credit", "routers", "history_game"]).values())) == 7


def test_method_families_split_domains_and_the_filter_is_a_regex() -> None:
    from dashboards import method_groups as mg

    market = ["chain-1p-md-N4", "chain-2p-ts-N8", "1p-md@R0.5x", "1p-md@R2x", "ccv-truthful@R0.5x", "2p-ppo@R1x"]
    groups = mg.families(market)
    assert groups["chain"] == ["chain-1p-md-N4", "chain-2p-ts-N8"] and set(groups) == {"chain", "1p", "2p", "ccv"}
    assert mg.families([f"m{k:02d}" for k in range(21)]) == {"m": [f"m{k:02d}" for k in range(21)]}
    assert mg.default_group(market, 4) == "1p" and mg.default_group(market, 12) == mg.ALL
    assert mg.matching(market, r"@R0\.5x$") == ["1p-md@R0.5x", "ccv-truthful@R0.5x"]
    assert mg.matching(market, "(") is None and mg.matching(market, " ") == market


def test_curve_bands_stay_within_what_is_possible() -> None:
    from dashboards.charts import learning_curve_figure

    curves = pl.DataFrame({"method": ["a"] * 3, "episode": [0, 1, 2], "n_seeds": [3] * 3,
                           "return_mean": [1.0, 2.0, 3.0], "return_std": [5.0] * 3,
                           "accuracy_mean": [0.1, 0.5, 0.95], "accuracy_std": [0.3] * 3,
                           "cost_mean": [0.001, 0.002, 0.001], "cost_std": [0.01] * 3})
    fig = learning_curve_figure(curves)
    bands = [t for t in fig.data if t.fill == "toself"]
    (ret, acc, cost) = bands
    assert min(acc.y) == 0.0 and max(acc.y) == 1.0
    assert min(cost.y) == 0.0
    assert min(ret.y) < 0  # a return has no bound


def test_another_studys_colour_is_never_one_of_the_projects() -> None:
    from dashboards.frontier_chart import STUDY_COLORS

    fixed = set(STUDY_COLORS.values())
    assert all(study_colors([f"s{k}"])[f"s{k}"].lower() not in fixed for k in range(200))


def tie_table() -> pl.DataFrame:
    """A winner (coordinator/best, 0.96 [0.94, 0.98], $1e-3), a method tied at a sixth of its cost by a
    cheap operating point (its dearer one is more accurate), a tie dearer than it, one out of its
    interval, one over budget and the oracle."""
    rows = [("coordinator", "best", "default", "study", 0.96, 0.94, 0.98, 1e-3),
            ("routers", "cascade", "tau=0.9", "study", 0.955, 0.935, 0.975, 8e-4),
            ("routers", "cascade", "tau=0.5", "study", 0.95, 0.93, 0.97, 1e-3 / 6),
            ("market", "auction", "default", "study", 0.945, 0.92, 0.97, 9e-4),
            ("baselines", "always-C", "default", "single", 0.60, 0.55, 0.65, 1e-5),
            ("redref", "ref", "B=2", "study", 0.97, 0.95, 0.99, 5e-3),
            ("baselines", "oracle", "default", "oracle", 0.99, 0.98, 1.0, 2e-4)]
    return pl.DataFrame(rows, orient="row", schema=["study", "method", "operating_point", "kind", "accuracy",
                                                     "accuracy_ci_low", "accuracy_ci_high", "cost_per_item_usd"])


def test_the_tied_options_carry_their_cost_cheapest_first_and_the_cheapest_is_named() -> None:
    from dashboards.queries import best_under_budget

    points = tie_table()
    best = best_under_budget(points, 2e-3)
    assert (best["study"], best["method"]) == ("coordinator", "best")
    tied = fp.tied_with(points, best, 2e-3)
    assert tied.columns == ["study", "method", "operating_point", "accuracy", "cost_per_item_usd", "share_of_winner_cost"]
    # each other method once, by its cheapest tied point; out of the interval, over budget and the oracle left out
    assert tied.select("method", "operating_point").rows() == [("cascade", "tau=0.5"), ("auction", "default")]
    assert tied["cost_per_item_usd"].to_list() == sorted(tied["cost_per_item_usd"].to_list())
    assert tied["share_of_winner_cost"][0] == pytest.approx(1 / 6)
    assert fp.cheapest_tie(tied, best) == ("Cheapest within the winner's interval: routers/cascade @ tau=0.5 at $0.000167 "
                                           "per item, 16.7 % of the winner's cost.")


def test_a_winner_cheaper_than_every_tie_is_named_the_cheapest() -> None:
    cheap = pl.col("method") == "best"  # the winner at $1e-5, below every tie
    points = tie_table().with_columns(pl.when(cheap).then(1e-5).otherwise(pl.col("cost_per_item_usd")).alias("cost_per_item_usd"))
    best = points.row(0, named=True)
    tied = fp.tied_with(points, best, 2e-3)
    assert tied["method"].to_list() == ["cascade", "auction"]
    assert fp.cheapest_tie(tied, best).startswith("The winner is the cheapest option within its interval: the 2 tied")
    assert fp.cheapest_tie(tied.head(0), best) is None
    no_interval = {**best, "accuracy_ci_low": None}
    assert fp.tied_with(points, no_interval, 2e-3).is_empty()


def test_the_zoom_holds_the_budget_and_the_winner() -> None:
    from dashboards.frontier_chart import cost_axis

    points = crowd()
    shown = fp.best_and_pareto(points)
    band = fp.contested_band(shown)
    costs = fp.cost_range(shown, band)
    budget = costs[0] / 5  # cheaper than anything in the contested band: this zoom alone would cut its line off
    lo, hi = cost_axis(costs, budget)
    assert lo <= math.log10(budget) <= hi and lo < math.log10(costs[0]) and hi > math.log10(costs[1])
    assert cost_axis(costs, costs[1] * 10)[1] > math.log10(costs[1] * 10)
    assert cost_axis(costs, None) == (math.log10(costs[0]) - 0.12, math.log10(costs[1]) + 0.12)
    # the budget's winner below the band (always-B, 84.5 % at $3e-4): the zoom widens to it
    winner = shown.filter(pl.col("method") == "always-B").row(0, named=True)
    assert winner["accuracy"] < band[0]
    zoomed, zoomed_costs = fp.zoom_window(shown, band, winner)
    assert zoomed[0] < winner["accuracy"] and zoomed[1] == band[1]
    assert zoomed_costs[0] <= winner["cost_per_item_usd"] <= zoomed_costs[1]
    assert fp.zoom_window(shown, band, None) == (band, costs)
    assert fp.zoom_window(shown, None, winner) == (None, None)
    fig = frontier_figure(shown, band=zoomed, costs=zoomed_costs, budget=budget)
    x_lo, x_hi = fig.layout.xaxis.range
    assert x_lo <= math.log10(budget) <= x_hi  # the budget line is on the chart, not just in the legend
    assert zoomed[0] <= fig.layout.yaxis.range[0] <= winner["accuracy"]
