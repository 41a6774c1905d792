"""What `dlab portfolio` and the stage show of metrics/portfolio.json: the table per k with the
cross-validation curve and choice of k, and the picture (accuracy vs cost per k, plots/portfolio/portfolio.png)."""

from __future__ import annotations

from pathlib import Path

from delegation_lab.pipeline.figures import pyplot, save_figure


def arrangement_label(p: dict) -> str:
    """'cascade: a > b' (cheap first), 'router knn lambda=0.1: a | b', 'single: a'."""
    if p["arrangement"] == "router":
        return f"router {p['router']} lambda={p['knob']:g}: {' | '.join(p['models'])}"
    return f"{p['arrangement']}: {' > '.join(p['models'])}"


def portfolio_table(metrics: dict) -> str:
    """One line per k: the chosen models and their test accuracy and cost with intervals."""
    lines = [(f"portfolio on {metrics['split']} ({metrics['n_items']} items), chosen on {metrics['select_split']}; "
              f"oracle of {metrics['solvers']} models {metrics['oracle']['accuracy']:.3f}; best single "
              f"{metrics['best_single']['model']} ${metrics['best_single']['cost_per_item_usd']:.3g}/item"),
             f"{'k':>2}  {'accuracy [CI]':<22} {'cost/item US$ [CI]':<32} {'of oracle':>9} {'of single $':>11}  models"]
    for k, p in metrics["portfolios"].items():
        a, c = p["accuracy_ci"], p["cost_ci"]
        lines.append(f"{k:>2}  {p['accuracy']:.3f} [{a[0]:.3f}, {a[1]:.3f}]   {p['cost_per_item_usd']:<9.3g} "
                     f"[{c[0]:.3g}, {c[1]:.3g}]".ljust(59) + f" {p['of_oracle_accuracy']:>9.3f} {p['of_best_single_cost']:>11.3f}  "
                     f"{arrangement_label(p)}")
    return "\n".join(lines + cv_lines(metrics["cross_validation"])) + "\n"


def cv_lines(cv: dict) -> list[str]:
    """The cross-validation curve and the two choices of k (CV and greedy) with their report-split figures."""
    lines = [f"k by {cv['folds']}-fold cross-validation on the selection split ({cv['rule']}, model_penalty {cv['model_penalty']:g}):",
             f"{'k':>2}  {'CV accuracy':<11} {'SE':<7} {'CV cost/item US$':<16}  within 1 SE"]
    lines += [f"{k:>2}  {p['accuracy']:<11.3f} {p['se']:<7.3f} {p['cost_per_item_usd']:<16.3g}  {'yes' if p['within_one_se'] else 'no'}"
              for k, p in cv["curve"].items()]
    for name in ("cv_choice", "greedy_choice"):
        c = cv[name]
        (alo, ahi), (clo, chi) = c["accuracy_ci"], c["cost_ci"]
        lines.append(f"{name.replace('_', ' ')}: k={c['k']} {arrangement_label(c)}: accuracy {c['accuracy']:.3f} [{alo:.3f}, {ahi:.3f}], "
                     f"cost/item {c['cost_per_item_usd']:.3g} [{clo:.3g}, {chi:.3g}]")
    d = cv["cv_minus_greedy"]["accuracy"]
    lines.append(f"cv - greedy accuracy {d['difference']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] (p = {d['p_value']:.3g}); "
                 f"better on the report split: {cv['better_on_test']}")
    return lines


def choice_tag(metrics: dict, k: str) -> str:
    """' (CV choice, greedy choice)' where the cross-validation or the greedy rule chose this k."""
    cv = metrics["cross_validation"]
    tags = [name for name, key in (("CV choice", "cv_choice"), ("greedy choice", "greedy_choice")) if str(cv[key]["k"]) == k]
    return f" ({', '.join(tags)})" if tags else ""


def plot_portfolio(metrics: dict, out: Path) -> None:
    """Accuracy vs cost on the report split: each k's front (small) and its chosen portfolio (large,
    marked k and named in the legend below, where long model lists fit; the k's the cross-validation and
    the greedy rule choose are tagged there)."""
    plt = pyplot()
    from matplotlib.ticker import NullFormatter

    fig, ax = plt.subplots(figsize=(10, 7.5), dpi=120)
    cmap = plt.get_cmap("viridis")
    ks = list(metrics["portfolios"])
    for i, k in enumerate(ks):
        p, color = metrics["portfolios"][k], cmap(i / max(len(ks) - 1, 1))
        ax.scatter([f["cost_per_item_usd"] for f in p["front"]], [f["accuracy"] for f in p["front"]], s=12, color=color, alpha=0.5)
        (alo, ahi), (clo, chi) = p["accuracy_ci"], p["cost_ci"]
        ax.errorbar([p["cost_per_item_usd"]], [p["accuracy"]], yerr=[[p["accuracy"] - alo], [ahi - p["accuracy"]]],
                    xerr=[[p["cost_per_item_usd"] - clo], [chi - p["cost_per_item_usd"]]], fmt="o", color=color,
                    markersize=7, capsize=2, label=f"k={k}{choice_tag(metrics, k)} {arrangement_label(p)}")
        ax.annotate(f"k={k}", (p["cost_per_item_usd"], p["accuracy"]), fontsize=7, xytext=(5, 3), textcoords="offset points")
    ax.axhline(metrics["oracle"]["accuracy"], color="goldenrod", lw=1, ls="--", label=f"oracle of all {metrics['solvers']} models")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("cost per item (US$, log scale)")
    ax.set_ylabel(f"accuracy on {metrics['split']} (error bars: {metrics['confidence']:.0%} item bootstrap)")
    ax.set_title(f"portfolios of k models chosen on {metrics['select_split']} (small: each k's front there)\n"
                 f"verifier {metrics['verifier'].get('name', '?')}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1, frameon=False)
    save_figure(fig, out, tight_layout=True)
