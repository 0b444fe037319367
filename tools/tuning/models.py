"""Calls to chat models, embedding models, rerank endpoints and the local llama.cpp server: token caps,
temperatures, timeouts, retries and caches. Few of these were measured; where one was, the figure is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class ChatCalls:
    """Chat model calls of a turn."""

    # Sampling temperature of the first answer and of the best-of-N samples after it (ProMiSe).
    temperature: float = 0.0
    sample_temperature: float = 0.7
    # Initial answer samples N (ProMiSe best-of-N); 1: the 0.5B model's samples rarely differ usefully.
    n_samples: int = 1
    # Timeout of one call: room for the 0.5B model on 2 busy cores to answer a 3-passage prompt.
    timeout_s: float = 120.0
    # Token caps: an answer, a rewritten question, the keyword reply, the groundedness judge's reply.
    max_answer_tokens: int = 120
    rewrite_max_tokens: int = 60
    keywords_max_tokens: int = 60
    judge_max_tokens: int = 120
    # The JSON answer's keys and helpful list, on top of the answer's own cap.
    answer_json_overhead_tokens: int = 30
    # The listwise rerank's reply: this many tokens per passage plus the JSON's frame; its scores run 1..max.
    rerank_tokens_per_passage: int = 4
    rerank_reply_frame_tokens: int = 16
    rerank_max_score: float = 10.0
    # LLM keywords: at most this many, each shorter than `keyword_max_chars` (longer is a sentence, not a keyword).
    max_keywords: int = 5
    keyword_max_chars: int = 60
    # The injection check's verdict is one word.
    injection_judge_max_tokens: int = 16
    # OpenAI allows at most 20 alternatives per token; llama.cpp's server takes the same field.
    top_logprobs: int = 20
    # Causes followed down an exception's chain (openai wraps httpx, which wraps the socket error).
    cause_chain_depth: int = 8


@dataclass(frozen=True)
class Endpoints:
    """Reaching model servers."""

    # A server found up is not asked again for this long.
    reachable_ttl_s: float = 30.0
    # How long the reachability probe waits.
    reachable_timeout_s: float = 3.0
    # LangGraph retries of a node calling an LLM or the store on a transient error: the attempts, the first wait,
    # and the factor each later wait grows by.
    llm_retry_attempts: int = 3
    llm_retry_interval_s: float = 1.0
    store_retry_attempts: int = 3
    store_retry_interval_s: float = 0.2
    retry_backoff: float = 2.0
    # An HTTP cross-encoder rerank call's timeout, and the characters of an unknown reply shown in its error.
    rerank_timeout_s: float = 30.0
    reply_chars_shown: int = 200


@dataclass(frozen=True)
class Embeddings:
    """The ONNX embedders (adapters/embeddings.py)."""

    # Up to this many tokens in a batch (a turn's queries) run on one ONNX thread.
    small_batch_tokens: int = 256
    # Short texts share an ONNX call while the padded batch stays within this many tokens: timed, a few keywords or
    # short texts took less in one call than one at a time, and longer ones lose to padding.
    shared_call_tokens: int = 96
    # Query vectors kept in memory (a conversation repeats its history queries).
    query_cache_size: int = 2048
    # Threads of a batch session at most (all cores but one, which the ingest pipeline keeps).
    max_threads: int = 4
    # Loaded embedders kept (one per spec and thread count).
    loaded_models: int = 16
    # Bytes read at a time when a pinned file's hash is checked (1 MiB).
    hash_block_bytes: int = 1 << 20


@dataclass(frozen=True)
class LocalServer:
    """The local llama.cpp server (adapters/local_server.py)."""

    # Context window: a turn's prompt (3 passages, the dialogue cap, the rules) fits in 4,096 tokens.
    n_ctx: int = 4096
    # How long a start may take (load times: evals/results/bench.json `llm`; the 1.5B model takes far longer on a busy
    # machine), and how often it is probed meanwhile.
    start_timeout_s: float = 180.0
    start_poll_s: float = 0.25
    # Stopping: SIGTERM, this long for it to exit, then SIGKILL; polled this often.
    stop_grace_s: float = 10.0
    stop_poll_s: float = 0.1
    wait_exit_s: float = 5.0
    # Lines of the server's log shown when it fails, and missing packages named in an error.
    log_tail_lines: int = 30
    missing_named: int = 3
    # Bytes read at a time when the model's chunks are joined and hashed (4 MiB).
    copy_block_bytes: int = 1 << 22


@dataclass(frozen=True)
class Reader:
    """The cross-encoder that reads (question, sentence) pairs (adapters/cross_encoder.py). The lengths are those it
    was trained with (evals/train/reader_train.py); changing them changes what it reads."""

    # Tokens of the question (read in its dialogue) at most, and of the whole pair with its three markers.
    question_tokens: int = 64
    pair_tokens: int = 128
    # Pairs per ONNX call. One: a turn's sentences took less one at a time than in one batch (doc2dial turns, 2 busy
    # cores), and int8 dynamic quantisation scales activations per call, so a batch would make a sentence's score
    # depend on its neighbours.
    batch_pairs: int = 1
    # Sessions that read a turn's pairs in parallel (at most one per core), each on one thread: the same one-pair
    # calls, so the same logits (tests/unit/test_reader.py). 170 doc2dial sentences on 2 cores other jobs kept
    # busy (load 6): 18.5 ms a pair with one session, 14.3 with two; a free second core halves it.
    sessions: int = 2
    # (question, sentence) logits kept in memory: a turn reads the same pairs in triage, the readings and rerank.
    cached_pairs: int = 4096


CHAT: Final = ChatCalls()
ENDPOINTS: Final = Endpoints()
EMBEDDINGS: Final = Embeddings()
LOCAL_SERVER: Final = LocalServer()
READER: Final = Reader()
