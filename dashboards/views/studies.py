"""Studies: learning curves per method (mean over seeds with a ± 1 std band, optionally smoothed as
in TensorBoard), the executor mix over training, the study's summary rows, and the per-agent
Shapley credit of its replayed trajectories."""

import streamlit as st

from dashboards import charts, queries
from dashboards.smoothing import smooth_curves
from dashboards import method_groups as mg
from dashboards.cached import (
    download_csv,
    frontier_summary,
    keep_in_url,
    no_results,
    project,
    readable,
    restart_when_changed,
    show_chart,
    url_choice,
    url_text,
    url_value,
)

METHODS_PER_PAGE = 12  # methods per page of learning curves and executor-mix panels

p = project()
st.title("Studies")
studies = p.query("study_names")
if not studies:
    no_results(p, "a study's trajectories (results/trajectories/) and summaries (results/summaries/)")
    st.stop()

left, middle, right = st.columns([2, 1, 1])
url_choice("study", studies, studies[0])
study = left.selectbox("Study", studies, key="study")
splits = p.query("study_splits", study=study)
for note in queries.study_verifier_notes(study, p.query("study_verifiers", study=study), frontier_summary(*p.key) or {},
                                        queries.consults_verifier(p.root / "metrics" / f"{study}.json")):
    st.info(note)

