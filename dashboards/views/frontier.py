"""Frontier: cost per item vs accuracy on one dataset at a time, the Pareto front of the points
shown, the oracle, a method picker that highlights, and a budget slider (best method under a cost)."""

import polars as pl
import streamlit as st

from dashboards import charts, frontier_chart, links, queries, slices, solver_subset, view_line
from dashboards import frontier_points as fp
from delegation_lab.frontier.verifiers import verifier_summary
from dashboards.cached import (
    download_csv,
    follow_default,
    frontier_summary,
    keep_in_url,
    no_results,
    project,
    readable,
    settings,
    show_chart,
    url_choice,
    url_text,
)

p = project()
title_slot = st.empty()  # the title names the dataset and split chosen below
options = p.query("frontier_options")
if not options["study"]:
    st.title("Cost–accuracy frontier")
    no_results(p, "the frontier (results/frontier.parquet)")
    st.stop()

summary = frontier_summary(*p.key) or {}
split = summary.get("split", "test")
main_dataset = summary.get("dataset")
url_choice("dataset", options["dataset"], main_dataset if main_dataset in options["dataset"] else options["dataset"][0])
c1, c2 = st.columns([1, 1])
dataset = c1.selectbox("Dataset", options["dataset"], key="dataset",
                       help="One task at a time: costs and accuracies of different tasks do not share a front. "
                            f"Default: the cached answers' dataset ({main_dataset}).")
here = p.query("frontier_dataset_options", dataset=dataset)
main_verifier = queries.main_verifier(summary)
url_choice("verifier", here["verifier"], main_verifier if main_verifier in here["verifier"] else (here["verifier"] or [None])[0])
verifier = c2.selectbox("Verifier", here["verifier"], key="verifier",
                        help="The verifier behind the points' accept decisions; each verifier has its own Pareto set.")
title_slot.title(f"Cost–accuracy frontier · {dataset} · {split} split")
described = (summary.get("verifiers") or {}).get(verifier)
if described and described.get("deployable") is False:
    st.info(f"Verifier {verifier_summary(described, split)}: the cascades' and studies' points below rest on it, "
               f"and no deployment could run it (their `verifier` column and hover say so).")
elif described:
    st.caption(f"Verifier {verifier_summary(described, split)}.")

url_choice("studies", here["study"], here["study"], multi=True)
studies = st.multiselect("Study", here["study"], key="studies")
solver_sets = here["solver_set"]  # which solvers take part is the one solver filter, below

points = queries.with_verifier_notes(p.query("frontier_points", dataset=dataset, verifier=verifier or queries.NONE_LABEL,
                                             solver_sets=solver_sets, studies=studies), summary)
pool = p.query("frontier_points", dataset=dataset, verifier=verifier or queries.NONE_LABEL,
               solver_sets=here["solver_set"], studies=here["study"])
