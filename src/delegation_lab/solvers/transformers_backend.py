"""`transformers`: local batched generation with Hugging Face transformers (GPU if present).

Prompts are left-padded so every row's continuation starts at the same column, and generated in
chunks of `batch_size`. Token counts are exact: tokens_in counts a row's non-pad prompt tokens,
tokens_out its generated tokens up to and including the first end-of-sequence token (the pads
`generate` appends after a row has finished are not paid for). Latency is the chunk's wall time
shared equally among its rows, so summed latencies equal the time spent.
"""

from __future__ import annotations

import time
from typing import Any

from delegation_lab.errors import InputError
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.params import Decoding, SolverParams, TransformersParams

INSTALL_HINT = "pip install 'delegation-lab[transformers]'"


def plain_prompt(messages: list[dict[str, str]]) -> str:
    """The prompt for tokenizers without a chat template: one 'role: content' line per message."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"


class TransformersBackend:
    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> TransformersBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(params.model, params.transformers, params.decoding)

    def __init__(self, model: str, params: TransformersParams, decoding: Decoding):
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            raise InputError(f"backend `transformers` needs transformers and torch: {INSTALL_HINT}") from None
        self.model = model
        self.params = params
        self.decoding = decoding
        self._tokenizer: Any = None
        self._model: Any = None

    def fingerprint(self) -> dict[str, Any]:
        # Weights precision changes the numbers; the template flag changes the prompt text.
        return {"dtype": self.params.dtype, "chat_template": self.params.chat_template}

    @property
    def device(self) -> str:
        import torch

        if self.params.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.params.device

    def load(self) -> tuple[Any, Any]:
        """(tokenizer, model), loaded on first use."""
        if self._model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                if tokenizer.eos_token is None:
                    raise InputError(
                        f"tokenizer of {self.model!r} has neither a pad nor an eos token; batching needs one"
                    )
                tokenizer.pad_token = tokenizer.eos_token
            model = AutoModelForCausalLM.from_pretrained(self.model, dtype=self.params.dtype)
            self._tokenizer, self._model = tokenizer, model.to(self.device).eval()
        return self._tokenizer, self._model

    def uses_chat_template(self) -> bool:
        tokenizer, _ = self.load()
        return self.params.chat_template and bool(getattr(tokenizer, "chat_template", None))

    def prompt(self, messages: list[dict[str, str]]) -> str:
        tokenizer, _ = self.load()
        if self.uses_chat_template():
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return plain_prompt(messages)

    def generate(self, requests: list[Request]) -> list[Generation]:
        out: list[Generation] = []
        size = self.params.batch_size
        for i in range(0, len(requests), size):
            out += self._chunk(requests[i : i + size])
        return out

    def _eos_ids(self) -> set[int]:
        tokenizer, model = self.load()
        ids = model.generation_config.eos_token_id
        ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
        if tokenizer.eos_token_id is not None:
            ids.add(tokenizer.eos_token_id)
        return ids

    def _chunk(self, requests: list[Request]) -> list[Generation]:
        import torch

        tokenizer, model = self.load()
        d = self.decoding
        start = time.perf_counter()
        try:
            prompts = [self.prompt(r.messages) for r in requests]
            # A chat template writes its own special tokens; adding them again would double the BOS.
            enc = tokenizer(
                prompts, return_tensors="pt", padding=True, add_special_tokens=not self.uses_chat_template()
            ).to(model.device)
            sampling: dict[str, Any] = {"do_sample": False}
            if d.temperature > 0:
                sampling = {"do_sample": True, "temperature": d.temperature, "top_p": d.top_p}
                if d.seed is not None:
                    torch.manual_seed(d.seed)
            with torch.inference_mode():
                output = model.generate(
                    **enc, max_new_tokens=d.max_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
                )
        except Exception as e:  # noqa: BLE001 - a failing chunk (OOM, too long) becomes error rows
            error = f"{type(e).__name__}: {e}"[:300]
            return [Generation(text=None, error=error) for _ in requests]
        latency = round((time.perf_counter() - start) / len(requests), 4)
        new = output[:, enc["input_ids"].shape[1] :].tolist()
        tokens_in = enc["attention_mask"].sum(dim=1).tolist()
        eos = self._eos_ids()
        generations = []
        for row, n_in in zip(new, tokens_in, strict=True):
            end = next((k + 1 for k, t in enumerate(row) if t in eos), None)
            kept = row[:end]  # a row without EOS ran to max_new_tokens: no pads to drop
            generations.append(Generation(
                text=tokenizer.decode(kept, skip_special_tokens=True),
                tokens_in=int(n_in),
                tokens_out=len(kept),
                latency_s=latency,
                extra={} if end is not None else {"finish_reason": "length"},
            ))
        return generations
