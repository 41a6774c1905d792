"""Trajectories: a paged table of decision steps, an item found by searching its id, every step of
that item followed in order, and what the study's action codes mean."""

import math

import polars as pl
import streamlit as st

from dashboards import links, queries
from dashboards.action_codes import action_legend
from dashboards.cached import (
    download_csv,
    follow_default,
    keep_in_url,
    no_results,
    project,
    readable,
    restart_when_changed,
    unknown_note,
    url_choice,
    url_value,
)

ALL = queries.ALL
ITEM_STEPS = 1000  # steps of one followed item shown at most
ITEM_CHOICES = 200  # search matches listed at most (the count says how many there are)
PAGE_SIZES = [25, 50, 100, 500]  # rows per page of the steps table
p = project()
st.title("Trajectories")
studies = p.query("trajectory_studies")
if not studies:
    no_results(p, "trajectories (results/trajectories/)")
    st.stop()

c1, c2, c3 = st.columns([2, 2, 1])
url_choice("study", studies, studies[0])
study = c1.selectbox("Study", studies, key="study")
methods = p.query("trajectory_methods", study=study)
held = p.query("trajectory_points", root=str(p.root))
if "method" not in st.session_state and "method" in st.query_params:
    # a link names a partition, or a point (method, operating point): the study wrote which partition holds it
    asked, point = st.query_params["method"], st.query_params.get("op", links.DEFAULT_POINT)
    found = None
    if study == st.query_params.get("study"):
        found = asked if asked in methods and point == links.DEFAULT_POINT else links.partition_of(study, asked, point, held)
    if found is None:
        shown = asked + ("" if point == links.DEFAULT_POINT else f" @ {point}")
        unknown_note("method", [shown], f"{ALL} (every method of {study})")
    st.session_state["method"] = found or ALL
url_choice("method", [ALL, *methods], ALL)
method = c2.selectbox("Method", [ALL, *methods], key="method")
method_f = None if method == ALL else method
seeds = p.query("trajectory_seeds", study=study, method=method_f)
url_choice("seed", [ALL, *seeds], ALL, cast=int)
seed = c3.selectbox("Seed", [ALL, *seeds], key="seed")
seed_f = None if seed == ALL else int(seed)
if method_f is not None:
    holds = links.point_of(study, method_f, held)
    st.caption(f"Partition `{method_f}` holds the steps of the point **{holds[0]}"
               + ("" if holds[1] == links.DEFAULT_POINT else f" @ {holds[1]}") + "**, as its study wrote with them."
               if holds else f"Partition `{method_f}`: steps of no reported point (a run of the study's own analysis).")

with st.expander(f"Action codes of `{study}`"):
    st.table([{"action": code, "meaning": meaning} for code, meaning in action_legend(study)])

i1, i2 = st.columns([1, 2])
if "item_search" not in st.session_state:
    st.session_state["item_search"] = st.query_params.get("item", "")
search = i1.text_input("Search item id", key="item_search", help="Part of an item id (case-insensitive); the list shows the first matches.")
matches, n_matches = p.query("trajectory_items", study=study, method=method_f, seed=seed_f, search=search, limit=ITEM_CHOICES)
exact = search.strip() if search.strip() in matches else (matches[0] if len(matches) == 1 else None)
if st.session_state.get("_last_item_search") != search:  # a new search picks its exact or only match
    st.session_state["_last_item_search"] = search
    if exact is not None:
        st.session_state["item"] = exact
url_choice("item", [ALL, *matches], exact or ALL)
item = i2.selectbox(f"Item ({n_matches:,} match{'es' if n_matches != 1 else ''}"
                    + (f", first {len(matches)} listed" if n_matches > len(matches) else "") + ")",
                    [ALL, *matches], key="item")
item_f = None if item == ALL else item
keep_in_url(study=study, method=method_f, op=None, seed=seed_f, item=item_f)  # the partition now names the point

