"""What the `dlab serve` tests and benchmark share: a fake OpenAI-compatible backend (stdlib HTTP
server: answers derived from the request, faults by keyword, a gate that holds requests, SSE
streaming), a project folder whose solvers point at it (and at a llama.cpp server), a saved kNN
router that tells the two apart, and `dlab serve` started as a process on an ephemeral port."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import yaml

from tests.loopback_http import LoopbackServer, QuietHandler

REPO = Path(__file__).resolve().parents[1]
BACKEND_KEY = "sk-backend-0123456789abcdef-never-journal"
CLIENT_KEY = "sk-client-fedcba9876543210-never-journal"
PRICE = {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0}


STREAM_JUNK = {
    "JUNKLIST": "[1, 2, 3]",
    "JUNKCONTENT": json.dumps({"choices": [{"index": 0, "delta": {"content": 5}}]}),
    "JUNKUSAGE": json.dumps({"choices": [], "usage": "lots"}),
    "NANUSAGE": '{"choices": [], "usage": {"prompt_tokens": NaN, "completion_tokens": NaN}}',
}
"""Stream events that are not chat.completion.chunk objects, sent second when the question holds the key."""


def fake_answer(content: str) -> str:
    """The fake backend's reply: a number derived from the question, so mix-ups show."""
    return f"The answer is computed.\n#### {len(content)}"


class FakeBackend:
    """POST /v1/chat/completions. A question containing FAIL gets HTTP 500, ECHOKEY gets the caller's
    Authorization header echoed back in the text, ECHOQ the question itself, SURROGATE a lone surrogate
    in the text, HUGEUSAGE / NEGUSAGE completion_tokens 1e30 / -5, a STREAM_JUNK key that event in its
    stream, SLOWSTREAM a 0.2 s pause after each streamed piece; `hold_until` holds every request until that many
    are in flight (or `release` is set)."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0
        self.hold_until = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        backend = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                backend.handle(self)

        self.server = LoopbackServer(Handler)  # a backlog for 64 connections arriving at once
        self.url = self.server.url

    def let_go(self) -> None:
        """Answer every held request now (and every later one at once)."""
        with self._arrived:
            self.release.set()
            self._arrived.notify_all()

    def close(self) -> None:
        self.let_go()
        self.server.close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        body = json.loads(h.rfile.read(int(h.headers.get("content-length", 0))))
        auth = h.headers.get("authorization", "")
        if auth != f"Bearer {BACKEND_KEY}":
            return self._send(h, 401, {"error": {"message": "bad key"}})
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.hold_until and self.in_flight >= self.hold_until:
                self.release.set()  # latched: the requests that leave must not hold back the rest
            self._arrived.notify_all()
        try:
            if self.hold_until:
                with self._arrived:
                    self._arrived.wait_for(self.release.is_set, timeout=60)
            if self.delay_s:
                time.sleep(self.delay_s)
            content = body["messages"][-1]["content"]
            if "FAIL" in content:
                return self._send(h, 500, {"error": {"message": "backend exploded"}})
            text = fake_answer(content) + (f"\nyour key: {auth}" if "ECHOKEY" in content else "")
            text += f"\nyou said: {content}" if "ECHOQ" in content else ""
            text += "\ud800 lone" if "SURROGATE" in content else ""  # json.dumps sends it as the escape \\ud800
            usage = {"prompt_tokens": 10 + len(content) // 4, "completion_tokens": 7, "total_tokens": 17 + len(content) // 4}
            usage["completion_tokens"] = 1e30 if "HUGEUSAGE" in content else -5 if "NEGUSAGE" in content else 7
            if body.get("stream"):
                junk = next((event for key, event in STREAM_JUNK.items() if key in content), None)
                return self._stream(h, body["model"], text, usage, junk, 0.2 if "SLOWSTREAM" in content else 0.0)
            self._send(h, 200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                             "finish_reason": "stop"}], "usage": usage})
        finally:
            with self._lock:
                self.in_flight -= 1

    def wait_in_flight(self, n: int, timeout: float = 60) -> bool:
        with self._arrived:
            return self._arrived.wait_for(lambda: self.in_flight >= n, timeout=timeout)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _stream(h: BaseHTTPRequestHandler, model: str, text: str, usage: dict, junk: str | None = None,
                pause_s: float = 0.0) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.end_headers()
        pieces = [text[i:i + 5] for i in range(0, len(text), 5)]
        for i, piece in enumerate(pieces):
            chunk = {"id": "x", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            h.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if junk is not None and i == 1:
                h.wfile.write(f"data: {junk}\n\n".encode())
            h.wfile.flush()
            time.sleep(pause_s)
        h.wfile.write(f"data: {json.dumps({'id': 'x', 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())


def write_project(root: Path, fake_url: str, small_url: str | None = None) -> Path:
    """A project: the repository's params with solvers `fake` (and `small`, a llama.cpp server),
    the agreement verifier over `fake`, and a saved kNN router over the solvers."""
    from delegation_lab.params.root import parse_params, read_yaml

    params = read_yaml(REPO / "params.yaml")
    endpoint = {"api_key_env": "FAKE_BACKEND_KEY", "max_retries": 0, "timeout_s": 60, "concurrency": 64}
    params["solvers"]["fake"] = {"backend": "openai_compat", "model": "fake-model", "price": PRICE,
                                 "openai_compat": {"base_url": fake_url, **endpoint}}
    names = ["fake"]
    if small_url:
        params["solvers"]["small"] = {
            "backend": "openai_compat", "model": "smollm2-135m", "price": {"input_usd_per_mtok": 0.01, "output_usd_per_mtok": 0.02},
            "decoding": {"max_tokens": 24}, "openai_compat": {"base_url": small_url, "api_key_env": None, "timeout_s": 120,
                                                              "max_retries": 1}}
        names = ["small", "fake"]
    params["evaluation"]["verifier"] = {"kind": "agreement", "models": ["fake"]}
    params.setdefault("coordinator", {})["agents"] = ["A", "B", "C"]  # the studies keep the three simulated solvers
    parse_params(params, "test project")
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if len(names) == 2:
        save_knn_router(root, names)
    return root


def save_knn_router(root: Path, solvers: list[str]) -> Path:
    """A kNN router fitted so that questions about `alpha` go to solvers[0], about `beta` to solvers[1]."""
    from delegation_lab.embeddings import HashingEmbedder, text_features
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.routers import build_router
    from delegation_lab.routers.artifact import save_router
    from delegation_lab.routers.base import Inputs
    from delegation_lab.routers.params import RoutersParams

    questions = [f"alpha alpha question number {i}" for i in range(20)] + [f"beta beta question number {i}" for i in range(20)]
    embedder = HashingEmbedder(384)
    x = Inputs(embedder.encode(questions).astype(np.float32), text_features(questions, [None] * len(questions)))
    correct = np.array([[1.0, 0.0]] * 20 + [[0.0, 1.0]] * 20)
    cost = np.full((40, 2), 1e-5)
    params = RoutersParams.model_validate({"knn": {"k": 5, "cells": 0, "search_dim": 8, "sweep": [0.5]}})
    router = build_router("knn", params, solvers)
    router.fit(x, correct, cost, seed=0)
    router.calibrate(x, correct, cost)
    return save_router(router, Layout(root).router("knn"), embedder.name, params)


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url.removesuffix("/v1") + "/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


class ServeProcess:
    """`dlab serve` in a child process on 127.0.0.1 and a free port; output in `log`."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
        self.log = root / f"serve-{time.time_ns()}.log"
        full_env = {**os.environ, "FAKE_BACKEND_KEY": BACKEND_KEY, "DLAB_CLIENT_KEY": CLIENT_KEY,
                    "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
        with self.log.open("w") as sink:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "delegation_lab.cli", "serve", "--root", str(root), "--port", "0", *args],
                stdout=sink, stderr=subprocess.STDOUT, env=full_env)
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", self.log.read_text())
            if found and _healthy(found.group(1)):
                self.url = found.group(1)
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"dlab serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"dlab serve did not start in {timeout} s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def serve_with_gold(root: Path, fake: FakeBackend, questions: list[str], drain: bool = False) -> list[str]:
    """`dlab serve --model solver:fake` on `root`: each question asked once through the openai client
    with a `metadata.gold`, a third of them wrong (-1); then the server and the fake backend stop, so
    any later fake answer must come from the journal. `drain`: stop by SIGTERM and require exit 0
    (drained, journal flushed). Returns the golds sent."""
    import openai

    server = ServeProcess(root, "--model", "solver:fake")
    golds = [fake_answer(q).split("#### ")[1] if i % 3 else "-1" for i, q in enumerate(questions)]
    try:
        client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
        for q, g in zip(questions, golds, strict=True):
            client.chat.completions.create(model="solver:fake", messages=[{"role": "user", "content": q}],
                                           metadata={"gold": g})
        if drain:
            server.terminate()
            assert server.wait() == 0
    finally:
        server.stop()
        fake.close()
    return golds


