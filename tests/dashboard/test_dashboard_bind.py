"""The dashboard binds loopback however it is started (issue 42): `streamlit run <abs>/dashboards/app.py`
from another folder does not read the project's .streamlit/config.toml and listened on every interface.
The app now refuses to render on a server whose address is unset, says why and stops the server."""

from __future__ import annotations

from pathlib import Path

import pytest

streamlit_testing = pytest.importorskip("streamlit.testing.v1")

from dashboards import bind  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"


@pytest.mark.parametrize("address", [None, "", "  "])
def test_an_unset_address_is_refused(address):
    assert "listens on every interface" in bind.unbound_problem(address)


@pytest.mark.parametrize("address", ["127.0.0.1", "localhost", "::1", "0.0.0.0", "10.1.2.3"])
def test_loopback_or_an_address_given_on_purpose_is_served(address):
    assert bind.unbound_problem(address) is None


def _run(monkeypatch, address: str | None, tmp_path: Path):
    from streamlit import config

    stopped = []
    monkeypatch.setattr(bind, "served_by_a_server", lambda: True)
    monkeypatch.setattr(bind, "stop_server", lambda delay_s=1.0: stopped.append(delay_s))
    monkeypatch.setenv("DLAB_ROOT", str(tmp_path))
    old = config.get_option("server.address")
    config.set_option("server.address", address)
    try:
        at = streamlit_testing.AppTest.from_file(str(APP), default_timeout=60).run()
    finally:
        config.set_option("server.address", old)
    return at, stopped


def test_the_app_refuses_and_stops_a_server_listening_on_every_interface(monkeypatch, tmp_path, capsys):
    at, stopped = _run(monkeypatch, None, tmp_path)
    assert stopped == [1.0]
    assert [e.value for e in at.error] == [bind.unbound_problem(None)]
    assert "dashboard: refused: server.address is not set" in capsys.readouterr().err
    assert not at.sidebar.radio  # nothing of the project rendered


def test_the_app_runs_on_loopback(monkeypatch, tmp_path):
    at, stopped = _run(monkeypatch, "127.0.0.1", tmp_path)
    assert stopped == [] and bind.unbound_problem("127.0.0.1") is None
    assert all("listens on every interface" not in e.value for e in at.error)


def test_apptest_is_not_a_server():
    """The app's other tests run it under AppTest's mock runtime, which binds nothing: no refusal there."""
    at = streamlit_testing.AppTest.from_string("from dashboards import bind\nimport streamlit as st\n"
                                              "st.write(str(bind.served_by_a_server()))").run()
    assert [m.value for m in at.markdown] == ["False"]