if splits:
    url_choice("split", splits, splits[0])
    split = middle.selectbox("Split", splits, key="split", help="Learning curves are usually read on the training split.")
    keep_in_url(study=study, split=split)
    n_episodes = p.query("episode_span", study=study, split=split)
    default_bucket = queries.default_bucket(n_episodes)
    restart_when_changed("bucket", (study, split))  # another study's episodes: its own default bucket
    url_value("bucket", default_bucket, int, lambda b: 1 <= b <= max(1, n_episodes))
    bucket = right.number_input(
        "Episodes per point", min_value=1, max_value=max(1, n_episodes), key="bucket",
        help="Each seed averages the episodes of a bucket first; the curve is the mean over seeds.",
    )
    methods = p.query("study_methods", study=study, split=split)
    groups = mg.families(methods)
    g1, g2 = st.columns([1, 2])
    group_options = [mg.ALL, *groups]
    url_choice("group", group_options, mg.default_group(methods, METHODS_PER_PAGE))
    group = g1.selectbox("Method group", group_options, key="group",
                         format_func=lambda g: f"{g} ({len(methods) if g == mg.ALL else len(groups[g])})",
                         help="Methods by family (the first part of their name): related methods together, a study's "
                              "separate domains (e.g. market's chain worlds) apart. A method filter searches every group.")
    url_value("method_regex", "")
    pattern = g2.text_input("Method filter (regular expression)", key="method_regex",
                            help="Searched in every method of the study, whatever the group; e.g. `dqn|random`, `@R0.5x$`")
    in_group = methods if group == mg.ALL else groups[group]
    # a filter searches the whole study: a method the default group hides must still be found by name
    picked = mg.matching(methods, pattern) if pattern.strip() else in_group
    if picked is None:
        st.warning(f"{url_text(pattern)} is not a valid regular expression: showing every method of the group.")
        picked = in_group
    elif pattern.strip() and group != mg.ALL:
        st.caption(f"The filter searches every group: {len(picked)} of {len(methods)} methods match.")
    keep_in_url(group=None if group == mg.default_group(methods, METHODS_PER_PAGE) else group,
                method_regex=pattern or None, bucket=None if int(bucket) == default_bucket else int(bucket))
    shown_methods = None if picked == methods else picked
    restart_when_changed("method_page", (study, split, tuple(picked)))  # another selection starts at its first page
    if len(picked) > METHODS_PER_PAGE:  # page what is left: readable charts, and only their partitions read
        n_pages = -(-len(picked) // METHODS_PER_PAGE)
        url_value("method_page", 1, int, lambda k: 1 <= k <= n_pages)
        method_page = st.number_input(f"Methods, {METHODS_PER_PAGE} at a time: page (of {n_pages})", min_value=1,
                                      max_value=n_pages, key="method_page")
        keep_in_url(method_page=None if method_page == 1 else int(method_page))
        shown_methods = picked[(int(method_page) - 1) * METHODS_PER_PAGE: int(method_page) * METHODS_PER_PAGE]
        st.caption(f"{len(picked)} methods; this page: {', '.join(f'`{m}`' for m in shown_methods)}.")  # code: `a@b` is no e-mail
    else:
        keep_in_url(method_page=None)
    if not picked:
        st.info("No method of this study matches the filter.")
        curves = None
    elif n_episodes <= 1:
        st.info(f"One episode per seed on `{split}` (a held-out evaluation): no curve to draw. Its numbers are in the "
                "summary rows below; the training split, if the study logged one, has the curves.")
        curves = None
    else:
        curves = p.query("learning_curves", study=study, split=split, bucket=int(bucket), methods=shown_methods)
if splits and curves is not None:
    st.subheader("Learning curves")
    url_value("smoothing", 0.0, float, lambda w: 0.0 <= w <= 0.99)
    smoothing = st.slider("Smoothing", 0.0, 0.99, step=0.01, key="smoothing",
                          help="TensorBoard's: a debiased exponential moving average of each curve and its band "
                               "(0 = raw). The data table below keeps the raw values.")
    keep_in_url(smoothing=smoothing or None)
    present = {name for name, _, _ in charts.curve_panels(curves)}
    missing = [name for name, _, _ in charts.CURVE_PANELS if name not in present] if curves.height else []
    st.caption(f"{n_episodes} episodes on `{split}`; line = mean over seeds, band = ± 1 std over seeds, clipped to what "
               "is possible (accuracy in [0, 1], cost ≥ 0)."
               + (f" Smoothed (weight {smoothing:.2f})." if smoothing else "")
               + (f" No panel for {', '.join(missing)}: this study's steps do not record it." if missing else ""))
    shown = {"study": study, "split": split, "methods": shown_methods or "all", "episodes per point": int(bucket)}
    show_chart(charts.learning_curve_figure(smooth_curves(curves, smoothing)), "curves_chart",
               f"{study}_{split}_learning_curves", view={**shown, "smoothing": smoothing})
    with st.expander("Learning-curve data"):
        st.dataframe(curves, hide_index=True, width="stretch", key="curves_table")

    mix = p.query("executor_mix", study=study, split=split, bucket=int(bucket), methods=shown_methods)
    st.subheader("Executor mix over training")
    if mix.is_empty():
        st.caption("No step of this study names an executor.")
    else:
        st.caption("Share of steps (all seeds pooled) in which each executor was asked; a step asking several "
                   "executors counts for each.")
        show_chart(charts.executor_mix_figure(mix), "mix_chart", f"{study}_{split}_executor_mix", view=shown)
        with st.expander("Executor-mix data"):
            st.dataframe(mix, hide_index=True, width="stretch", key="mix_table")
elif not splits:
    keep_in_url(study=study, split=None)
    st.info(f"Study `{study}` has summary rows but no trajectories: no learning curves to draw.")

summary = p.query("study_summary", study=study)
st.subheader("Summary rows (mean over seeds)")
if summary.is_empty():
    st.caption(f"results/summaries/{study}.parquet is absent.")
else:
    st.dataframe(readable(summary), hide_index=True, width="stretch", key="summary_table")
    download_csv(p, summary, "summary_rows", {"study": study}, key="summary_download")

credit = p.query("credit_summary", study=study)
if not credit.is_empty():
    st.subheader("Per-agent credit (Shapley, replayed coalitions)")
    st.caption("Mean Shapley credit of each agent over the replayed trajectories (`dlab credit`, "
               f"results/credit/{study}.parquet; each seed averaged first), with how often it was positive or negative.")
    st.dataframe(credit, hide_index=True, width="stretch", key="credit_table")