models = solver_subset.solvers(pool)
subset_note = ""
whole_pool, keep_whole = 0, False  # points of methods that chose among every solver; kept beside a subset
if models:  # the solvers taking part: singles, points within them, the oracle recomputed on them
    default_models = solver_subset.default_subset(pool)
    url_choice("models", models, default_models, multi=True)
    subset = st.multiselect(
        f"Solvers taking part ({len(models)})", models, key="models",
        help="Singles of these solvers, the cascades, routers and study points whose solver set lies within them, and "
             "the oracle recomputed on them from the singles' item-level outcomes. "
             + (f"Default with more than {solver_subset.MANY} solvers: those of the Pareto set over all solvers and of each "
                "method's best point (the baselines': the best single and the best cascade), so the budget's winner is the one "
                "with every solver; the caption says why each is in."
                if len(models) > solver_subset.MANY else "Default: every solver."))
    keep_in_url(models=subset if sorted(subset) != sorted(default_models) else None)
    if not subset:
        st.warning("Pick at least one solver.")
        st.stop()
    whole_pool = int(solver_subset.chose_among_all(pool, models).sum())
    if whole_pool and set(subset) != set(models):
        shown_default = "shown" if solver_subset.keeps_whole_pool(models) else "left out"
        url_choice("whole_pool", ["shown", "left out"], shown_default)
        keep_whole = st.radio(
            f"Methods that chose among all {len(models)} solvers ({whole_pool} points)", ["shown", "left out"],
            key="whole_pool", horizontal=True,
            help="Routers and study points run on the whole pool use solvers outside the subset, so the subset alone would "
                 f"leave them out; shown, they are results of runs on all {len(models)} solvers beside the subset's "
                 f"baselines. Default: {shown_default}.") == "shown"
        keep_in_url(whole_pool=None if (keep_whole == (shown_default == "shown")) else ("shown" if keep_whole else "left out"))
    if set(subset) != set(models):
        method_of = {r["solver_set"]: r for r in pool.filter(pl.col("kind") == "single").iter_rows(named=True)}
        chosen_rows = {s: p.query("point_outcomes", study=method_of[s]["study"], method=method_of[s]["method"],
                                  operating_point=method_of[s]["operating_point"], split=split) for s in subset}
        oracle_row = solver_subset.subset_oracle(chosen_rows, settings(*p.key).intervals)
        is_oracle = (pl.col("kind") == "oracle") & (pl.col("study") == "baselines")
        template = points.filter(is_oracle)  # empty when the Study filter leaves the baselines out: no oracle then
        kept_pool = models if keep_whole else None
        points = queries.with_pareto(solver_subset.with_oracle(solver_subset.within(points, subset, kept_pool), template, oracle_row))
        outside_subset = pool.height - solver_subset.within(pool, subset, kept_pool).height - pool.filter(is_oracle).height
        full_oracle = pool.filter(is_oracle)
        subset_note = (f" Solvers: {len(subset)} of {len(models)}; {outside_subset} point(s) that use another solver (or name none) "
                       "are left out, and the oracle is recomputed on the chosen solvers"
                       + ("." if oracle_row else " — except that their singles wrote no item-level outcomes, so no oracle is drawn.")
                       + (f" Kept: {whole_pool} point(s) of methods that chose among all {len(models)} solvers, whose upper "
                          f"bound is the oracle over all of them ({full_oracle['accuracy'][0]:.2%})."
                          if keep_whole and full_oracle.height else ""))
        if sorted(subset) == sorted(default_models):
            subset_note += (" The default solvers, each with the point that puts it in (the Pareto set over all solvers, "
                            "each method's best point): " + solver_subset.reasons_text(solver_subset.default_reasons(pool)) + ".")
every, study_oracles = queries.chart_points(points)
labels = sorted({charts.point_label(s, m) for s, m in every.filter(pl.col("kind") != "mixture").select("study", "method").iter_rows()})
c5, c6, c7 = st.columns([3, 2, 1])
url_choice("highlight", labels, [], multi=True)
highlight = c5.multiselect("Highlight methods", labels, key="highlight",
                           help="Ring and name these methods' points, each in its own style; the rest are dimmed.")
url_choice("view", fp.VIEWS, fp.BEST)
view = c6.radio("Points", fp.VIEWS, key="view", help="The Pareto front is computed on every operating point either way.")
url_choice("zoom", ["on", "off"], "on")
zoom = c7.radio("Zoom to the contested band", ["on", "off"], key="zoom", horizontal=True,
                help="The accuracy band where methods compete: from the lower quartile of the points' accuracies to the best.")
keep_in_url(dataset=dataset, verifier=verifier, solvers=None,
            studies=studies if studies != here["study"] else None, highlight=highlight,
            view=None if view == fp.BEST else view, zoom=None if zoom == "on" else zoom)
if every.is_empty():
    st.warning("No frontier point matches these filters.")
    st.stop()
drawn = fp.best_and_pareto(every) if view == fp.BEST else every

