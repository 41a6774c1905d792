"""Stage `embed`: a sentence embedding of every item's question (the splits the routers read,
`embed.splits`: train and test) and its cheap text
features, cached as data/embeddings/<embedder>.parquet keyed by item_id (columns item_id, vector
list[float32], embedder, n_chars, n_words, n_digits, difficulty). Writes metrics/embed.json, which
records the embedder that ran (MiniLM, or the hashing fallback when the package is absent)."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

import time
from contextlib import contextmanager

import numpy as np
import polars as pl

from delegation_lab.embeddings import TEXT_FEATURES, HashingEmbedder, embedder_slug, load_embedder, text_features
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.tables import read_items, write_json_atomic, write_parquet_atomic

STAGE = "embed"


@contextmanager
def torch_threads(n: int, embedder: object):
    """Torch's CPU threads set to `n` while a model encodes (the hashing fallback needs no torch)."""
    if isinstance(embedder, HashingEmbedder):
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def embed(ctx: StageContext) -> None:
    """Embed each distinct question of the routers' splits once with the shared embedder."""
    params = ctx.params.embed
    items = (read_items(ctx.layout, tuple(params.splits)).select("item_id", "question", "difficulty")
             .unique("item_id", keep="first").sort("item_id"))
    start = time.perf_counter()
    embedder = load_embedder(params.embedder, params.hashing_dim, key="embed.embedder")
    texts = list(dict.fromkeys(items["question"].to_list()))  # identical questions are encoded once
    with ctx.phase("encode"), torch_threads(params.torch_threads, embedder):
        unique = np.asarray(embedder.encode(texts), dtype=np.float32)
    row = {t: k for k, t in enumerate(texts)}
    vectors = unique[[row[q] for q in items["question"].to_list()]] if texts else unique
    seconds = time.perf_counter() - start
    feats = text_features(items["question"].to_list(), items["difficulty"].to_list())
    frame = pl.DataFrame({
        "item_id": items["item_id"],
        "vector": pl.Series("vector", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1])).cast(pl.List(pl.Float32)),
        "embedder": [embedder.name] * items.height,
        **{name: feats[:, j] for j, name in enumerate(TEXT_FEATURES)},
    })
    folder = ctx.layout.embeddings_dir
    path = write_parquet_atomic(frame, folder / f"{embedder_slug(embedder.name)}.parquet")
    for stale in folder.glob("*.parquet"):  # one embedder's table at a time: readers take the only one
        if stale != path:
            stale.unlink()
    write_json_atomic({
        "embedder": embedder.name, "requested": params.embedder, "fallback": embedder.name != "all-MiniLM-L6-v2",
        "dim": int(vectors.shape[1]), "n_items": items.height, "n_texts": len(texts), "splits": list(params.splits), "seconds": round(seconds, 2),
        "items_per_second": round(items.height / max(seconds, 1e-9), 1), "path": str(path.relative_to(ctx.layout.root)),
    }, ctx.layout.metrics(STAGE))
    print(f"embed: {items.height} questions with {embedder.name} in {seconds:.1f} s -> {path}")


if __name__ == "__main__":
    run_stage(STAGE, embed)
