"""RouterBench pickles: unpickling runs arbitrary code, so every path that loads one (`dlab import`,
the replay backend, the replay dataset) refuses it unless trusted, and `dlab import` warns."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from delegation_lab.cli import app
from delegation_lab.data.params import ReplayDatasetParams
from delegation_lab.data.replay import load_replay_items
from delegation_lab.solvers.params import Price, ReplayParams
from delegation_lab.solvers.replay.backend import ReplayBackend
from delegation_lab.solvers.replay.records import ReplayError

from tests.replay.test_replay import write_routerbench_pickle

runner = CliRunner()


class Payload:
    """Unpickling calls Path(marker).touch(): the code a hostile pickle would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def hostile_pickle(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"
    path = tmp_path / "routerbench.pkl"
    path.write_bytes(pickle.dumps(Payload(marker)))
    return path, marker


def test_import_refuses_an_untrusted_pickle_and_warns_on_stderr(tmp_path: Path):
    path, marker = hostile_pickle(tmp_path)
    result = runner.invoke(app, ["import", str(path), "--format", "routerbench_pickle", "--items-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "WARNING" in result.stderr and "unpickling runs arbitrary code" in result.stderr
    assert "not loaded" in result.stderr and "--trust-pickle" in result.stderr and "trust_pickle: true" in result.stderr
    assert not marker.exists()  # nothing was unpickled
    assert "WARNING" not in result.stdout


def test_trusting_the_pickle_loads_it_after_the_warning(tmp_path: Path):
    path, marker = hostile_pickle(tmp_path)
    result = runner.invoke(app, ["import", str(path), "--format", "routerbench_pickle", "--items-dir", str(tmp_path),
                                 "--trust-pickle"])
    assert marker.exists()  # the warning was not idle: trusting runs the file's code
    assert result.exit_code == 1 and "expected a pickled pandas DataFrame" in result.stderr
    assert "unpickling runs arbitrary code" in result.stderr

    good = write_routerbench_pickle(tmp_path / "rb.pkl")
    result = runner.invoke(app, ["import", str(good), "--format", "routerbench_pickle", "--items-dir", str(tmp_path),
                                 "--trust-pickle"])
    assert result.exit_code == 0, result.output
    assert "a/small" in result.stdout and "trust_pickle: true" in result.stdout  # the snippet replays it
    assert "unpickling runs arbitrary code" in result.stderr


def test_params_paths_refuse_an_untrusted_pickle(tmp_path: Path):
    path, marker = hostile_pickle(tmp_path)
    backend = ReplayBackend(ReplayParams(path=str(path), format="routerbench_pickle", source_model="m"),
                            Price(input_usd_per_mtok=0.0, output_usd_per_mtok=0.0))
    with pytest.raises(ReplayError, match=r"not loaded: unpickling runs arbitrary code.*trust_pickle: true"):
        backend.cache()
    with pytest.raises(ReplayError, match=r"not loaded: unpickling runs arbitrary code"):
        load_replay_items(ReplayDatasetParams(path=str(path), format="routerbench_pickle"))
    assert not marker.exists()
    good = write_routerbench_pickle(tmp_path / "rb.pkl")
    items = load_replay_items(ReplayDatasetParams(path=str(good), format="routerbench_pickle", trust_pickle=True))
    assert len(items) == 3
