"""Every benchmark module still imports and names a `main` (an API drift in the code they time shows
here, not the first time someone runs `python -m benchmarks`). They are not run: none is a test."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import benchmarks

NAMES = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))


def test_there_are_benchmarks():
    assert "bench_frontier_scale" in NAMES and "bench_serve" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_benchmark_imports_and_has_main(name):
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.__doc__ and module.__doc__.strip(), f"{name} says what it measures in its docstring"
    required = [p for p in inspect.signature(module.main).parameters.values() if p.default is inspect.Parameter.empty]
    assert not required, f"python -m benchmarks calls {name}.main() with no arguments"


def test_frontier_scale_calls_the_cascade_api_it_times():
    """bench_frontier_scale's front_recall once called run_cascade without its verifier."""
    from delegation_lab.frontier.cascades import run_cascade

    source = inspect.getsource(importlib.import_module("benchmarks.bench_frontier_scale"))
    calls = [line for line in source.splitlines() if "run_cascade(" in line and "import" not in line]
    params = len(inspect.signature(run_cascade).parameters)
    assert calls and all(line.count(",") >= params - 1 for line in calls), calls
