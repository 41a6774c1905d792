"""`run_stage`: an error the user can fix is one line and a non-zero exit; a bug keeps its traceback."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def stage_raising(tmp_path: Path, error: str) -> subprocess.CompletedProcess:
    """Run a stage whose body raises `error` (a Python expression) in a project at `tmp_path`."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    script = textwrap.dedent(f"""
        from delegation_lab.errors import InputError
        from delegation_lab.pipeline.stage import run_stage

        def body(ctx):
            raise {error}

        run_stage("demo", body, argv=["--no-progress"])
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_bugs_key_error_exits_non_zero_with_its_traceback(tmp_path):
    proc = stage_raising(tmp_path, "KeyError('solver')")
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "KeyError: 'solver'" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "metrics" / "timings" / "demo.json").exists()


@pytest.mark.parametrize("error, message", [
    ("InputError('data/labels.parquet: no rows for solver C')", "demo: error: data/labels.parquet: no rows for solver C"),
    ("FileNotFoundError(2, 'No such file or directory', 'data/items/test.parquet')",
     "demo: error: [Errno 2] No such file or directory: 'data/items/test.parquet'"),
])
def test_an_input_error_exits_1_with_one_line(tmp_path, error, message):
    proc = stage_raising(tmp_path, error)
    assert proc.returncode == 1
    assert proc.stderr.strip() == message
    assert "Traceback" not in proc.stderr
