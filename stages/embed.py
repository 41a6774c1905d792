"""Stage `embed`: a sentence embedding of every item's question (all splits) and its cheap text
features, cached as data/embeddings/<embedder>.parquet keyed by item_id (columns item_id, vector
list[float32], embedder, n_chars, n_words, n_digits, difficulty). Writes metrics/embed.json, which
records the embedder that ran (MiniLM, or the hashing fallback when the package is absent)."""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from delegation_lab.embeddings import TEXT_FEATURES, embedder_slug, load_embedder, text_features
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.tables import read_items, write_json_atomic, write_parquet_atomic

STAGE = "embed"


def embed(ctx: StageContext) -> None:
    """Embed every item's question once with the shared embedder."""
    params = ctx.params.embed
    items = read_items(ctx.layout).select("item_id", "question", "difficulty").unique("item_id", keep="first").sort("item_id")
    start = time.perf_counter()
    embedder = load_embedder(params.embedder, params.hashing_dim, key="embed.embedder")
    vectors = np.asarray(embedder.encode(items["question"].to_list()), dtype=np.float32)
    seconds = time.perf_counter() - start
    feats = text_features(items["question"].to_list(), items["difficulty"].to_list())
    frame = pl.DataFrame({
        "item_id": items["item_id"],
        "vector": pl.Series("vector", vectors, dtype=pl.Array(pl.Float32, vectors.shape[1])).cast(pl.List(pl.Float32)),
        "embedder": [embedder.name] * items.height,
        **{name: feats[:, j] for j, name in enumerate(TEXT_FEATURES)},
    })
    folder = ctx.layout.root / "data" / "embeddings"
    path = write_parquet_atomic(frame, folder / f"{embedder_slug(embedder.name)}.parquet")
    for stale in folder.glob("*.parquet"):  # one embedder's table at a time: readers take the only one
        if stale != path:
            stale.unlink()
    write_json_atomic({
        "embedder": embedder.name, "requested": params.embedder, "fallback": embedder.name != "all-MiniLM-L6-v2",
        "dim": int(vectors.shape[1]), "n_items": items.height, "seconds": round(seconds, 2),
        "items_per_second": round(items.height / max(seconds, 1e-9), 1), "path": str(path.relative_to(ctx.layout.root)),
    }, ctx.layout.metrics(STAGE))
    print(f"embed: {items.height} questions with {embedder.name} in {seconds:.1f} s -> {path}")


if __name__ == "__main__":
    run_stage(STAGE, embed)
