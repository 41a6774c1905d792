"""Compare: two methods (or two operating points) on the same items — the paired item-level
difference in accuracy and cost with bootstrap intervals and the paired test, the items where they
disagree (linked to Trajectories), and the MLflow runs behind each."""

import polars as pl
import streamlit as st

from dashboards import links, paired, queries
from dashboards.queries import verifier_notes
from dashboards.cached import download_csv, frontier_summary, keep_in_url, no_results, project, readable, settings, url_choice

p = project()
st.title("Compare two methods")
points = p.query("outcome_points")
if points.is_empty():
    no_results(p, "item-level outcomes (results/outcomes/<study>.parquet)")
    st.stop()


def label(row: dict) -> str:
    op = "" if row["operating_point"] == "default" else f" @ {row['operating_point']}"
    return f"{row['study']}/{row['method']}{op} · {row['split']}"


rows = {label(r): r for r in points.iter_rows(named=True)}
names = list(rows)
url_choice("a", names, names[0])
left, right = st.columns(2)
a_name = left.selectbox("A", names, key="a")
a = rows[a_name]
# B must share A's items: same dataset and split
partners = [n for n, r in rows.items() if r["dataset"] == a["dataset"] and r["split"] == a["split"] and n != a_name]
if not partners:
    st.info(f"No other point has outcomes on `{a['dataset']}` ({a['split']}): nothing to pair A with.")
    st.stop()
url_choice("b", partners, partners[0])
b_name = right.selectbox("B", partners, key="b", help="Points with outcomes on A's dataset and split.")
b = rows[b_name]
keep_in_url(a=a_name, b=b_name)
for note in verifier_notes({"A": a, "B": b}, frontier_summary(*p.key) or {}):
    st.info(note)

a_rows = p.query("point_outcomes", study=a["study"], method=a["method"], operating_point=a["operating_point"], split=a["split"])
b_rows = p.query("point_outcomes", study=b["study"], method=b["method"], operating_point=b["operating_point"], split=b["split"])
intervals, ties = settings(*p.key).intervals, settings(*p.key).ties
result = paired.compare(a_rows, b_rows, intervals, ties)
if result is None:
    st.warning("A and B share no item that every seed of both scored.")
    st.stop()



def usd(x: float) -> str:
    """A signed dollar difference to 4 significant digits: `+$0.0005950`, `−$1.234e-05`."""
    return f"{'−' if x < 0 else '+'}${abs(x):.4g}"


acc, cost = result.summary.row(0, named=True), result.summary.row(1, named=True)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Accuracy A − B", "tie" if acc["tie"] else f"{acc['A − B']:+.2%}")
m2.metric("Accuracy p-value", paired.p_value_text(acc["p-value"], intervals.resamples))
m3.metric("Cost per item A − B", "tie" if cost["tie"] else usd(cost["A − B"]))
m4.metric("Cost p-value", paired.p_value_text(cost["p-value"], intervals.resamples))
conf = f"{intervals.confidence:.0%}"
st.caption(
    f"On the {result.n_items:,} items of `{a['dataset']}` ({a['split']}) that every seed of both scored "
    f"(A: {a['n_seeds']} seed(s), B: {b['n_seeds']}). Paired item-level bootstrap ({intervals.resamples:,} resamples, "
    f"seed {intervals.seed}; items — and seeds where there are several — resampled, the same resamples for A and B): "
    f"accuracy A − B in [{acc['low']:+.2%}, {acc['high']:+.2%}], cost A − B in [{usd(cost['low'])}, {usd(cost['high'])}] per item "
    f"({conf} intervals); p-value: two-sided bootstrap test of a difference beyond the tie tolerance "
    f"(`evaluation.ties`: ${ties.cost_usd:g} per item, {ties.accuracy_items:g} item(s) of accuracy), within which it reads \"tie\"."
)
# %.4g: accuracies (0.9667) and costs per item ($3.125e-05) both keep four significant digits
st.dataframe(paired.summary_table(result.summary, intervals.resamples), hide_index=True, width="stretch", key="compare_table",
             column_config={c: st.column_config.NumberColumn(format="%.4g") for c in result.summary.columns
                            if c not in ("quantity", "tie", "p-value")})

