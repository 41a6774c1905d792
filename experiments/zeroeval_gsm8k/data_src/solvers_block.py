"""Print the `solvers:` block of ../params.yaml: one replay solver per ZeroEval model (run from
this folder: `python solvers_block.py > /tmp/solvers.yaml`, then paste it).

The solver name is the result file's stem made a short DVC stage key (solver_name); the price
is the model's entry in ../../../docs/prices/price_map_zeroeval.yaml. A model no table prices takes
a declared stand-in (`price.stand_in`, STAND_INS below), and its price's source says so. A reasoning
model's hidden tokens are billed from a declared estimate (HIDDEN_REASONING below).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

HERE = Path(__file__).parent
PRICE_MAP = HERE / "../../../docs/prices/price_map_zeroeval.yaml"
STAND_INS = {  # model -> (the priced entry used instead, why): the README lists these nine
    "Athene-70B": ({"table": "routerarena", "model": "meta-llama/Llama-3-70b-chat-hf"},
                   "a fine-tune of Llama-3-70B: the same weights as hosted"),
    "Phi-3.5-mini-instruct": ({"table": "routerarena", "model": "llama-3-2-3b-instruct"},
                              "a 3.8B open model: a hosted 3B open model"),
    "Qwen2-7B-Instruct": ({"table": "llmrouter", "model": "qwen2.5-7b-instruct"},
                          "its successor of the same size, Qwen2.5-7B"),
    "Yi-1.5-34B-Chat": ({"table": "provider", "model": "google/gemma-2-27b-it"},
                        "a 34B open model: the hosted 27B open model gemma-2-27b"),
    "Yi-1.5-9B-Chat": ({"table": "llmrouter", "model": "gemma-2-9b-it"},
                       "a 9B open model: the hosted 9B open model gemma-2-9b"),
    "gemma-2-2b-it": ({"table": "llmrouter", "model": "gemma-2-9b-it"},
                      "no host lists gemma-2-2b: gemma-2-9b, an upper bound"),
    "gemini-1.5-flash-exp-0827": ({"table": "provider", "model": "gemini-1.5-flash"},
                                  "an experimental snapshot, free in AI Studio: the released model"),
    "gemini-1.5-pro-exp-0801": ({"table": "provider", "model": "gemini-1.5-pro"},
                                "an experimental snapshot, free in AI Studio: the released model"),
    "yi-large-preview": ({"table": "provider", "model": "yi-large"}, "the preview of yi-large: yi-large"),
}

OPENAI_REASONING_GUIDE = ("OpenAI's reasoning guide (platform.openai.com/docs/guides/reasoning, Sept. 2024): o1 models "
                          "'may generate anywhere from a few hundred to tens of thousands of reasoning tokens'")
HIDDEN_REASONING = {  # reasoning models: hidden tokens per answer, which ZeroEval's files omit (solvers/reasoning.py)
    stem: {"tokens_per_item": 500, "source": f"ESTIMATE: the low end of {OPENAI_REASONING_GUIDE}; a GSM8K "
                                             "question is short, so 500 per answer, not measured"}
    for stem in ("o1-mini-2024-09-12", "o1-preview-2024-09-12")
}


def solver_name(stem: str) -> str:
    """A DVC stage key of at most 32 characters (params check's limit): `Meta-Llama-3.1-8B-Instruct` -> `llama-3-1-8b-inst`."""
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", stem.lower())).strip("-")
    return name.removeprefix("meta-").replace("-instruct", "-inst")


def main() -> None:
    models = yaml.safe_load(PRICE_MAP.read_text())["models"]
    stems = sorted(p.name.removesuffix(".json.gz") for p in (HERE / "zeroeval_gsm").glob("*.json.gz"))
    block = {}
    for stem in stems:
        entry = models[stem]
        if "price" in entry:
            price = dict(entry["price"])
        else:
            entry_used, why = STAND_INS[stem]
            price = {**entry_used, "stand_in": why}
        block[solver_name(stem)] = {
            "backend": "replay",
            "model": stem,
            "price": price,
            "replay": {"path": f"data_src/zeroeval_gsm/{stem}.json.gz", "format": "zeroeval", "source_model": stem,
                       **({"hidden_reasoning": HIDDEN_REASONING[stem]} if stem in HIDDEN_REASONING else {})},
        }
    print(yaml.safe_dump({"solvers": block}, sort_keys=False, width=200))


if __name__ == "__main__":
    main()
