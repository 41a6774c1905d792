"""Portfolio: which k models, in which arrangement, to deploy (metrics/portfolio.json, stage
`portfolio`): accuracy vs cost per k with the chosen models named, chosen on one split and
measured on another."""

import streamlit as st

from dashboards.cached import no_results, project, show_chart
from dashboards.portfolio import (
    arrangements_table,
    best_single_label,
    chosen_table,
    cost_delta,
    k_range_text,
    load_portfolio,
    portfolio_figure,
    verifier_note,
)
from dashboards.view_line import verifier_text


@st.cache_data(max_entries=16, show_spinner=False)
def portfolio_metrics(root: str, stamp: str) -> dict | None:
    from pathlib import Path

    return load_portfolio(Path(root) / "metrics" / "portfolio.json")


p = project()
st.title("Portfolio: which k models to deploy")
metrics = portfolio_metrics(*p.key)
if metrics is None:
    no_results(p, "the portfolio (metrics/portfolio.json, `dvc repro portfolio`)")
    st.stop()

verifier = (metrics.get("verifier") or {}).get("name", "?")
router = metrics.get("router")
st.caption(
    f"For {k_range_text(metrics)}: the arrangement — one model, a cost-ordered cascade "
    f"under the verifier `{verifier}`" + (f", or a {router['name']} router at a cost weight λ" if router else "")
    + f" — most accurate on the **{metrics['select_split']}** split ({metrics['n_select_items']} items), measured on "
    f"**{metrics['split']}** ({metrics['n_items']} items) with {metrics['confidence']:.0%} item-bootstrap intervals."
)
not_deployable = verifier_note(metrics)
if not_deployable:
    st.info(f"Verifier `{verifier}`: {not_deployable} — the cascades below rest on it, and no deployment could run it.")
chosen = chosen_table(metrics)
best = chosen.sort("accuracy", "cost_per_item_usd", descending=[True, False]).row(0, named=True)
single = metrics["best_single"]
a, b, c = st.columns(3)
a.metric(f"Oracle of all {metrics['solvers']} models", f"{metrics['oracle']['accuracy']:.1%}",
         help="The cheapest correct model per item: an upper bound no deployment reaches.")
b.metric(best_single_label(metrics), f"${single['cost_per_item_usd']:.3g}/item",
         help=f"The most accurate single model on the {metrics['select_split']} split, its cost measured on "
              f"{metrics['split']}; the Frontier's best single model is the most accurate on {metrics['split']} itself, so it may differ.")
delta, arrow = cost_delta(best["of_best_single_cost"])
c.metric(f"Best portfolio (k={best['k']})", f"{best['of_oracle_accuracy']:.1%} of oracle", delta,
         delta_color="inverse", delta_arrow=arrow)

show_chart(portfolio_figure(metrics), "portfolio_chart", "portfolio", view={
    "portfolio": f"k = 1..{metrics['max_k']} of {metrics['solvers']} models",
    "verifier": verifier_text(verifier, (metrics.get("verifier") or {}).get("deployable")),
    "chosen on": metrics["select_split"], "measured on": metrics["split"]})
st.dataframe(chosen, hide_index=True, width="stretch", key="portfolio_table",
             column_config={"accuracy": st.column_config.NumberColumn(format="%.3f"),
                            "of_oracle_accuracy": st.column_config.NumberColumn(format="%.3f"),
                            "of_best_single_cost": st.column_config.NumberColumn(format="%.3f")})
st.subheader("Best of each arrangement per k")
st.caption("The most accurate candidate of each arrangement on the selection split (the chosen one is the most "
           "accurate of these), measured on the report split; `candidates` is how many of that arrangement were scored.")
st.dataframe(arrangements_table(metrics), hide_index=True, width="stretch", key="portfolio_arrangements")
