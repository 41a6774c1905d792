"""The `native` marker (tests/conftest.py): a test that crashes in native code fails alone, with
the signal named, and the run goes on; normal outcomes of the child come back unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import cpu_simd_flags

SUITE = '''
import ctypes, os, signal
import pytest

@pytest.mark.native
def test_segfaults():
    ctypes.string_at(0)  # reads address 0: SIGSEGV

@pytest.mark.native
def test_aborts():
    os.kill(os.getpid(), signal.SIGABRT)

@pytest.mark.native
def test_passes_in_a_child():
    assert os.environ.get("DLAB_TEST_CHILD_REPORTS")

@pytest.mark.native
def test_fails_with_its_own_assertion():
    assert 1 + 1 == 3, "arithmetic"

@pytest.mark.native
@pytest.mark.skipif(True, reason="skipped without a child")
def test_skipped():
    pass

def test_runs_after_the_crashes():
    assert True
'''


def test_a_native_crash_fails_one_test_and_names_the_signal(tmp_path: Path):
    shutil.copy(Path(__file__).parents[1] / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    native: child process\n    slow: slow\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # failures, not a crash of the whole run (139 / -11)
    assert "3 failed, 2 passed, 1 skipped" in out, out
    assert "test_segfaults: the test's child process was killed by SIGSEGV (signal 11)" in out
    assert "test_aborts: the test's child process was killed by SIGABRT" in out
    assert "Segmentation fault" in out  # the child's faulthandler traceback is kept
    assert "AssertionError: arithmetic" in out  # an ordinary failure keeps its own report
    assert f"CPU AVX-512/AMX flags: {cpu_simd_flags()}" in out


SHARED = '''
import ctypes, os
from pathlib import Path
import pytest

def note():
    with open(os.environ["PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")

@pytest.mark.native
def test_one():
    note()

@pytest.mark.native
def test_two():
    note()

@pytest.mark.native
def test_crash():
    ctypes.string_at(0)

@pytest.mark.native
def test_three():
    note()
'''


def test_a_modules_native_tests_share_a_child_until_one_crashes(tmp_path: Path):
    """One child runs the module's native tests in a row (imports and module fixtures paid once);
    the test after a crash gets a fresh child."""
    shutil.copy(Path(__file__).parents[1] / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    native: child process\n    slow: slow\n")
    (tmp_path / "test_shared.py").write_text(SHARED)
    pids = tmp_path / "pids.txt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIDS": str(pids)})
    out = proc.stdout + proc.stderr
    assert "1 failed, 3 passed" in out, out
    assert "test_crash: the test's child process was killed by SIGSEGV" in out
    one, two, three = pids.read_text().split()
    assert one == two != three and os.getpid() not in {int(one), int(three)}
