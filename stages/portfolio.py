"""Stage `portfolio`: which k models, in which arrangement, to deploy, chosen on
`portfolio.select_split` and reported on `frontier.split` (metrics/portfolio.json, plots/portfolio/)."""

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

from delegation_lab.portfolio.selection import write_portfolio
from delegation_lab.portfolio.report import portfolio_table
from delegation_lab.pipeline.stage import StageContext, run_stage


def portfolio(ctx: StageContext) -> None:
    """Choose and measure the portfolios of k = 1 .. portfolio.max_k models."""
    print(portfolio_table(write_portfolio(ctx.layout, ctx.params)), end="")


if __name__ == "__main__":
    run_stage("portfolio", portfolio)
