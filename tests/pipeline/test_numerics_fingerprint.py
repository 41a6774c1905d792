"""`dlab numerics fingerprint`: every kind of operation the studies run computes the recorded bits
under the project's pins — on this machine, under another CPU's settings, and (for the two cases
the shared tool ran there) as an AMD EPYC computes them."""

from __future__ import annotations

import subprocess

import pytest

from delegation_lab.pipeline.numerics import applies
from delegation_lab.pipeline.fingerprint import AMD_EPYC, fingerprints, recorded

from tests.conftest import BIN, env_with_venv
from tests.pipeline.test_numerics import OTHER_CPU

needs_x86 = pytest.mark.skipif(not applies(), reason="the pins name x86-64 code paths")


@pytest.fixture(scope="module")
def here() -> dict[str, str]:
    return fingerprints()


@needs_x86
def test_every_case_computes_the_recorded_bits(here):
    record = recorded()
    assert set(here) == set(record["fingerprints"]), "a case was added or removed: rerun `dlab numerics fingerprint --record`"
    differs = {k: (v, record["fingerprints"][k]) for k, v in here.items() if record["fingerprints"][k] != v}
    assert not differs, f"cases whose bits moved (got, recorded), libraries {record['numerics']['libraries']}: {differs}"


@needs_x86
def test_the_pins_give_the_bits_an_amd_epyc_computes(here):
    """MKL_CBWR=COMPATIBLE is the branch Intel and AMD both run; AVX2 (the old pin) is not."""
    assert {k: here[k] for k in AMD_EPYC} == AMD_EPYC


@needs_x86
def test_another_cpus_settings_do_not_move_a_bit(here):
    assert fingerprints(OTHER_CPU | {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}) == here


@needs_x86
def test_the_command_reports_each_case_and_exits_0():
    out = subprocess.run([str(BIN / "dlab"), "numerics", "fingerprint"], env=env_with_venv(), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "torch.matmul_linear" in out.stdout and "same as AMD EPYC" in out.stdout
    assert "DIFFERS" not in out.stdout
