"""The one registry pattern: name -> "module:attribute", imported on first lookup; each family's
table agrees with the params that name its members."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from typing import get_args

import pytest

from delegation_lab.params.root import ConfigError, load_params, parse_params, read_yaml
from delegation_lab.data import DATASETS
from delegation_lab.data.params import DataParams
from delegation_lab.errors import InputError
from delegation_lab.evaluation import VERIFIERS
from delegation_lab.evaluation.params import VerifierParams
from delegation_lab.registry import Registry, UnknownNameError
from delegation_lab.routers import ROUTERS
from delegation_lab.routers.params import RouterName, RoutersParams
from delegation_lab.solvers import BACKENDS
from delegation_lab.solvers.params import ReplayFormat, SolverParams
from delegation_lab.solvers.replay import FORMATS

from tests.conftest import REPO

def test_an_unknown_name_is_a_user_error_naming_the_key_and_every_known_name():
    with pytest.raises(UnknownNameError) as caught:
        ROUTERS.get("knnn")
    message = str(caught.value)
    assert isinstance(caught.value, InputError)
    assert message.startswith("routers.routers: unknown router 'knnn'; known: ")
    assert all(name in message for name in ROUTERS.names())


def test_names_keep_their_registration_order_and_a_name_or_target_is_checked():
    registry: Registry[object] = Registry("thing", "things.kind")
    registry.register("b", "json:dumps")
    registry.register("a", "json:loads")
    assert registry.names() == ("b", "a") and "a" in registry and "c" not in registry
    assert registry.get("a") is json.loads and registry["b"] is json.dumps
    assert get_args(registry.choices()) == ("b", "a")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("a", "json:dump")
    with pytest.raises(ValueError, match="not 'module:attribute'"):
        registry.register("c", "json.dumps")


def test_the_params_name_exactly_the_registered_implementations():
    assert get_args(DataParams.model_fields["dataset"].annotation) == DATASETS.names()
    assert get_args(SolverParams.model_fields["backend"].annotation) == BACKENDS.names()
    assert get_args(ReplayFormat) == FORMATS.names()
    assert get_args(RouterName) == ROUTERS.names()
    assert get_args(RoutersParams.model_fields["routers"].annotation) == (RouterName,)
    assert tuple(RoutersParams().routers) == ROUTERS.names()  # the default: every registered router
    # the verifiers' params module lists its kinds itself: the registry must follow it
    assert get_args(VerifierParams.model_fields["kind"].annotation) == VERIFIERS.names()


def test_a_bad_name_in_params_fails_listing_the_valid_choices():
    raw = read_yaml(REPO / "params.yaml")
    with pytest.raises(ConfigError) as caught:
        parse_params({**raw, "data": {**raw.get("data", {}), "dataset": "gsm9k"}})
    assert "data.dataset" in str(caught.value)
    assert all(repr(name) in str(caught.value) for name in DATASETS.names())


def test_every_registered_target_resolves_to_its_kind_of_implementation():
    from delegation_lab.solvers.replay.records import CacheFormat

    for name in DATASETS.names():
        assert callable(DATASETS.get(name)), name
    for name in BACKENDS.names():
        assert callable(getattr(BACKENDS.get(name), "from_params", None)), name
    for name in FORMATS.names():
        assert isinstance(FORMATS.get(name), CacheFormat), name
    from delegation_lab.params.model import ParamsModel
    from delegation_lab.routers.base import Router

    for name in ROUTERS.names():
        router = ROUTERS.get(name)
        assert issubclass(router, Router) and not inspect.isabstract(router), name
        assert "name" not in vars(router), f"{name}: a router's name is the one it is registered under"
    # a router's knobs are the `routers` section named after it: every such section names a registered router
    sections = [n for n, f in RoutersParams.model_fields.items() if isinstance(f.default, ParamsModel)]
    assert sections and set(sections) <= set(ROUTERS.names()), sorted(set(sections) - set(ROUTERS.names()))
    for name in VERIFIERS.names():
        assert callable(VERIFIERS.get(name)), name


def test_the_default_params_build_their_implementations_through_the_registries():
    from delegation_lab.evaluation import build_verifier
    from delegation_lab.solvers import build_backend
    from delegation_lab.solvers.simulated import SimulatedBackend

    params = load_params(REPO / "params.yaml")
    assert all(isinstance(build_backend(n, s), SimulatedBackend) for n, s in params.solvers.items())
    assert build_verifier(VerifierParams(kind="gold")).name == "gold"
    judge = build_verifier(VerifierParams(false_positive_rate=0.1, false_negative_rate=0.2))
    assert (judge.kind, judge.false_positive_rate, judge.false_negative_rate) == ("judge", 0.1, 0.2)


HEAVY = ("torch", "sentence_transformers", "llama_cpp", "vllm", "transformers", "polars", "scipy")


def test_importing_the_params_and_listing_every_family_imports_nothing_heavy():
    """Listing names must not import an implementation: in a fresh interpreter, the params load,
    every family lists its names, and none of the heavy libraries is in `sys.modules` (the check
    can fail: looking a learned router up does import torch)."""
    code = f"""
import json, sys
from delegation_lab.params.root import load_params
from delegation_lab.data import DATASETS
from delegation_lab.evaluation import VERIFIERS
from delegation_lab.routers import ROUTERS
from delegation_lab.solvers import BACKENDS
from delegation_lab.solvers.replay import FORMATS
load_params({str(REPO / "params.yaml")!r})
names = [r.names() for r in (DATASETS, BACKENDS, FORMATS, ROUTERS, VERIFIERS)]
before = sorted(m for m in {HEAVY!r} if m in sys.modules)
ROUTERS.get("knn")
print(json.dumps({{"before": before, "after": "torch" in sys.modules, "routers": len(names[3])}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"before": [], "after": True, "routers": len(ROUTERS.names())}