oracle = drawn.filter(pl.col("kind") == "oracle")
a, b, c, d = st.columns(4)
a.metric("Points shown", drawn.height, help=f"Of {every.height} operating points on these filters.")
b.metric("On the Pareto front", int(drawn["on_pareto"].sum()))
if oracle.height:
    c.metric("Oracle accuracy", f"{oracle['accuracy'][0]:.2%}")
    d.metric("Oracle cost per item", f"${oracle['cost_per_item_usd'][0]:.3g}")

# ---------------------------------------------------------------------------------------------
steps = fp.budget_stops(drawn)
budget = None
if steps:
    url_choice("budget", steps, steps[-1], cast=float)
    budget = st.select_slider("Budget (US$ per item)", options=steps, key="budget", format_func=queries.budget_label,
                              help="Stops evenly spaced in log dollars. The most accurate point (oracle excluded) costing "
                                   "at most this much per item; drawn as a line on the chart.")
    keep_in_url(budget=repr(budget))

best = queries.best_under_budget(drawn, budget) if budget is not None else None
band, cost_zoom = fp.zoom_window(drawn, fp.contested_band(drawn) if zoom == "on" else None, best)
shown = view_line.frontier_view(  # what every download of this page records (first CSV line, figure title)
    dataset=dataset, split=split, verifier=verifier, deployable=(described or {}).get("deployable"),
    points="each method's best and the Pareto set" if view == fp.BEST else "every operating point",
    subset=subset if models else [], models=models, highlight=highlight, zoom=band, budget=budget,
    studies=studies if studies != here["study"] else None,
    whole_pool=("shown" if keep_whole else "left out") if models and whole_pool and set(subset) != set(models) else None)
figure = frontier_chart.frontier_figure(drawn, highlight=highlight, title=view_line.title(shown), band=band,
                                        costs=cost_zoom, budget=budget)
show_chart(figure, "frontier_chart", f"frontier_{dataset}")
zero_cost = drawn.filter(pl.col("cost_per_item_usd") <= 0).height
hidden = fp.outside(drawn, band)
st.caption(
    "Colour: study (the same colour for a study in every project; baselines in black and grey). Legend: one entry per "
    "method, grouped by study (click one to hide it). Markers: ■ always one solver (labelled), ▲ cascade, small ● random "
    "mixtures, ★ oracle — the cheapest correct solver per item, an upper bound no router reaches. Error bars: the "
    "item-level bootstrap interval. Dashed step line: the Pareto front of the points shown (recomputed when a filter "
    "removes points; oracle excluded). Hover a point for its operating point, its verifier (and whether a deployment could run it), seeds and MLflow runs."
    + (f" Zoomed to accuracies {band[0]:.1%}–{band[1]:.1%}: {hidden} point(s) lie outside (zoom off to see them)." if band else "")
    + (f" {figure.layout.meta['labels_left_out']} label(s) left out where they would overlap (hover names every point)."
       if figure.layout.meta["labels_left_out"] else "")
    + (f" {zero_cost} point(s) with zero cost cannot be drawn on the log axis." if zero_cost else "")
    + subset_note
    + (f" Not drawn: {study_oracles.height} study oracle point(s) "
       f"({', '.join(sorted(set(study_oracles['study'] + '/' + study_oracles['method'])))}), the same upper bound." if study_oracles.height else "")
)

