"""Studies: learning curves per method (mean over seeds with a ± 1 std band), the executor mix over
training, the study's summary rows, and the per-agent Shapley credit of its replayed trajectories."""

import streamlit as st

from dashboards import charts, queries
from dashboards.cached import no_results, project

p = project()
st.title("Studies")
studies = p.query("study_names")
if not studies:
    no_results(p, "a study's trajectories (results/trajectories/) and summaries (results/summaries/)")
    st.stop()

left, middle, right = st.columns([2, 1, 1])
study = left.selectbox("Study", studies)
splits = p.query("study_splits", study=study)

if splits:
    split = middle.selectbox("Split", splits, help="Learning curves are usually read on the training split.")
    n_episodes = p.query("episode_span", study=study, split=split)
    bucket = right.number_input(
        "Episodes per point", min_value=1, max_value=max(1, n_episodes), value=queries.default_bucket(n_episodes),
        help="Each seed averages the episodes of a bucket first; the curve is the mean over seeds.",
    )
    curves = p.query("learning_curves", study=study, split=split, bucket=int(bucket))
    st.subheader("Learning curves")
    st.caption(f"{n_episodes} episodes on `{split}`; line = mean over seeds, band = ± 1 std over seeds.")
    st.plotly_chart(charts.learning_curve_figure(curves), width="stretch", key="curves_chart")
    with st.expander("Learning-curve data"):
        st.dataframe(curves, hide_index=True, width="stretch", key="curves_table")

    mix = p.query("executor_mix", study=study, split=split, bucket=int(bucket))
    st.subheader("Executor mix over training")
    if mix.is_empty():
        st.caption("No step of this study names an executor.")
    else:
        st.caption("Share of steps (all seeds pooled) in which each executor was asked; a step asking several "
                   "executors counts for each.")
        st.plotly_chart(charts.executor_mix_figure(mix), width="stretch", key="mix_chart")
        with st.expander("Executor-mix data"):
            st.dataframe(mix, hide_index=True, width="stretch", key="mix_table")
else:
    st.info(f"Study `{study}` has summary rows but no trajectories: no learning curves to draw.")

summary = p.query("study_summary", study=study)
st.subheader("Summary rows (mean over seeds)")
if summary.is_empty():
    st.caption(f"results/summaries/{study}.parquet is absent.")
else:
    st.dataframe(summary, hide_index=True, width="stretch", key="summary_table")

credit = p.query("credit_summary", study=study)
if not credit.is_empty():
    st.subheader("Per-agent credit (Shapley, replayed coalitions)")
    st.caption("Mean Shapley credit of each agent over the replayed trajectories (`dlab credit`, "
               f"results/credit/{study}.parquet; each seed averaged first), with how often it was positive or negative.")
    st.dataframe(credit, hide_index=True, width="stretch", key="credit_table")
