"""Trajectories: a paged table of decision steps, and every step of one item followed in order."""

import math

import streamlit as st

from dashboards import queries
from dashboards.cached import no_results, project

ALL = queries.ALL
ITEM_STEPS = 1000  # steps of one followed item shown at most
p = project()
st.title("Trajectories")
studies = p.query("trajectory_studies")
if not studies:
    no_results(p, "trajectories (results/trajectories/)")
    st.stop()

c1, c2, c3, c4 = st.columns([2, 2, 1, 2])
study = c1.selectbox("Study", studies)
method = c2.selectbox("Method", [ALL, *p.query("trajectory_methods", study=study)])
method_f = None if method == ALL else method
seed = c3.selectbox("Seed", [ALL, *p.query("trajectory_seeds", study=study, method=method_f)])
seed_f = None if seed == ALL else int(seed)
item = c4.selectbox("Item", [ALL, *p.query("trajectory_items", study=study, method=method_f, seed=seed_f)])
item_f = None if item == ALL else item

total = p.query("count_steps", study=study, method=method_f, seed=seed_f, item_id=item_f)
s1, s2, s3 = st.columns([1, 1, 4])
page_size = s1.selectbox("Rows per page", [25, 50, 100, 500], index=1)
pages = max(1, math.ceil(total / page_size))
page = s2.number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=1, step=1)
offset = (int(page) - 1) * page_size
rows = p.query("steps_page", study=study, method=method_f, seed=seed_f, item_id=item_f, limit=page_size, offset=offset)
s3.metric("Steps matching", f"{total:,}")
st.caption(f"Rows {offset + 1 if total else 0}–{offset + rows.height} of {total:,}, ordered by method, seed, episode, step.")
st.dataframe(rows, hide_index=True, width="stretch", key="steps_table")

# ---------------------------------------------------------------------------------------------
st.header("Follow one item")
f1, f2, f3 = st.columns([2, 1, 2])
methods = p.query("trajectory_methods", study=study)
follow_method = f1.selectbox("Method to follow", methods, index=methods.index(method) if method in methods else 0)
seeds = p.query("trajectory_seeds", study=study, method=follow_method)
follow_seed = f2.selectbox("Seed to follow", seeds, index=seeds.index(seed) if seed in seeds else 0)
items = p.query("trajectory_items", study=study, method=follow_method, seed=follow_seed)
if not items:
    st.caption("This run visited no item.")
    st.stop()
follow_item = f3.selectbox("Item to follow", items, index=items.index(item) if item in items else 0)

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
    labels = [f"episode {e} · step {s}" for e, s in steps.select("episode", "step").iter_rows()]
    chosen = st.selectbox("Step details (extra)", range(steps.height), format_func=lambda i: labels[i])
    st.json(queries.pretty_extra(steps["extra"][chosen]))