st.subheader("Best method under the budget")
if budget is not None:
    if best is None:
        st.caption("No point is that cheap.")
    else:
        full = fp.point_name(best)
        lo, hi = best["accuracy_ci_low"], best["accuracy_ci_high"]
        b1, b2, b3 = st.columns([2, 1, 1])
        # the name as wrapping text, not a metric (a metric cuts a long name off with an ellipsis)
        b1.markdown(f"**Best under budget**\n\n{url_text(full)}")
        b2.metric("Its accuracy", f"{best['accuracy']:.2%}",
                  help="95 % item-level bootstrap interval below (none when the study wrote no item outcomes).")
        b3.metric("Its cost per item", f"${best['cost_per_item_usd']:.3g}")
        st.caption(f"Accuracy interval: {'(none: no item-level outcomes)' if lo is None else f'[{lo:.2%}, {hi:.2%}]'}; "
                   f"cost interval: {charts.interval_text(best, 'cost', '.3g')}. Study `{best['study']}`, kind `{best['kind']}`.")
        tied = fp.tied_with(every, best, budget)
        if tied.height:
            st.markdown(f"**Tied within their intervals** ({tied.height}), cheapest first: each method's cheapest point "
                        "within budget whose accuracy interval overlaps the winner's, so these items do not tell it apart from the winner. "
                        + fp.cheapest_tie(tied, best))
            st.dataframe(tied.with_columns(pl.col("accuracy", "share_of_winner_cost") * 100), hide_index=True, key="tied_table",
                         height=min(36 * (tied.height + 1) + 3, 250),
                         column_config={"accuracy": st.column_config.NumberColumn(format="%.2f%%"),
                                        "cost_per_item_usd": st.column_config.NumberColumn("cost per item (US$)", format="$%.3g"),
                                        "share_of_winner_cost": st.column_config.NumberColumn("of the winner's cost", format="%.3g%%")})

# ---------------------------------------------------------------------------------------------
st.subheader("By domain and difficulty")
scored = p.query("outcome_points").filter((pl.col("dataset") == dataset) & (pl.col("split") == split))
scored_keys = {(s, m, op) for s, m, op in scored.select("study", "method", "operating_point").iter_rows()}
candidates = {fp.point_name(r): r for r in drawn.sort(["accuracy", "cost_per_item_usd"], descending=[True, False]).iter_rows(named=True)
              if (r["study"], r["method"], r["operating_point"]) in scored_keys}
if not candidates:
    st.caption(f"No point shown has item-level outcomes on `{dataset}` ({split}): nothing to break down.")
else:
    # default: each highlighted method's most accurate point shown, else the budget's winner and the best single
    picked = [next(n for n, r in candidates.items() if charts.point_label(r["study"], r["method"]) == h)
              for h in highlight if any(charts.point_label(r["study"], r["method"]) == h for r in candidates.values())]
    if not picked:
        winner = best
        singles = [n for n, r in candidates.items() if r["kind"] == "single"]
        picked = ([fp.point_name(winner)] if winner and fp.point_name(winner) in candidates else []) + singles[:1]
    default_points = list(dict.fromkeys(picked))
    follow_default("slice_points", default_points)  # a new highlight or budget moves the default, not a pick
    url_choice("slice_points", list(candidates), default_points, multi=True)
    s1, s2 = st.columns([3, 1])
    chosen = s1.multiselect("Points to break down", list(candidates), key="slice_points",
                            help="Points shown above with item-level outcomes (results/outcomes/*.parquet); default: the "
                                 "highlighted methods' best points, else the budget's winner and the most accurate single; it follows the "
                                 "highlight and budget until you pick points yourself.")
    url_choice("slice_by", ["domain", "difficulty"], "domain")
    by = s2.radio("Slice by", ["domain", "difficulty"], key="slice_by", horizontal=True)
    keep_in_url(slice_points=chosen if chosen != default_points else None, slice_by=None if by == "domain" else by)
    got = {n: p.query("point_outcomes", study=candidates[n]["study"], method=candidates[n]["method"],
                      operating_point=candidates[n]["operating_point"], split=split) for n in chosen}
    ids = sorted({i for rows in got.values() for i in rows["item_id"].to_list()})
    meta = p.query("item_slices", item_ids=ids) if ids else pl.DataFrame()
    intervals = settings(*p.key).intervals
    table = slices.point_slices(got, meta, by, intervals) if meta.height else pl.DataFrame()
    if table.is_empty():
        st.caption("Pick a point; data/items has no domain or difficulty for its items." if chosen else "Pick a point to break it down.")
    else:
        st.caption(f"Per {by}: each point on that slice's items alone (those every seed of the point scored), with the "
                   f"item-level bootstrap ({intervals.resamples:,} resamples, {intervals.confidence:.0%} intervals, "
                   "`low` – `high`, as on the chart); a slice of few items has a wide interval.")
        pct = st.column_config.NumberColumn(format="%.2f%%")
        acc_cols = ["accuracy", "accuracy low", "accuracy high"]
        st.dataframe(table.with_columns(pl.col(acc_cols) * 100), hide_index=True, width="stretch", key="frontier_slices_table",
                     column_config={**{c: pct for c in acc_cols},
                                    **{c: st.column_config.NumberColumn(format="$%.4g") for c in ("cost (USD/item)", "cost low", "cost high")}})
        download_csv(p, table, "frontier_breakdown", {**shown, "slice by": by, "broken down": chosen}, key="slices_download",
                     named_by=("dataset", "slice by"))

