"""What a download holds, in one line: the project (by its folder name, never the server's absolute
path), the table and every choice behind the view — on the Frontier the dataset, the verifier and
whether a deployment could run it, the points shown, the solvers taking part, the highlight, the zoom,
the budget and the filters. Every CSV's first line is this line and the Frontier figure's title its
short form, so a file read away from the page says what it is. Streamlit-free, so tests call it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHORT_LIST = 16  # a title names this many values of a list, then "+N more" (the CSV line names all)


def project_name(root: Path, repo: Path = REPO) -> str:
    """The project as a reader knows it: its folder relative to the repository (e.g.
    `experiments/zeroeval_gsm8k`), else its folder name — never the machine's absolute path."""
    root = Path(root)
    try:
        relative = root.resolve().relative_to(repo.resolve())
    except ValueError:
        return root.name
    return str(relative) if relative.parts else root.name


def solvers_text(subset: list[str], models: list[str]) -> str:
    """`all N solvers`, or `k of N solvers: a, b, …`."""
    if not models:
        return ""
    if set(subset) >= set(models):
        return f"all {len(models)} solvers"
    return f"{len(subset)} of {len(models)} solvers: " + ", ".join(sorted(subset))


def verifier_text(verifier: str | None, deployable: bool | None) -> str:
    """The verifier and, where the frontier records it, whether a deployment could run it."""
    if deployable is None:
        return str(verifier)
    return f"{verifier} ({'deployable' if deployable else 'not deployable'})"


def frontier_view(*, dataset: str, split: str, verifier: str | None, deployable: bool | None, points: str,
                  subset: list[str], models: list[str], highlight: list[str], zoom: tuple[float, float] | None,
                  budget: float | None, studies: list[str] | None, whole_pool: str | None = None) -> dict[str, Any]:
    """The Frontier page's whole view, in reading order (None: a filter left at its default)."""
    return {
        "dataset": f"{dataset} ({split} split)",
        "verifier": verifier_text(verifier, deployable),
        "points": points,
        "solvers": solvers_text(subset, models) or None,
        "highlight": list(highlight) or "none",
        "zoom": f"accuracy {zoom[0]:.1%}–{zoom[1]:.1%}" if zoom else "off",
        "budget": f"${budget:.3g} per item" if budget is not None else None,
        "studies": studies,
        "methods on every solver": whole_pool,  # kept beside a subset, or not (None: no subset or none such)
    }


def describe(project: str, what: str, view: dict[str, Any]) -> str:
    """The one line (no newline) naming the table, the project and every value of `view`."""
    line = "; ".join([f"delegation-lab {what}", f"project {project}"]
                     + [f"{k} = {_flat(v)}" for k, v in view.items() if v not in (None, "", [])])
    return " ".join(line.splitlines())  # a typed filter value cannot break the comment line


def title(view: dict[str, Any], per_line: int = 80) -> str:
    """The view for a figure's title: long lists cut to their first values and a count, broken into
    lines (`<br>`) of about `per_line` characters so an exported image keeps all of it."""
    parts = [f"{v}" if k == "dataset" else f"{k} {_short(v)}" for k, v in view.items() if v not in (None, "", [])]
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part) + 3 > per_line:
            lines.append(line)
            line = ""
        for word in _pieces(part, per_line):  # a part longer than a line breaks after a comma
            if line and len(line) + len(word) + 3 > per_line:
                lines.append(line)
                line = word
            else:
                line = f"{line} · {word}" if line and word is not None and not line.endswith(",") else f"{line} {word}".strip()
    return "<br>".join(lines + [line] if line else lines)


def _pieces(part: str, per_line: int) -> list[str]:
    """`part` whole when it fits a line, else cut after its commas into pieces that do."""
    if len(part) <= per_line:
        return [part]
    words = part.split(", ")
    return [w + ("," if k < len(words) - 1 else "") for k, w in enumerate(words)]


def _short(value: Any) -> str:
    if isinstance(value, str) and ": " in value and value.count(", ") >= SHORT_LIST:  # "k of N solvers: a, b, …"
        head, names = value.split(": ", 1)
        return f"{head}: {_short(names.split(', '))}"
    if isinstance(value, list | tuple):
        kept = ", ".join(map(str, value[:SHORT_LIST]))
        return kept + (f" +{len(value) - SHORT_LIST} more" if len(value) > SHORT_LIST else "")
    return str(value)


def _flat(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
