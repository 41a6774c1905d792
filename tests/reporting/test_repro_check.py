"""`dlab repro check`: a rerun's headline inside the committed interval, or named outside it."""

from delegation_lab.reporting.repro_check import compare


def test_compare_checks_every_value_with_an_interval():
    committed = {
        "methods": {"s/m": {"best_accuracy": 0.8, "accuracy_ci": [0.78, 0.82], "best_accuracy_cost_per_item_usd": 1e-4,
                            "cost_ci": [0.9e-4, 1.1e-4]}},
        "management": {"test_accuracy_mean": 0.9, "test_accuracy_mean_ci": [0.88, 0.92], "note": "x"},
    }
    rerun = {"methods": {"s/m": {"best_accuracy": 0.83, "best_accuracy_cost_per_item_usd": 1.05e-4}},
             "management": {"test_accuracy_mean": 0.905}}
    checks = {c.key: c for c in compare("f.json", committed, rerun)}
    assert set(checks) == {"methods.s/m.best_accuracy", "methods.s/m.best_accuracy_cost_per_item_usd", "management.test_accuracy_mean"}
    assert not checks["methods.s/m.best_accuracy"].inside  # 0.83 is outside [0.78, 0.82]
    assert checks["methods.s/m.best_accuracy_cost_per_item_usd"].inside
    assert checks["management.test_accuracy_mean"].inside
    missing = compare("f.json", committed, {})
    assert all(c.rerun is None and not c.inside for c in missing)


def test_the_command_exits_non_zero_when_a_headline_left_its_interval(tmp_path):
    import json
    import subprocess

    from typer.testing import CliRunner

    from delegation_lab.cli import app

    (tmp_path / "metrics").mkdir()
    path = tmp_path / "metrics" / "s.json"
    path.write_text(json.dumps({"acc": 0.8, "acc_ci": [0.75, 0.85]}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "m"], check=True)
    path.write_text(json.dumps({"acc": 0.81}))
    ok = CliRunner().invoke(app, ["repro", "check", "--root", str(tmp_path), "--show", "all"])
    assert ok.exit_code == 0 and "1 of 1 headline metrics inside" in ok.output
    path.write_text(json.dumps({"acc": 0.9}))
    bad = CliRunner().invoke(app, ["repro", "check", "--root", str(tmp_path)])
    assert bad.exit_code == 1 and "| s.json | acc | 0.8 | [0.75, 0.85] | 0.9 | NO |" in bad.output


def test_a_rerun_is_bit_identical_or_names_what_moved_and_under_which_numerics(tmp_path):
    import json
    import subprocess

    from typer.testing import CliRunner

    from delegation_lab.cli import app
    from delegation_lab.reporting.repro_check import is_timing, provenance

    assert is_timing("a.fit_seconds") and is_timing("runtime_s") and is_timing("x.coalitions_per_second")
    assert not is_timing("rounds_second_half") and not is_timing("time_to_success_redref")
    numerics = {"cpu": {"vendor": "GenuineIntel", "model": "Xeon", "widest_isa": "avx512"},
                "libraries": {"torch": "2.13.0+cpu"}, "pins": {"MKL_CBWR": "COMPATIBLE"}}
    (tmp_path / "metrics" / "timings").mkdir(parents=True)
    figures = tmp_path / "metrics" / "s.json"
    timings = tmp_path / "metrics" / "timings" / "s.json"
    figures.write_text(json.dumps({"acc": 0.8, "acc_ci": [0.75, 0.85], "fit_seconds": 3.0}))
    timings.write_text(json.dumps({"seconds": 1.0, "numerics": numerics}))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "m"], check=True)

    figures.write_text(json.dumps({"acc": 0.8, "acc_ci": [0.75, 0.85], "fit_seconds": 9.0}))  # a timing alone moved
    assert provenance(tmp_path).identical
    out = CliRunner().invoke(app, ["repro", "check", "--root", str(tmp_path)])
    assert out.exit_code == 0 and "bit-identical" in out.output

    figures.write_text(json.dumps({"acc": 0.81, "acc_ci": [0.76, 0.86], "fit_seconds": 9.0}))
    amd = numerics | {"cpu": {"vendor": "AuthenticAMD", "model": "EPYC", "widest_isa": "avx2"}}
    timings.write_text(json.dumps({"seconds": 2.0, "numerics": amd}))
    got = provenance(tmp_path)
    assert not got.identical and [k for k, _, _ in got.moved["s.json"]] == ["acc", "acc_ci"]
    assert "cpu vendor GenuineIntel -> AuthenticAMD" in got.verdict() and "2 figures moved in 1 files" in got.verdict()
    out = CliRunner().invoke(app, ["repro", "check", "--root", str(tmp_path)])
    assert out.exit_code == 0 and "moved: s.json acc: 0.8 -> 0.81" in out.output
