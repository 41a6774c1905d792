"""Saved routers: `models/routers/<name>.npz`, every fitted array plus a JSON header (router name,
solvers, embedder, operating points), loaded without pickle by `dlab route`."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from delegation_lab.errors import InputError, short_repr
from delegation_lab.json_input import refused
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


HEADER_FIELDS: dict[str, tuple[type, ...]] = {
    "router": (str,), "solvers": (list,), "embedder": (str,), "params": (dict, type(None)), "operating_points": (dict,),
}
NUMBER_KINDS = "biuf"  # bool, int, unsigned, float: what every fitted array holds (labels aside, kind "U")


def load_router(path: Path) -> tuple[Router, dict[str, Any]]:
    """The router saved at `path` and its header. A file that is not one (a header that is not a JSON
    object with the saved fields, an array of objects, bytes or records, a base array of the wrong
    shape, arrays the router cannot take) is refused with one line naming the file and the key."""
    if not path.exists():
        raise InputError(f"{path}: no saved router (run `dvc repro routers` first)")
    try:
        with np.load(path, allow_pickle=False) as data:
            raw = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # not an npz, or one holding pickles
        raise refused(InputError, f"{path}: not a saved router ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})") from None
    header = _header(path, raw.pop("__header__", None))
    state = _checked_state(path, raw, len(header["solvers"]))
    name = header["router"]
    try:
        section = _section(name, header["params"])
    except ValidationError as e:
        raise refused(InputError, f"{path}: key __header__.params does not fit router {name!r} "
                                  f"({e.errors()[0]['msg']} at {'.'.join(map(str, e.errors()[0]['loc']))})") from None
    except AttributeError:  # a router without a params section (best_single) given some
        raise refused(InputError, f"{path}: key __header__.params: router {name!r} takes no params (null)") from None
    router = ROUTERS[name](name, section, header["solvers"])
    try:
        router.load(state)
    except KeyError as e:
        raise refused(InputError, f"{path}: key {e.args[0]!r} is missing (router {name!r} saves it)") from None
    except (ValueError, TypeError, IndexError, RuntimeError) as e:  # shapes the router's arrays cannot take
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise refused(InputError, f"{path}: the saved arrays do not fit router {name!r} ({first[:200]})") from None
    return router, header


def _header(path: Path, raw: np.ndarray | None) -> dict[str, Any]:
    """The JSON object of `__header__` with every field of HEADER_FIELDS, of its type."""
    if raw is None:
        raise refused(InputError, f"{path}: key __header__ is missing: not a saved router")
    if raw.dtype.kind != "U" or raw.shape != ():
        raise refused(InputError, f"{path}: key __header__ must be one JSON text, not a {raw.dtype} array of shape {raw.shape}")
    try:
        header = json.loads(str(raw))
    except (json.JSONDecodeError, RecursionError) as e:
        raise refused(InputError, f"{path}: key __header__ is not JSON ({str(e)[:120]})") from None
    if not isinstance(header, dict):
        raise refused(InputError, f"{path}: key __header__ must be a JSON object, not a {type(header).__name__}")
    for field, types in HEADER_FIELDS.items():
        if not isinstance(header.get(field), types):
            wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise refused(InputError, f"{path}: key __header__.{field} must be a {wanted}, got {short_repr(header.get(field))}")
    if header["router"] not in ROUTERS:
        raise refused(InputError, f"{path}: key __header__.router {short_repr(header['router'])} is no router "
                                  f"(known: {', '.join(ROUTERS.names())})")
    if not header["solvers"] or not all(isinstance(s, str) for s in header["solvers"]):
        raise refused(InputError, f"{path}: key __header__.solvers must be a non-empty list of names, got "
                                  f"{short_repr(header['solvers'])}")
    return header


def _checked_state(path: Path, state: dict[str, np.ndarray], n_solvers: int) -> dict[str, np.ndarray]:
    """`state` if every array holds numbers (or, for knob_labels, text) and the arrays every router
    saves have their shapes: mean_cost [solvers], reference_cost [1], knob_labels and knob_values [k]."""
    for key, array in state.items():
        if array.dtype.kind not in NUMBER_KINDS + ("U" if key == "knob_labels" else ""):
            raise refused(InputError, f"{path}: key {key!r} holds {array.dtype} values, not numbers")
    shapes = {"mean_cost": (n_solvers,), "reference_cost": (1,), "knob_labels": None, "knob_values": None}
    for key, shape in shapes.items():
        if key not in state:
            raise refused(InputError, f"{path}: key {key!r} is missing: not a saved router")
        if state[key].ndim != 1 or (shape is not None and state[key].shape != shape):
            wanted = f"shape {shape}" if shape else "one dimension"
            raise refused(InputError, f"{path}: key {key!r} has shape {state[key].shape}, not {wanted}")
    if state["knob_labels"].shape != state["knob_values"].shape:
        raise refused(InputError, f"{path}: keys 'knob_labels' and 'knob_values' differ in length "
                                  f"({len(state['knob_labels'])} vs {len(state['knob_values'])})")
    return state


def _section(name: str, raw: dict | None) -> Any:
    if raw is None:
        return None
    model = type(getattr(RoutersParams(), name))
    return model.model_validate(raw, strict=False)
