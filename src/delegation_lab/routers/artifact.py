"""Saved routers: `models/routers/<name>.npz`, every fitted array plus a JSON header (router name,
solvers, embedder, operating points), loaded without pickle by `dlab route`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from delegation_lab.errors import InputError
from delegation_lab.routers import ROUTERS, Router
from delegation_lab.routers.params import RoutersParams


def save_router(router: Router, path: Path, embedder: str, params: RoutersParams) -> Path:
    section = getattr(params, router.name, None)
    header = {"router": router.name, "solvers": router.solvers, "embedder": embedder,
              "params": section.model_dump() if section is not None else None, "operating_points": router.knobs}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, __header__=np.array(json.dumps(header)), **router.state())
    os.replace(tmp, path)
    return path


def load_router(path: Path) -> tuple[Router, dict[str, Any]]:
    """The router saved at `path` and its header."""
    if not path.exists():
        raise InputError(f"{path}: no saved router (run `dvc repro routers` first)")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["__header__"]))
            state = {k: data[k] for k in data.files if k != "__header__"}
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a saved router ({e})") from None
    cls = ROUTERS[header["router"]]
    section = _section(header["router"], header["params"])
    router = cls(header["router"], section, header["solvers"])
    router.load(state)
    return router, header


def _section(name: str, raw: dict | None) -> Any:
    if raw is None:
        return None
    model = type(getattr(RoutersParams(), name))
    return model.model_validate(raw, strict=False)