# ---------------------------------------------------------------------------------------------
if summary and dataset == main_dataset:
    st.subheader(f"Summary per method · {dataset}")
    keys = {queries.frontier_key(s, m, v, main_verifier) for s, m, v in drawn.select("study", "method", "verifier").iter_rows()}
    table = queries.frontier_methods_table(summary, keys)
    interval = summary.get("cost_interval_usd") or [None, None]
    st.caption(
        f"On `{dataset}` ({split} split) only. AIQ: mean accuracy of the method's concave hull over the cost interval of the "
        f"single solvers (RouterBench). APGR / CPT: RouteLLM's performance-gap recovered with weak = "
        f"`{summary.get('weak_solver')}`, strong = `{summary.get('strong_solver')}`; CPT(x) = the least cost, "
        f"as a fraction of the strong solver's, that recovers x of the gap."
        + (f" Cost interval: ${interval[0]:.3g} – ${interval[1]:.3g} per item." if None not in interval else "")
    )
    estimated = summary.get("estimated_reasoning_tokens") or {}
    if estimated:
        st.warning("Estimated cost: " + "; ".join(
            f"`{solver}` bills {e['reasoning_tokens_per_item']} hidden reasoning tokens per answer ({e['source']})"
            for solver, e in estimated.items()) + ". Methods whose cost rests on them are named in the last column.")
    if table.height:
        st.dataframe(table, hide_index=True, width="stretch", key="methods_table", height=min(36 * (table.height + 1) + 3, 720),
                     column_config={c: st.column_config.NumberColumn(format="%.4f") for c in ("AIQ", "APGR", "best accuracy")})
elif not summary:
    st.caption("metrics/frontier.json is absent: the per-method summary (AIQ, APGR, CPT) appears once the frontier stage ran.")
else:
    st.caption(f"The per-method summary (AIQ, APGR, CPT) of metrics/frontier.json covers `{main_dataset}` only.")

with st.expander(f"Frontier points ({drawn.height})"):
    held = p.query("trajectory_points", root=str(p.root))
    partitions = [links.partition_of(s, m, op, held) for s, m, op in drawn.select("study", "method", "operating_point").iter_rows()]
    steps = [None if part is None else links.steps_url(links.StepsKey(s, part))
             for part, s in zip(partitions, drawn["study"].to_list(), strict=True)]
    st.dataframe(readable(drawn.with_columns(pl.Series("steps", steps, dtype=pl.String)), links=("steps",)), hide_index=True, width="stretch",
                 key="points_table", column_config={"steps": st.column_config.LinkColumn(
                     display_text="steps", help="This point's steps on the Trajectories page: the partition its study wrote as holding it (none: no steps).")})
    download_csv(p, drawn.drop("on_pareto_all", strict=False), "frontier_points", shown, key="points_download", named_by=("dataset",))
