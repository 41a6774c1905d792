"""Local backends: llama.cpp with SmolLM2 (real token counts, determinism, per-request errors),
transformers on a tiny random Llama built here (batching, exact token counts, greedy
determinism), and the clear install error of vLLM where it is absent."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.items import Item
from delegation_lab.data.params import ArithParams
from delegation_lab.errors import InputError
from delegation_lab.solvers import build_backend, build_solver
from delegation_lab.solvers.params import Decoding, SolverParams, VllmParams
from delegation_lab.solvers.pricing import cost_usd
from delegation_lab.solvers.prompts import JUDGE, MATH_COT

from tests.conftest import cpu_simd_flags, needs_llamacpp

PRICE = {"input_usd_per_mtok": 0.05, "output_usd_per_mtok": 0.10}
MAX_TOKENS = 12


@pytest.fixture(scope="module")
def items() -> list[Item]:
    return generate(ArithParams(min_steps=1, max_steps=3), 5, seed=11)


# ---------------------------------------------------------------------------------------------
# llama.cpp


def llamacpp_params(**section) -> SolverParams:
    return SolverParams(backend="llamacpp", model="smollm2-135m", price=PRICE,
                        decoding={"max_tokens": 24, "temperature": 0.0}, llamacpp={"n_threads": 1, **section})


@pytest.fixture(scope="module")
def llama_solver():
    return build_solver("smol", llamacpp_params())


def llama_prompt_tokens(llm, messages: list[dict[str, str]]) -> int:
    """Independent count: the GGUF's own chat template rendered with Jinja, then tokenized."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter = Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=llm.detokenize([llm.token_eos()], special=True).decode(),
        bos_token=llm.detokenize([llm.token_bos()], special=True).decode(),
        add_generation_prompt=True,
    )
    prompt = formatter(messages=messages).prompt
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token") == "true"
    return len(llm.tokenize(prompt.encode(), add_bos=add_bos, special=True))


@needs_llamacpp
def test_llamacpp_answers_on_the_cpu_it_runs_on(llama_solver, items):
    """The build decodes on this CPU (a -march=native build segfaults in decode on AVX-512 / AMX
    CPUs: the `native` marker then fails this test naming SIGSEGV and the CPU's flags)."""
    import llama_cpp

    answer = llama_solver.solve(items[:1])[0]
    where = f"CPU AVX-512/AMX flags: {cpu_simd_flags()}; llama.cpp: {llama_cpp.llama_print_system_info().decode()}"
    assert answer.error is None, f"{answer.error}; {where}"
    assert answer.answer_text.strip() and answer.tokens_out > 0, where


@needs_llamacpp
def test_llamacpp_answers_with_real_token_counts(llama_solver, items):
    answers = llama_solver.solve(items[:3])
    llm = llama_solver.backend.load()
    for item, answer in zip(items, answers):
        assert answer.error is None and answer.answer_text
        assert answer.tokens_in == llama_prompt_tokens(llm, llama_solver.request(item).messages)
        assert 0 < answer.tokens_out <= 24
        expected = cost_usd(answer.tokens_in, answer.tokens_out, llama_solver.params.price)
        assert answer.cost_usd == pytest.approx(expected)
        assert answer.cost_usd > 0 and answer.latency_s > 0


@needs_llamacpp
def test_llamacpp_is_deterministic_at_temperature_zero(llama_solver, items):
    first = [a.answer_text for a in llama_solver.solve(items[:2])]
    again = [a.answer_text for a in llama_solver.solve(items[:2])]
    fresh = [a.answer_text for a in build_solver("smol", llamacpp_params()).solve(items[:2])]
    assert first == again == fresh
    assert all(first)


@needs_llamacpp
def test_llamacpp_error_stays_with_its_request(items):
    solver = build_solver("smol", llamacpp_params(n_ctx=256))
    too_long = Item(item_id="long", split="test", question="apples " * 600, gold="1")
    answers = solver.solve([items[0], too_long, items[1]])
    assert answers[0].error is None and answers[2].error is None
    assert answers[1].error is not None and "context" in answers[1].error
    assert answers[1].cost_usd == 0.0