def served_project(folder: Path, questions: list[str], drain: bool = False) -> Path:
    """A project at `folder` whose solver `fake` answered `questions` through `dlab serve`
    (serve_with_gold: a third of the golds wrong, then server and backend stopped)."""
    fake = FakeBackend()
    root = write_project(folder, fake.url)
    serve_with_gold(root, fake, questions, drain=drain)
    return root


def run_served_stages(root: Path, sizes: dict[str, int], stages: tuple[str, ...] = ("label",)) -> dict:
    """Switch `root` to `data.dataset: served` with the split `sizes`, run prepare, solve for every
    solver, then `stages`; returns the params written."""
    from tests.conftest import run  # here, not at the top: benchmarks import this module without pytest's conftest

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["project"]["repo"] = os.path.relpath(REPO, root)
    params["data"].update({"dataset": "served", **sizes})
    params["portfolio"].update(router_folds=2, cv_folds=2)  # a fold needs an item: params check refuses more folds than train items
    params["tracking"]["enabled"] = False  # the checks read tables, not MLflow: ~2.5 CPU s less per stage
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([sys.executable, str(REPO / "stages/prepare.py")], root)
    for solver in params["solvers"]:
        run([sys.executable, str(REPO / "stages/solve.py"), "--solver", solver], root)
    for stage in stages:
        run([sys.executable, str(REPO / f"stages/{stage}.py")], root)
    return params
