"""Calls to chat models, embedding models, rerank endpoints and the local llama.cpp server: token caps,
temperatures, timeouts, retries and caches. Few of these were measured; where one was, its results file is named.
A value the run's Context exposes is declared with `setting` (declared.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from reground.tools.tuning.declared import setting


@dataclass(frozen=True)
class ChatCalls:
    """Chat model calls of a turn."""

    temperature: float = setting(0.0, meaning="Sampling temperature of the first answer sample.", ge=0.0, le=2.0)
    sample_temperature: float = setting(
        0.7,
        meaning="Sampling temperature of the answer samples after the first (ProMiSe best-of-N).",
        ge=0.0,
        le=2.0,
    )
    n_samples: int = setting(
        1,
        meaning="Initial answer samples N (ProMiSe best-of-N; the 0.5B model's samples rarely differ usefully).",
        ge=1,
    )
    timeout_s: float = setting(
        120.0,
        meaning="Timeout of one LLM call, seconds (room for the 0.5B model on busy cores to answer a turn's prompt).",
        gt=0.0,
    )
    max_answer_tokens: int = setting(120, meaning="Token cap of one answer.", ge=1)
    rewrite_max_tokens: int = setting(
        60, meaning="Token cap of a rewritten question (refine_question, re_ground).", ge=8
    )
    keywords_max_tokens: int = setting(60, meaning="Token cap of the LLM keyword reply.", ge=8)
    judge_max_tokens: int = setting(120, meaning="Token cap of the groundedness judge's reply.", ge=8)
    answer_json_overhead_tokens: int = setting(
        30,
        meaning="Tokens of the JSON answer's keys and helpful list (use_self_check), on top of the answer's own cap.",
        user_settable=False,
        ge=0,
    )
    rerank_tokens_per_passage: int = setting(
        4,
        meaning="The listwise LLM rerank's reply cap: this many tokens per passage ...",
        user_settable=False,
        ge=1,
    )
    rerank_reply_frame_tokens: int = setting(
        16,
        meaning="... plus this many for the reply's JSON frame.",
        user_settable=False,
        ge=0,
    )
    rerank_max_score: float = setting(
        10.0,
        meaning="The listwise LLM rerank's scores run from 0 to this (larger ones are cut).",
        user_settable=False,
        gt=0.0,
    )
    max_keywords: int = setting(5, meaning="LLM keywords kept at most.", user_settable=False, ge=1)
    keyword_max_chars: int = setting(
        60,
        meaning="An LLM keyword this many characters long or longer is a sentence, not a keyword (dropped).",
        user_settable=False,
        ge=1,
    )
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
class AskWorker:
    """The warm process `reground ask` hands its question to (reground/commands/worker.py)."""

    # `worker start`: how long the worker may take to load (a cold start on a loaded 2-core machine took tens of
    # seconds), how often it looks for the started worker's record; words of its log shown when it fails.
    start_timeout_s: float = 300.0
    start_poll_s: float = 0.2
    log_tail_words: int = 60
    # `worker stop`: SIGTERM, then look this often, this many times, for the process to be gone.
    stop_polls: int = 100
    stop_poll_s: float = 0.05
    # A worker with no question for this long stops (`--idle-minutes`; 0: never).
    idle_minutes: float = 60.0


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
    # calls, so the same logits (tests/unit/test_reader.py); on 2 busy cores two read a doc2dial turn's sentences
    # faster than one.
    sessions: int = 2
    # (question, sentence) logits kept in memory: a turn reads the same pairs in triage, the readings and rerank.
    cached_pairs: int = 4096
    # Units of a turn the unit scorer (signals/unit_scorer.py, the same body) reads: those with the highest cosine
    # plus word overlap; one pair costs about what a sentence does, and a documentation turn has ~40 units.
    scorer_units: int = 12


CHAT: Final = ChatCalls()
ENDPOINTS: Final = Endpoints()
EMBEDDINGS: Final = Embeddings()
LOCAL_SERVER: Final = LocalServer()
READER: Final = Reader()
ASK_WORKER: Final = AskWorker()