total = p.query("count_steps", study=study, method=method_f, seed=seed_f, item_id=item_f)
s1, s2, s3 = st.columns([1, 1, 4])
url_choice("rows", PAGE_SIZES, 50, cast=int)
page_size = s1.selectbox("Rows per page", PAGE_SIZES, key="rows")
pages = max(1, math.ceil(total / page_size))
restart_when_changed("page", (study, method_f, seed_f, item_f, page_size))  # other rows start at their first page
url_value("page", 1, int, lambda k: 1 <= k <= pages)
page = s2.number_input(f"Page (of {pages})", min_value=1, max_value=pages, step=1, key="page")
keep_in_url(rows=None if page_size == 50 else page_size, page=None if page == 1 else int(page))
offset = (int(page) - 1) * page_size
rows = p.query("steps_page", study=study, method=method_f, seed=seed_f, item_id=item_f, limit=page_size, offset=offset)
s3.metric("Steps matching", f"{total:,}")
st.caption(f"Rows {offset + 1 if total else 0}–{offset + rows.height} of {total:,}, ordered by method, seed, episode, step.")
st.dataframe(readable(rows), hide_index=True, width="stretch", key="steps_table")
download_csv(p, rows, "steps", {"study": study, "method": method_f, "seed": seed_f, "item": item_f, "page": int(page)},
             key="steps_download")

# ---------------------------------------------------------------------------------------------
st.header("Follow one item")
follow_item = item_f or (matches[0] if matches else None)
if follow_item is None:
    st.caption("No item matches the search.")
    st.stop()
if item_f is None:
    st.caption(f"No item picked above: following the first match, `{follow_item}`.")
runs = p.query("item_runs", study=study, item_id=follow_item)
if method_f is not None:
    runs = runs.filter(pl.col("method") == method_f)
if seed_f is not None:
    runs = runs.filter(pl.col("seed") == seed_f)
if runs.is_empty():
    st.caption("No run of these filters visited this item.")
    st.stop()
f1, f2 = st.columns([2, 1])
run_methods = runs["method"].unique(maintain_order=True).to_list()
method_default = method if method in run_methods else run_methods[0]
follow_default("follow", method_default)  # follows the filters above until picked
url_choice("follow", run_methods, method_default)
follow_method = f1.selectbox("Method to follow", run_methods, key="follow")
run_seeds = runs.filter(pl.col("method") == follow_method)["seed"].to_list()
seed_default = seed if seed in run_seeds else run_seeds[0]
follow_default("follow_seed", seed_default)
url_choice("follow_seed", run_seeds, seed_default, cast=int)
follow_seed = f2.selectbox("Seed to follow", run_seeds, key="follow_seed")
keep_in_url(follow=None if follow_method == method_default else follow_method,
            follow_seed=None if follow_seed == seed_default else int(follow_seed))

card = p.query("item_card", item_id=follow_item)
if card:
    st.markdown(
        f"**{card['item_id']}** — split `{card['split']}`, difficulty {card['difficulty']}, domain `{card['domain']}`, "
        f"gold answer **{card['gold']}**"
    )
    st.text(card["question"])
answers = p.query("item_answers", item_id=follow_item)
if answers.height:
    st.caption("What each solver answered (cached answers, with their offline labels):")
    st.dataframe(answers, hide_index=True, width="stretch", key="answers_table")

steps = p.query("item_steps", study=study, method=follow_method, seed=follow_seed, item_id=follow_item, limit=ITEM_STEPS)
n_steps = p.query("count_steps", study=study, method=follow_method, seed=follow_seed, item_id=follow_item)
st.caption(f"{n_steps:,} step(s) of `{follow_method}` (seed {follow_seed}) on this item"
           + (f" (the first {ITEM_STEPS:,} shown)" if n_steps > steps.height else "")
           + ", in order: who was asked (executors), the action, whether the answer was correct, its cost and reward.")
st.dataframe(steps.drop("extra", "method", "seed", "item_id"), hide_index=True, width="stretch", key="item_steps_table")
if steps.height:
    labels = [f"episode {e} · step {s}" for e, s in steps.select("episode", "step").iter_rows()]  # as the URL keeps it
    if len(set(labels)) < len(labels):  # several rows at one episode and step (rollouts): their row number too
        labels = [f"{label} · row {k + 1}" for k, label in enumerate(labels)]
    restart_when_changed("step", (study, follow_method, follow_seed, follow_item))
    url_choice("step", labels, labels[0])
    chosen = st.selectbox("Step details (extra)", labels, key="step")
    keep_in_url(step=None if chosen == labels[0] else chosen)
    st.json(queries.pretty_extra(steps["extra"][labels.index(chosen)]))
