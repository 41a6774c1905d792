"""A saved router file that is not one is refused with one line naming the file and the key (issue
42): a `__header__` that is a JSON list took `TypeError: list indices must be integers` out of
`dlab route`; missing fields, arrays of the wrong kind or shape were KeyErrors and tracebacks. Loaded
with allow_pickle=False, so an object array is refused, never unpickled."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from delegation_lab.errors import InputError
from delegation_lab.routers import ROUTERS, Inputs
from delegation_lab.routers.artifact import load_router, save_router
from delegation_lab.routers.params import RoutersParams

from tests.conftest import BIN, env_with_venv

SOLVERS = ["A", "B"]


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A real best_single router over two solvers, saved as the `routers` stage saves it."""
    router = ROUTERS["best_single"]("best_single", None, SOLVERS)
    x = Inputs(np.zeros((4, 3), dtype=np.float32), np.zeros((4, 4)))
    correct, cost = np.array([[1, 0], [1, 1], [0, 0], [1, 0]], dtype=bool), np.full((4, 2), 1e-3)
    router.fit(x, correct, cost, seed=0)
    router.calibrate(x, correct, cost)
    return save_router(router, tmp_path / "best_single.npz", "hashing-32", RoutersParams())


def crafted(saved: Path, **changes) -> Path:
    """`saved` with arrays replaced (None: removed); written with np.savez as an attacker would."""
    with np.load(saved, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    path = saved.with_name("crafted.npz")
    np.savez(path, **arrays)
    return path


def header(saved: Path, **fields) -> np.ndarray:
    with np.load(saved, allow_pickle=False) as data:
        head = json.loads(str(data["__header__"]))
    return np.array(json.dumps({**head, **fields}))


def test_the_saved_router_loads(saved: Path):
    router, head = load_router(saved)
    assert head["router"] == "best_single" and router.solvers == SOLVERS and router.knobs


@pytest.mark.parametrize("change, words", [
    (lambda s: {"__header__": np.array(json.dumps([1, 2, 3]))}, ["__header__", "JSON object, not a list"]),
    (lambda s: {"__header__": np.array(["a", "b"])}, ["__header__", "shape (2,)"]),
    (lambda s: {"__header__": np.array([{"router": "knn"}], dtype=object)}, ["not a saved router", "allow_pickle"]),
    (lambda s: {"__header__": np.array(3)}, ["__header__", "one JSON text"]),
    (lambda s: {"__header__": None}, ["__header__ is missing"]),
    (lambda s: {"__header__": np.array("{not json")}, ["__header__ is not JSON"]),
    (lambda s: {"__header__": header(s, solvers="AB")}, ["__header__.solvers", "list"]),
    (lambda s: {"__header__": header(s, solvers=[])}, ["__header__.solvers", "non-empty"]),
    (lambda s: {"__header__": header(s, router="nope")}, ["__header__.router", "'nope'"]),
    (lambda s: {"__header__": header(s, router=["knn"])}, ["__header__.router", "must be a str"]),
    (lambda s: {"__header__": header(s, params={"k": 3})}, ["__header__.params", "takes no params"]),
    (lambda s: {"__header__": header(s, router="knn", params={"k": "many"})}, ["__header__.params", "'knn'"]),
    (lambda s: {"mean_cost": None}, ["'mean_cost' is missing"]),
    (lambda s: {"mean_cost": np.zeros(5)}, ["'mean_cost'", "shape (5,)"]),
    (lambda s: {"mean_cost": np.array(["x", "y"])}, ["'mean_cost'", "not numbers"]),
    (lambda s: {"knob_values": np.zeros(3)}, ["'knob_labels' and 'knob_values' differ"]),
    (lambda s: {"best": None}, ["'best' is missing", "best_single"]),
    (lambda s: {"best": np.zeros(0, dtype=int)}, ["do not fit router 'best_single'"]),
    (lambda s: {"accuracy": np.zeros((2, 2), dtype="V8")}, ["'accuracy'", "not numbers"]),
])
def test_a_crafted_router_file_is_one_line_naming_file_and_key(saved: Path, change, words):
    path = crafted(saved, **change(saved))
    with pytest.raises(InputError) as err:
        load_router(path)
    message = str(err.value)
    assert err.value.exit_code == 2 and message.startswith(f"{path}: ") and "\n" not in message, message
    for word in words:
        assert word in message, message


def test_a_file_that_is_no_npz_is_refused(tmp_path: Path):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(InputError, match=r"junk.npz: not a saved router"):
        load_router(path)


@pytest.mark.processes
def test_dlab_route_on_a_list_header_exits_2_with_one_line(saved: Path):
    crafted_path = crafted(saved, __header__=np.array(json.dumps([1, 2, 3])))
    crafted_path.replace(saved)  # where `dlab route --router best_single` looks
    done = subprocess.run([str(BIN / "dlab"), "route", "what is 2+2?", "--router", "best_single", "--models",
                           str(saved.parent)], capture_output=True, text=True, env=env_with_venv(), timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [f"route: {saved}: key __header__ must be a JSON object, not a list"]
