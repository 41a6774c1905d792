"""Matplotlib for static plots (headless) and atomic PNG writes shared by every study."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (stages run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, out: Path, tight_layout: bool = False, **savefig: Any) -> Path:
    """Write `fig` to `out` through a temporary file (never a half-written PNG); the figure is closed
    either way, so callers never close it themselves."""
    try:
        if tight_layout:
            fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.stem + ".tmp" + out.suffix)
        fig.savefig(tmp, **savefig)
    finally:
        pyplot().close(fig)
    tmp.replace(out)
    return out