st.subheader("By domain and difficulty")
slices = p.query("item_slices", item_ids=sorted(set(a_rows["item_id"].to_list()) & set(b_rows["item_id"].to_list())))
by = st.radio("Slice by", ["domain", "difficulty"], horizontal=True, key="slice_by")
sliced = paired.by_slice(a_rows, b_rows, slices, by, intervals) if slices.height else pl.DataFrame()
if sliced.is_empty():
    st.caption("data/items has no domain or difficulty for these items.")
else:
    st.caption(f"Per {by}: the items of that slice alone, paired bootstrap ({intervals.resamples:,} resamples, {conf} "
               "intervals: `low` – `high`); a slice of few items has a wide interval. Costs in US$ per item.")
    pct = st.column_config.NumberColumn(format="%.2f%%")
    st.dataframe(sliced.with_columns([pl.col(c) * 100 for c in sliced.columns if c.endswith(" accuracy")]),
                 hide_index=True, width="stretch", key="slices_table",
                 column_config={**{c: pct for c in sliced.columns if c.endswith(" accuracy")},
                                **{c: st.column_config.NumberColumn(format="%.4g") for c in sliced.columns if c.endswith("(USD/item)")}})

st.subheader(f"Items where they disagree ({result.disagreements.height:,})")
st.caption("Mean correctness over seeds differs. `A − B correct` > 0: A is right more often. "
           "A link opens the item on the Trajectories page at exactly that method, operating point and the seed that "
           "shows its side of the disagreement (its first seed right on the item where it is right more often, wrong "
           "where it is wrong more often): the partition its study wrote, with its steps, as holding that point at "
           "that seed. A point whose study wrote no steps for it at that seed (a baseline, a fixed order) has no link.")
held = p.query("trajectory_points", root=str(p.root))


def link_column(who: dict, rows: pl.DataFrame, side: str) -> pl.Series:
    """Per disagreement, the link to `who`'s steps on that item at the seed that disagreed, or None
    when the study wrote no steps of that point at that seed."""
    seeds = paired.disagreeing_seeds(rows, result.disagreements, side)
    urls = [None if seed is None else links.point_link(who["study"], who["method"], who["operating_point"], seed, item, held)
            for item, seed in zip(result.disagreements["item_id"].to_list(), seeds, strict=True)]
    return pl.Series(urls, dtype=pl.String)


won = pl.when(pl.col("A − B correct") > 0).then(pl.lit("A")).otherwise(pl.lit("B")).alias("more often right")
table = result.disagreements.with_columns(won, link_column(a, a_rows, "A").alias("follow A"), link_column(b, b_rows, "B").alias("follow B"))
if slices.height:
    table = table.join(slices, on="item_id", how="left", maintain_order="left")
download_csv(p, table, "disagreements", {"A": a_name, "B": b_name}, key="disagreements_download")
st.dataframe(readable(table, links=("follow A", "follow B")), hide_index=True, width="stretch", key="disagreements_table",
             column_config={"follow A": st.column_config.LinkColumn(display_text="A's steps"),
                            "follow B": st.column_config.LinkColumn(display_text="B's steps")})

tracking = settings(*p.key)
if tracking.tracking:  # tracking.enabled false: no MLflow store, so no section and no caption pointing at one
    st.subheader("MLflow runs")
    for side, who in (("A", a), ("B", b)):
        runs = p.query("point_runs", study=who["study"], method=who["method"], operating_point=who["operating_point"], split=who["split"])
        links = ", ".join(f"[{r[:8]}]({queries.mlflow_run_url(tracking.ui_url, r)})" for r in runs) or "(no run id recorded)"
        st.markdown(f"**{side}** `{label(who)}`: {links}")
    st.caption(f"Links open the MLflow UI at `{tracking.ui_url}` (params `tracking.ui_url`; start it with `mlflow ui`).")
