"""`vllm`: local batched generation with a vLLM engine on CUDA GPUs.

The whole batch goes to `LLM.chat` at once (vLLM schedules it with continuous batching), with the
model's own chat template. If the batch fails as a whole — typically one prompt longer than the
context — the requests are retried one by one so only the offending ones become `error` rows.
Token counts come from the engine's outputs (prompt and completion token ids). Latency is the
batch's wall time shared equally among its rows.
"""

from __future__ import annotations

import time
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.params import Decoding, SolverParams, VllmParams

INSTALL_HINT = "pip install 'delegation-lab[vllm]'"


class VllmBackend:
    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> VllmBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(params.model, params.vllm, params.decoding)

    def __init__(self, model: str, params: VllmParams, decoding: Decoding):
        try:
            import vllm  # noqa: F401
        except ImportError as e:
            raise InputError(
                f"backend `vllm` needs `{INSTALL_HINT}` on a CUDA machine (import failed: {e}); "
                "without a GPU use backend `transformers`, `llamacpp` or `openai_compat`"
            ) from None
        self.model = model
        self.params = params
        self.decoding = decoding
        self._llm: Any = None

    def fingerprint(self) -> dict[str, Any]:
        # Weights precision changes the numbers; a context cap changes which prompts are answered.
        return {"dtype": self.params.dtype, "max_model_len": self.params.max_model_len}

    def load(self) -> Any:
        """The vllm.LLM engine, started on first use (it takes the GPU memory it is allowed)."""
        if self._llm is None:
            from vllm import LLM

            p = self.params
            self._llm = LLM(
                model=self.model,
                tensor_parallel_size=p.tensor_parallel_size,
                gpu_memory_utilization=p.gpu_memory_utilization,
                max_model_len=p.max_model_len,
                dtype=p.dtype,
                seed=self.decoding.seed if self.decoding.seed is not None else 0,
            )
        return self._llm

    def _sampling(self) -> Any:
        from vllm import SamplingParams

        d = self.decoding
        return SamplingParams(temperature=d.temperature, top_p=d.top_p, max_tokens=d.max_tokens, seed=d.seed)

    def generate(self, requests: list[Request]) -> list[Generation]:
        if not requests:
            return []
        self.load()  # an engine that cannot start is a setup error, not an answer
        try:
            return self._batch(requests)
        except Exception as e:  # noqa: BLE001 - isolate the request(s) that broke the batch
            if len(requests) == 1:
                return [Generation(text=None, error=f"{type(e).__name__}: {e}"[:300])]
        return [g for r in requests for g in self.generate([r])]

    def _batch(self, requests: list[Request]) -> list[Generation]:
        llm = self.load()
        start = time.perf_counter()
        outputs = llm.chat(
            [r.messages for r in requests], self._sampling(), use_tqdm=False, add_generation_prompt=True
        )
        latency = round((time.perf_counter() - start) / len(requests), 4)
        generations = []
        for output in outputs:
            completion = output.outputs[0]
            reason = completion.finish_reason
            extra = {"finish_reason": reason} if reason not in (None, "stop") else {}
            generations.append(Generation(
                text=completion.text,
                tokens_in=len(output.prompt_token_ids or []),
                tokens_out=len(completion.token_ids),
                latency_s=latency,
                extra=extra,
            ))
        return generations
