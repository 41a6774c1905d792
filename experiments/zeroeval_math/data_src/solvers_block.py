"""Print the `solvers:` block of ../params.yaml: one replay solver per ZeroEval MATH level-5 model (run
from this folder: `python solvers_block.py > /tmp/solvers.yaml`, then paste it).

Names and prices as in ../../zeroeval_gsm8k/data_src/solvers_block.py (the 28 models both tasks share
take the same price from ../../../docs/prices/price_map_zeroeval.yaml and the same stand-ins); the 12
models only MATH has are priced in MATH_ONLY below, from a named table entry of the model itself or a
declared stand-in (`price.stand_in`: its source then starts with STAND-IN). The two o1 models bill
hidden reasoning tokens the files omit: a declared estimate per answer (HIDDEN_REASONING).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gsm_block", HERE / "../../zeroeval_gsm8k/data_src/solvers_block.py")
GSM = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GSM)
OPENAI_REASONING_GUIDE, PRICE_MAP, STAND_INS, solver_name = GSM.OPENAI_REASONING_GUIDE, GSM.PRICE_MAP, GSM.STAND_INS, GSM.solver_name

MATH_ONLY = {  # model -> (price block, stand-in reason or None)
    "Meta-Llama-3.1-70B-Instruct@hyperbolic": ({"table": "routerarena", "model": "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo"},
                                               None),
    "Qwen2.5-7B-Instruct": ({"table": "llmrouter", "model": "qwen2.5-7b-instruct"}, None),
    "gemma-2-27b-it": ({"table": "provider", "model": "google/gemma-2-27b-it"}, None),
    "gpt-4-turbo-2024-04-09": ({"table": "routerarena", "model": "gpt-4-turbo"}, None),
    "gpt-4-0314": ({"table": "provider", "model": "gpt-4-0314"}, None),
    "chatgpt-4o-latest-24-09-07": ({"table": "provider", "model": "chatgpt-4o-latest"}, None),
    "o1-preview-2024-09-12": ({"table": "provider", "model": "o1-preview-2024-09-12"}, None),
    "Qwen2.5-72B-Instruct": ({"table": "provider", "model": "Qwen/Qwen2-72B-Instruct"},
                             "its predecessor of the same size, Qwen2-72B"),
    "Qwen2.5-32B-Instruct": ({"table": "provider", "model": "google/gemma-2-27b-it"},
                             "a 32B open model: the hosted 27B open model gemma-2-27b"),
    "Qwen2.5-3B-Instruct": ({"table": "routerarena", "model": "llama-3-2-3b-instruct"},
                            "a 3B open model: a hosted 3B open model"),
    "Phi-3-mini-4k-instruct": ({"table": "routerarena", "model": "llama-3-2-3b-instruct"},
                               "a 3.8B open model: a hosted 3B open model"),
    "gemini-1.5-pro-exp-0827": ({"table": "provider", "model": "gemini-1.5-pro"},
                                "an experimental snapshot, free in AI Studio: the released model"),
}
HIDDEN_REASONING = {  # hidden reasoning tokens per answer, which ZeroEval's files omit (solvers/reasoning.py)
    stem: {"tokens_per_item": 2000, "source": f"ESTIMATE: {OPENAI_REASONING_GUIDE}; a level-5 competition problem "
                                              "takes more than a GSM8K question (500 there), so 2,000 per answer, not measured"}
    for stem in ("o1-mini-2024-09-12", "o1-preview-2024-09-12")
}


def price_of(stem: str, models: dict) -> dict:
    if stem in MATH_ONLY:
        price, why = MATH_ONLY[stem]
        return {**price, "stand_in": why} if why else dict(price)
    if "price" in models.get(stem, {}):
        return dict(models[stem]["price"])
    entry, why = STAND_INS[stem]
    return {**entry, "stand_in": why}


def main() -> None:
    models = yaml.safe_load(PRICE_MAP.read_text())["models"]
    stems = sorted(p.name.removesuffix(".json.gz") for p in (HERE / "zeroeval_math").glob("*.json.gz"))
    block = {}
    for stem in stems:
        block[solver_name(stem)] = {
            "backend": "replay",
            "model": stem,
            "price": price_of(stem, models),
            "replay": {"path": f"data_src/zeroeval_math/{stem}.json.gz", "format": "zeroeval", "source_model": stem,
                       **({"hidden_reasoning": HIDDEN_REASONING[stem]} if stem in HIDDEN_REASONING else {})},
        }
    print(yaml.safe_dump({"solvers": block}, sort_keys=False, width=200))


if __name__ == "__main__":
    main()
