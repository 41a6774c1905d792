"""The one place that builds and parses the links into the Trajectories page.

A link names a point the way the frontier and the outcome tables do — study, method, operating
point — plus a seed and an item. Which trajectory partition holds a point's steps is what the study
wrote with them (each file's Parquet metadata, `store.TrajectoryWriter`): (study, method, operating
point, seed) -> partition, read by `queries.trajectory_points`. Nothing here reads a partition's
name: a point the study wrote no steps for (a `fixed_order` baseline, a seed it did not record) has
no link, and a link can only open the partition the study said holds that point at that seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

PAGE = "trajectories"
DEFAULT_POINT = "default"
KEYS = ("study", "method", "op", "seed", "item")  # the query parameters a link sets


@dataclass(frozen=True)
class StepsKey:
    """What a link into Trajectories names."""

    study: str
    method: str
    operating_point: str = DEFAULT_POINT
    seed: int | None = None
    item: str | None = None


def steps_url(key: StepsKey) -> str:
    """`trajectories?study=…&method=…[&op=…][&seed=…][&item=…]`, every value percent-encoded (names
    carry `@`, `=`, `.`, `>`, `:`, `+`)."""
    params = {"study": key.study, "method": key.method}
    if key.operating_point != DEFAULT_POINT:
        params["op"] = key.operating_point
    if key.seed is not None:
        params["seed"] = str(int(key.seed))
    if key.item is not None:
        params["item"] = key.item
    return f"{PAGE}?{urlencode(params, quote_via=quote, safe='')}"


def parse_steps(query: Mapping[str, str | list[str]]) -> StepsKey | None:
    """The key of a link from its query parameters (st.query_params, or parse_qs's lists); None when
    it names no study and method. Raises ValueError (its message says which parameter) for a seed
    that is not an integer."""
    def one(name: str) -> str | None:
        value = query.get(name)
        if isinstance(value, list):
            value = value[-1] if value else None
        return value or None

    study, method = one("study"), one("method")
    if study is None or method is None:
        return None
    seed = one("seed")
    try:
        seed_value = None if seed is None else int(seed)
    except ValueError:
        raise ValueError(f"seed={seed!r} is not an integer") from None
    return StepsKey(study, method, one("op") or DEFAULT_POINT, seed_value, one("item"))


Held = Mapping[tuple[str, str, str, int], str]  # (study, method, operating point, seed) -> its partition


def partition_of(study: str, method: str, operating_point: str, held: Held, seed: int | None = None) -> str | None:
    """The partition holding the point's steps (at `seed`; with no seed, the one partition holding
    it at any seed), or None when the study wrote none."""
    if seed is not None:
        return held.get((study, method, operating_point, int(seed)))
    found = {p for (s, m, o, _), p in held.items() if (s, m, o) == (study, method, operating_point)}
    return found.pop() if len(found) == 1 else None


def point_of(study: str, partition: str, held: Held) -> tuple[str, str] | None:
    """The (method, operating point) a partition holds, or None for steps of no point."""
    return next(((m, o) for (s, m, o, _), p in held.items() if s == study and p == partition), None)


def point_link(study: str, method: str, operating_point: str, seed: int, item: str | None, held: Held) -> str | None:
    """The link to one point's steps at `seed` (on `item`), or None when the study wrote none."""
    partition = held.get((study, method, operating_point, int(seed)))
    if partition is None:
        return None
    return steps_url(StepsKey(study, partition, DEFAULT_POINT, int(seed), item))


NO_STEPS_BY_DESIGN = ("fixed_order",)  # coordinator's fixed orders are baselines: outcomes, no steps


def audit(root: Path) -> dict[str, Any]:
    """Every outcome point (study, method, operating point, seed) of the project at `root` through
    `point_link`: how many link to the partition their study wrote as holding them (present at that
    seed, visiting only that point's test items), how many have no link by design (a study without
    steps, a fixed order, a seed not recorded while another of the point's seeds has steps), and the
    `wrong` ones (a link elsewhere, or none where the study wrote steps): `python -m dashboards.links
    PROJECT ...` prints it."""
    from dashboards.queries import trajectory_points
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.store import connect

    con = connect(Layout(Path(root)))
    held = trajectory_points(con, str(root))
    keys = con.sql("SELECT DISTINCT study, method, operating_point, seed FROM outcomes ORDER BY ALL").fetchall()
    with_steps = {s for (s,) in con.sql("SELECT DISTINCT study FROM trajectories").fetchall()}
    linked_points = {k[:3] for k in held}
    report: dict[str, Any] = {"points": len(keys), "linked": 0, "no_steps": 0, "wrong": []}
    for study, method, point, seed in keys:
        url = point_link(study, method, point, seed, None, held)
        if url is None:
            if study in with_steps and not method.endswith(NO_STEPS_BY_DESIGN) and (study, method, point) not in linked_points:
                report["wrong"].append(f"{study}/{method} @ {point} seed {seed}: no link, though {study} wrote steps")
            else:
                report["no_steps"] += 1
            continue
        partition = held[(study, method, point, int(seed))]
        args = {"s": study, "m": partition, "k": int(seed), "method": method, "o": point}
        visited = con.sql("SELECT DISTINCT item_id FROM trajectories WHERE study = $s AND method = $m AND seed = $k "
                          "AND split = 'test' AND item_id IS NOT NULL", params={k: args[k] for k in ("s", "m", "k")}).fetchall()
        scored = con.sql("SELECT DISTINCT item_id FROM outcomes WHERE study = $s AND method = $method AND operating_point = $o "
                         "AND seed = $k", params={k: args[k] for k in ("s", "method", "o", "k")}).fetchall()
        if not set(visited) <= set(scored):
            report["wrong"].append(f"{study}/{method} @ {point} seed {seed}: {partition!r} visited items the point did not score")
        else:
            report["linked"] += 1
    return report


if __name__ == "__main__":
    import sys

    for project in sys.argv[1:]:
        got = audit(Path(project))
        print(f"{project}: {got['points']} outcome points, {got['linked']} linked to their own steps, "
              f"{got['no_steps']} without steps (no link), {len(got['wrong'])} wrong")
        for line in got["wrong"][:20]:
            print(f"  {line}")
