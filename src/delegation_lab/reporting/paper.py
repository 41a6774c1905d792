"""Paper figures beside ours, by one convention every study's metrics/<study>.json follows:

a paper's figure sits at the same key path as our measurement with one extra segment `paper`, e.g.
`management.paper.dqn_map.late_return_mean` (Table 1) beside `management.dqn_map.late_return_mean`
(ours). The dashboard's "Paper vs reproduction" page and the study notes read this pairing.

Provenance: a row is evidence only when "ours" is an outcome of the method. A metrics file's
top-level `provenance` block maps a row's dotted "ours" key (the `metric` column) to
{"kind": "calibrated" | "setting", "why": "<one sentence>"}: `calibrated` = an input chosen to match
the paper, `setting` = a configured value read back. Rows not listed are `computed`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.flatten import is_number, leaves
from delegation_lab.pipeline.layout import Layout

PAPER = "paper"
PROVENANCE = "provenance"
KINDS = ("computed", "calibrated", "setting")


def _provenance(block: Any, metrics: set[str], source: str) -> dict[str, dict[str, str]]:
    """The validated provenance block: every key a metric of the file (a paper row, or a value of ours the
    paper has no figure for, e.g. a setting we added), every kind known, every why a sentence."""
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise InputError(f"{source}: `provenance` must map a paper-vs-ours key to {{kind, why}}, got {type(block).__name__}")
    out = {}
    for key, entry in block.items():
        where = f"{source}: provenance[{key!r}]"
        if key not in metrics:
            raise InputError(f"{where}: no paper-vs-ours row or metric has this key")
        if not isinstance(entry, dict) or set(entry) - {"kind", "why"}:
            raise InputError(f"{where}: expected {{\"kind\": ..., \"why\": ...}}, got {entry!r}")
        kind, why = entry.get("kind"), entry.get("why")
        if kind not in KINDS:
            raise InputError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if kind != "computed" and not (isinstance(why, str) and why.strip()):
            raise InputError(f"{where}: a {kind} row needs a `why` sentence")
        out[key] = {"kind": kind, "why": why or ""}
    return out


def paper_vs_ours(metrics: dict[str, Any], source: str = "metrics") -> list[dict[str, Any]]:
    """Rows (metric, paper, ours, difference, provenance, why) for every paper figure in a metrics
    dict; `source` names the file in errors about its provenance block."""
    flat = dict(leaves({k: v for k, v in metrics.items() if k != PROVENANCE}))
    rows = []
    for path, paper_value in flat.items():
        if PAPER not in path:
            continue
        ours_path = tuple(p for p in path if p != PAPER)
        ours = flat.get(ours_path)
        diff = ours - paper_value if is_number(ours) and is_number(paper_value) else None
        rows.append({"metric": ".".join(ours_path), "paper": paper_value, "ours": ours, "difference": diff})
    ours_values = {".".join(p): v for p, v in flat.items() if PAPER not in p}
    marks = _provenance(metrics.get(PROVENANCE), {r["metric"] for r in rows} | set(ours_values), source)
    paper_keys = {r["metric"] for r in rows}
    # a marked value of ours with no paper figure (a setting we added, a rate we injected) is a row too,
    # so the report lists it among the inputs that are not results
    rows += [{"metric": key, "paper": None, "ours": ours_values[key], "difference": None}
             for key in marks if key not in paper_keys]
    for row in rows:
        mark = marks.get(row["metric"], {"kind": "computed", "why": ""})
        row["provenance"], row["why"] = mark["kind"], mark["why"]
    return rows


def read_all(metrics_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Per study (metrics file stem): its paper-vs-ours rows; studies without paper figures are left
    out. A bad provenance block raises InputError naming the file and key."""
    out = {}
    for path in sorted(metrics_dir.glob("*.json")):
        try:
            metrics = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            continue
        if not isinstance(metrics, dict):
            continue
        rows = paper_vs_ours(metrics, str(path))
        if rows:
            out[path.stem] = rows
    return out


def report_rows(studies: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One flat list, as `dlab report --format json` emits it: study, key, paper, ours, difference,
    provenance, why."""
    return [
        {"study": study, "key": r["metric"], "paper": r["paper"], "ours": r["ours"], "difference": r["difference"],
         "provenance": r["provenance"], "why": r["why"]}
        for study, rows in studies.items() for r in rows
    ]


def not_results_markdown(studies: dict[str, list[dict[str, Any]]]) -> str:
    """Per study, one line naming its calibrated inputs and its settings read back (README)."""
    lines = []
    for study, rows in studies.items():
        parts = [f"{kind}: " + ", ".join(f"`{r['metric']}`" for r in rows if r["provenance"] == kind)
                 for kind in KINDS[1:] if any(r["provenance"] == kind for r in rows)]
        if parts:
            lines.append(f"- **{study}** — " + "; ".join(parts) + "\n")
    return "".join(lines) or "- none: every row is computed\n"


def headline_markdown(studies: dict[str, list[dict[str, Any]]]) -> str:
    """The headline paper-vs-ours page (docs/paper_vs_ours.md): only `computed` rows are results;
    the inputs calibrated to the paper and the settings read back follow, each with its reason."""
    from delegation_lab.tracking.compare import markdown_table

    rows = report_rows(studies)
    computed = [r for r in rows if r["provenance"] == "computed"]
    others = [r for r in rows if r["provenance"] != "computed"]
    text = ("# Paper vs ours: the results\n\nGenerated by `dlab report --headline --out docs/paper_vs_ours.md` from "
            f"{Layout().metrics_dir}/*.json. Only `computed` rows (outcomes of the method) are results: {len(computed)} of {len(rows)} rows.\n\n")
    text += markdown_table(computed, ["study", "key", "paper", "ours", "difference"])
    text += "\n## Not results: inputs calibrated to the paper, settings read back\n\n" + not_results_markdown(studies)
    if others:
        text += "\n" + "".join(f"- {r['study']} `{r['key']}` ({r['provenance']}): {r['why']}\n" for r in others)
    return text
