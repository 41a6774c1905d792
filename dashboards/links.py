"""The one place that builds and parses the links into the Trajectories page.

A link names a point the way the frontier and the outcome tables do — study, method, operating
point — plus a seed and an item. Studies name their trajectory partitions their own way
(`management.dqn_map.lambda10` for coordinator's `management.dqn_map @ lambda=10`,
`learned_cascade.tau_0.3` for routers' `learned_cascade @ tau=0.3`, `1p-md@R0.5x`, `margent-rho0.5`,
`cached.ts.b0.5`), so `trajectory_method` maps a point to the partition that holds its steps by
comparing the names' words and numbers, and says None rather than guess when that is not one
partition: a link must never open another method's steps.

`point_link` is what a page builds a link with: it resolves the point against the partitions and
seeds the trajectory files hold (`queries.trajectory_keys`, read once per state of the results),
and gives no link when that is not one partition holding that seed — a point whose study wrote no
steps for it (a `fixed_order` baseline, an operating point no partition names) has no link rather
than one to another method. The link names the partition itself, so the page opens it as is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
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


def words(name: str) -> tuple[str, ...]:
    """A name's words and numbers, lower-case: `tau=0.3`, `tau_0.3` and `tau0.3` read the same,
    `lambda=1.5` and `lambda=15` do not."""
    return tuple(re.findall(r"[a-z]+|\d+(?:\.\d+)?", name.lower()))


def _tail(name: str) -> str | None:
    """The name without its first dotted segment (`management.dqn_map` -> `dqn_map`)."""
    head, dot, rest = name.partition(".")
    return rest if dot and head and rest else None


def trajectory_method(method: str, operating_point: str, available: list[str]) -> str | None:
    """The trajectory partition of (method, operating point) among `available`, or None when no
    single partition is it."""
    point = () if operating_point == DEFAULT_POINT else words(operating_point)
    if not point and method in available:
        return method
    wanted = {words(method) + point}
    if (t := _tail(method)) is not None:
        wanted.add(words(t) + point)

    def seen_as(name: str) -> set[tuple[str, ...]]:
        forms = {words(name)}
        if (t := _tail(name)) is not None:
            forms.add(words(t))
        return forms

    found = [a for a in available if words(a) in wanted]
    if not found:
        found = [a for a in available if seen_as(a) & wanted]
    if len(found) == 1:
        return found[0]
    if not found and method in available:
        # the study keeps one partition per method (its operating points share it), unless some
        # partition is this method at a named point: then this point has no steps of its own
        stem = words(method)
        if not any(len(words(a)) > len(stem) and words(a)[: len(stem)] == stem for a in available):
            return method
    return None


Partitions = Mapping[str, Mapping[str, frozenset[int]]]  # study -> partition -> seeds on disk


def point_link(study: str, method: str, operating_point: str, seed: int, item: str | None,
               partitions: Partitions) -> str | None:
    """The link to one point's steps at `seed` (on `item`), or None when the trajectory files hold
    no single partition of that point with that seed."""
    held = partitions.get(study, {})
    partition = trajectory_method(method, operating_point, sorted(held))
    if partition is None or int(seed) not in held[partition]:
        return None
    return steps_url(StepsKey(study, partition, DEFAULT_POINT, int(seed), item))
