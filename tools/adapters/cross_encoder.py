"""The reader: all-MiniLM-L6-v2 fine-tuned here as a cross-encoder over (the question read in its dialogue, a passage
sentence) -> a logit that the sentence answers the question. It reads both texts together, so it sees what cosines
cannot ("What does the gown hire cost?" against "You pay a fee of £50 for the gown hire").

int8 ONNX on onnxruntime, the same runtime and tokenizer as the embedder; the weights ship with the package
(reground/data/judge/reader-int8.onnx, sha256-pinned) and are trained by evals/train/reader_train.py, never at run time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
from reground.tools.adapters.embeddings import (
    MINILM_TOKENIZER,
    EmbeddingModelError,
    VectorCache,
    cpu_session,
    file_sha256,
    packaged_file,
)
from reground.tools.tuning.models import READER

READER_FILE = "reader-int8.onnx"
PAIR_MARKERS = ("[CLS]", "[SEP]", "[SEP]")  # a pair's special tokens: they take room from the sentence
READER_SHA256 = "c3b66e313582fefb86731305ced187fe03864ce9149de8d7db08644e2f278e41"


class CrossEncoderReader:
    """Scores (query, sentence) pairs; thread-safe (each ONNX session runs one call at a time).

    A pair is always one ONNX call (`READER.batch_pairs`): int8 dynamic quantisation scales activations per call, so
    a pair's logit never depends on which other pairs a turn reads. With `sessions` > 1 the pairs of a read are
    spread over that many single-threaded sessions in parallel: the same calls, so the same logits, in less wall
    time where a core is free (the sessions share nothing but the weights file)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, *, threads: int = 1, sessions: int = 1) -> None:
        from tokenizers import Tokenizer

        self._sessions = [cpu_session(model_path, threads) for _ in range(max(1, sessions))]
        self._locks = [threading.Lock() for _ in self._sessions]
        self._pool = ThreadPoolExecutor(len(self._sessions), "reader") if len(self._sessions) > 1 else None
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        cls, sep = self._tokenizer.token_to_id("[CLS]"), self._tokenizer.token_to_id("[SEP]")
        if cls is None or sep is None:
            raise EmbeddingModelError(f"{tokenizer_path.name} has no [CLS] / [SEP] tokens: not a BERT tokenizer")
        self._cls: int = cls
        self._sep: int = sep
        self._cache = VectorCache(READER.cached_pairs)

    def _pair(self, query_ids: list[int], sentence_ids: list[int]) -> tuple[list[int], list[int]]:
        """[CLS] query [SEP] sentence [SEP], cut as in training: the query to its cap, the sentence to what is left."""
        room = READER.pair_tokens - len(PAIR_MARKERS) - len(query_ids)
        ids = [self._cls, *query_ids, self._sep, *sentence_ids[:room], self._sep]
        segments = [0] * (len(query_ids) + 2) + [1] * (len(ids) - len(query_ids) - 2)
        return ids, segments

    def logits(self, query: str, sentences: Sequence[str]) -> np.ndarray:
        """One logit per sentence: above 0, the reader thinks it answers `query`. A turn reads the same pairs more
        than once (triage, then the readings, then rerank): they are cached, and a sentence a turn's passages hold
        twice (a page's two variants, a repeated note) is read once."""
        out = np.zeros(len(sentences), dtype=np.float32)
        keys = [f"{query}\x00{s}" for s in sentences]
        todo: dict[str, int] = {}  # each key not cached yet, once: the first sentence that has it
        for i, key in enumerate(keys):
            cached = self._cache.get(key)
            if cached is None:
                todo.setdefault(key, i)
            else:
                out[i] = float(cached)
        if todo:
            read = self._read(query, [sentences[i] for i in todo.values()])
            found = dict(zip(todo, read, strict=True))
            for key, value in found.items():
                self._cache.put(key, np.asarray(value))
            for i, key in enumerate(keys):
                if key in found:
                    out[i] = found[key]
        return out

    def _read(self, query: str, sentences: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(sentences), dtype=np.float32)
        query_ids = self._tokenizer.encode(query or " ", add_special_tokens=False).ids[: READER.question_tokens]
        encoded = self._tokenizer.encode_batch([s or " " for s in sentences], add_special_tokens=False)
        pairs = [self._pair(query_ids, e.ids) for e in encoded]
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
        batches = [order[start : start + READER.batch_pairs] for start in range(0, len(order), READER.batch_pairs)]
        if self._pool is None or len(batches) < 2:
            for rows in batches:
                out[rows] = self._run(0, pairs, rows)
            return out
        # Session k takes every k-th batch of the length-sorted order: each gets about as many tokens to read.
        shares = [batches[k :: len(self._sessions)] for k in range(len(self._sessions))]
        done = self._pool.map(lambda k: [(rows, self._run(k, pairs, rows)) for rows in shares[k]], range(len(shares)))
        for share in done:
            for rows, scores in share:
                out[rows] = scores
        return out

    def _run(self, session: int, pairs: Sequence[tuple[list[int], list[int]]], rows: Sequence[int]) -> np.ndarray:
        """The logits of some pairs (padded to the longest), in one call on one session."""
        width = max(len(pairs[i][0]) for i in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        segments = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, i in enumerate(rows):
            tokens, types = pairs[i]
            ids[row, : len(tokens)] = tokens
            segments[row, : len(types)] = types
            mask[row, : len(tokens)] = 1
        with self._locks[session]:
            (scores,) = self._sessions[session].run(
                ["logit"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments}
            )
        return np.asarray(scores, dtype=np.float32).reshape(-1)


@lru_cache(maxsize=1)
def shipped_reader() -> CrossEncoderReader:
    """The reader trained here and installed with the package (loaded once per process, weights verified)."""
    path = Path(str(resources.files("reground") / "data" / "judge" / READER_FILE))
    if not path.is_file():
        raise EmbeddingModelError(f"the reader's weights are missing ({path.name}): reinstall reground")
    if file_sha256(path) != READER_SHA256:
        raise EmbeddingModelError(f"the reader's weights at {path.name} do not match their pinned sha256")
    sessions = max(1, min(READER.sessions, os.cpu_count() or 1))
    return CrossEncoderReader(path, packaged_file(*MINILM_TOKENIZER), sessions=sessions)
