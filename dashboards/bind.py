"""The dashboard listens on this machine only, however it is started. The project's
`.streamlit/config.toml` (`server.address = "127.0.0.1"`) is read only when `streamlit run` starts in
the repository root: `streamlit run /abs/path/dashboards/app.py` from another folder left the address
unset, which makes Streamlit listen on every interface. Streamlit binds before it runs the app, so
the app checks the address on its first run: unset, it shows why, refuses to render anything and stops
the server. An address given on purpose (`--server.address 0.0.0.0`, or a host's own address) is
honoured, as the config file's comment says."""

from __future__ import annotations

import os
import signal
import sys
import threading

LOOPBACK = ("127.", "localhost", "::1")


def unbound_problem(address: str | None) -> str | None:
    """Why the dashboard must not serve on `address` (Streamlit's `server.address`), else None."""
    if address is None or not str(address).strip():
        return ("server.address is not set, so Streamlit listens on every interface of this machine (its "
                ".streamlit/config.toml is read only when started from the repository root). Start it with "
                "`dlab dashboard`, or `streamlit run dashboards/app.py --server.address 127.0.0.1`; to expose it on "
                "purpose pass `--server.address 0.0.0.0`. Stopping the server.")
    return None


def served_by_a_server() -> bool:
    """Whether a real Streamlit server runs the app (AppTest runs it against a mock runtime that binds nothing)."""
    from streamlit.runtime import Runtime, exists

    return exists() and type(Runtime.instance()) is Runtime


def stop_server(delay_s: float = 1.0) -> None:
    """SIGTERM to this process after `delay_s` (the refusal reaches the page first): Streamlit stops cleanly."""
    threading.Timer(delay_s, os.kill, (os.getpid(), signal.SIGTERM)).start()


def refuse_unless_loopback() -> None:
    """On a server whose address is unset: the refusal on the page and on stderr, the server stopped, the
    script stopped before it reads any result."""
    import streamlit as st

    problem = unbound_problem(st.get_option("server.address"))
    if problem is None or not served_by_a_server():
        return
    print(f"dashboard: refused: {problem}", file=sys.stderr, flush=True)
    st.error(problem)
    stop_server()
    st.stop()