@needs_llamacpp
def test_llamacpp_fingerprint_names_the_file(llama_solver, tmp_path):
    backend = llama_solver.backend
    fp = backend.fingerprint()
    assert fp["gguf"].endswith(".gguf") and fp["gguf"] == backend.model_path.name
    assert fp["gguf_bytes"] == backend.model_path.stat().st_size > 1_000_000
    with pytest.raises(InputError, match="does not exist"):
        build_backend("x", llamacpp_params(model_path=str(tmp_path / "absent.gguf")))


# ---------------------------------------------------------------------------------------------
# transformers on a tiny random Llama built in the test

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, items) -> Path:
    """A 2-layer, hidden-32 Llama with a word-level tokenizer trained on arith text. The EOS row of
    the output layer is scaled until, on the test items, some rows stop early at EOS and some run to
    max_tokens: that mix is what exercises the EOS and padding bookkeeping of batched generation."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_llama")
    corpus = [MATH_COT.system, MATH_COT.user, JUDGE.system, "system user assistant #### 0 1 2 3 4 5 6 7 8 9"]
    corpus += [i.question for i in generate(ArithParams(), 60, seed=1)]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[BOS]", "[EOS]"]))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]", eos_token="[EOS]"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    eos = tokenizer.eos_token_id

    def greedy(prompt: str) -> list[int]:
        enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        out = model.generate(**enc, max_new_tokens=MAX_TOKENS, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        return out[0, enc["input_ids"].shape[1] :].tolist()

    prompts = [
        tokenizer.apply_chat_template(MATH_COT.render(i, {}), tokenize=False, add_generation_prompt=True)
        for i in items
    ]
    # Copying token t's output row (slightly enlarged) into EOS's makes the model say EOS wherever
    # it would have said t: rows whose greedy continuation contains t stop there, the rest run on.
    plain = [greedy(p) for p in prompts]
    candidates = dict.fromkeys(t for seq in plain for t in seq[1:] if sum(t in s for s in plain) < len(plain))
    with torch.no_grad():
        for t in candidates:
            model.lm_head.weight[eos] = model.lm_head.weight[t] * 1.05
            lengths = [len(greedy(p)) for p in prompts]
            if min(lengths) < MAX_TOKENS and max(lengths) == MAX_TOKENS:
                break
        else:
            pytest.fail(f"no token gives a mix of early-stopping and full-length rows: {plain}")
    model.save_pretrained(folder)
    return folder


def tf_solver(folder: Path, batch_size: int = 2, chat_template: bool = True):
    params = SolverParams(
        backend="transformers", model=str(folder), price=PRICE, decoding={"max_tokens": MAX_TOKENS},
        transformers={"batch_size": batch_size, "device": "cpu", "dtype": "float32", "chat_template": chat_template},
    )
    return build_solver("tiny", params)


def count_generate_calls(backend, monkeypatch) -> list[int]:
    """Wraps the loaded model's generate; returns the list of batch sizes it was called with."""
    _, model = backend.load()
    sizes: list[int] = []
    real = model.generate

    def spy(*args, **kwargs):
        sizes.append(int(kwargs["input_ids"].shape[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    return sizes


def reference_tokens_out(backend, messages) -> tuple[int, str]:
    """One unpadded prompt through generate: stops at EOS (kept), so its length is the truth."""
    tokenizer, model = backend.load()
    enc = tokenizer(backend.prompt(messages), return_tensors="pt", add_special_tokens=False)
    out = model.generate(**enc, max_new_tokens=MAX_TOKENS, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    new = out[0, enc["input_ids"].shape[1] :].tolist()
    return len(new), tokenizer.decode(new, skip_special_tokens=True)


def test_transformers_batches_in_chunks(tiny_model, items, monkeypatch):
    solver = tf_solver(tiny_model, batch_size=2)
    sizes = count_generate_calls(solver.backend, monkeypatch)
    answers = solver.solve(items)  # 5 items, batch_size 2
    assert sizes == [2, 2, 1]
    assert len(answers) == 5 and all(a.error is None for a in answers)
    assert [a.item_id for a in answers] == [i.item_id for i in items]


def test_transformers_token_counts_are_exact(tiny_model, items):
    solver = tf_solver(tiny_model, batch_size=3)
    backend = solver.backend
    tokenizer, _ = backend.load()
    answers = solver.solve(items)
    outs = []
    for item, answer in zip(items, answers):
        messages = solver.request(item).messages
        prompt = backend.prompt(messages)
        assert prompt == tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert answer.tokens_in == len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        n_ref, text_ref = reference_tokens_out(backend, messages)
        assert answer.tokens_out == n_ref  # EOS counted once, the batch's trailing pads not at all
        assert answer.answer_text == text_ref
        assert 1 <= answer.tokens_out <= MAX_TOKENS
        assert answer.cost_usd == pytest.approx(cost_usd(answer.tokens_in, answer.tokens_out, solver.params.price))
        outs.append(answer.tokens_out)
    # the fixture's point: some rows stop early at EOS while others run to max_tokens
    assert min(outs) < MAX_TOKENS and max(outs) == MAX_TOKENS, outs
    assert any(json.loads(a.extra or "{}").get("finish_reason") == "length" for a in answers)


def test_transformers_greedy_is_deterministic_and_batch_independent(tiny_model, items):
    one = [a.answer_text for a in tf_solver(tiny_model, batch_size=1).solve(items)]
    five = [a.answer_text for a in tf_solver(tiny_model, batch_size=5).solve(items)]
    again = [a.answer_text for a in tf_solver(tiny_model, batch_size=5).solve(items)]
    assert one == five == again
    assert len(set(five)) > 1  # different prompts, different continuations


def test_transformers_without_chat_template_uses_plain_join(tiny_model, items):
    from delegation_lab.solvers.transformers_backend import plain_prompt

    solver = tf_solver(tiny_model, chat_template=False)
    tokenizer, _ = solver.backend.load()
    messages = solver.request(items[0]).messages
    assert solver.backend.prompt(messages) == plain_prompt(messages)
    assert plain_prompt(messages).startswith(f"system: {messages[0]['content']}")
    answer = solver.solve(items[:1])[0]
    assert answer.error is None
    assert answer.tokens_in == len(tokenizer(plain_prompt(messages))["input_ids"])
    # the flag enters the request hash: a templated prompt never reuses a plain one's answer
    assert solver.request(items[0]).request_hash != tf_solver(tiny_model).request(items[0]).request_hash


def test_transformers_answers_go_through_solver_roles(tiny_model, items):
    solver = tf_solver(tiny_model)
    contexts = [{"candidate": "#### 3", "reference": "3"}, {"candidate": "#### 4", "reference": "5"}]
    answers = solver.solve(items[:2], role="judge", contexts=contexts)
    for answer in answers:
        assert answer.role == "judge" and answer.error is None and isinstance(answer.answer_text, str)
        assert answer.parsed_answer in (None, "correct", "incorrect")


# ---------------------------------------------------------------------------------------------
# vLLM


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_missing_gives_install_hint():
    from delegation_lab.solvers.vllm_backend import VllmBackend  # importing the module itself is fine

    with pytest.raises(InputError, match=r"pip install 'delegation-lab\[vllm\]'.*CUDA"):
        VllmBackend("Qwen/Qwen2.5-0.5B-Instruct", VllmParams(), Decoding())
    params = SolverParams(backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct", price=PRICE)
    with pytest.raises(InputError, match="backend `vllm`"):
        build_backend("big", params)
