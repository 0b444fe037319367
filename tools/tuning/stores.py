"""The stores' numbers: dense search (IndexSettings, measured on evals/results/bench.json), store reads and writes,
ingestion, chunking, loaders and locks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from reground.tools.tuning.declared import setting

DenseMode = Literal["auto", "exact", "hnsw"]
DENSE_MODES: tuple[str, ...] = get_args(DenseMode)


@dataclass(frozen=True)
class IndexSettings:
    """How dense search runs. `exact`: every vector in memory, a matrix product per query (exact; memory and time
    grow with the collection). `hnsw`: the store's own approximate index (Chroma's HNSW), no vectors in memory.
    `auto`: hnsw from `ann_min_chunks` live chunks on. Measured in evals/results/bench.json `scale`: exact is faster
    at doc2dial's size, a toss-up near 20,000 chunks, and far slower at 200,000, where HNSW's top 10 still holds
    nearly all of the exact top 10's source documents; exact search grows linearly, so the switch sits between.
    Embedded, Chroma keeps its HNSW index in the same process, so memory hardly drops; with a Chroma server it is
    the server's."""

    dense: DenseMode = setting(
        "auto",
        meaning=(
            "How dense search runs: 'exact' (every vector in memory), 'hnsw' (the store's approximate index) or "
            "'auto' (hnsw from `ann_min_chunks` live chunks on; evals/results/bench.json, scale)."
        ),
    )
    ann_min_chunks: int = setting(
        50_000, meaning="Live chunks from which 'auto' searches the approximate index (HNSW).", ge=0
    )
    ann_oversample: int = setting(
        3,
        meaning="Neighbours the approximate index is asked for per wanted hit (rows outside the scope are dropped).",
        ge=1,
    )
    ann_widen: int = setting(
        4, meaning="The factor the approximate index's ask grows by while too few hits are left.", ge=2
    )
    sentence_cache: int = setting(4096, meaning="Chunks whose sentence vectors stay in memory once read.", ge=0)
    stored_sentence_vectors: bool = setting(
        True, meaning="Hand out the sentence vectors kept at ingest (off: callers embed the sentences)."
    )

    def __post_init__(self) -> None:
        if self.dense not in DENSE_MODES:
            raise ValueError(f"IndexSettings.dense must be one of {', '.join(DENSE_MODES)}, got {self.dense!r}")
        if self.ann_min_chunks < 0 or self.ann_oversample < 1 or self.sentence_cache < 0:
            raise ValueError("IndexSettings: ann_min_chunks and sentence_cache >= 0, ann_oversample >= 1")


@dataclass(frozen=True)
class StoreIO:
    """Reads and writes of the Chroma store (stores/store.py)."""

    # On a Chroma server, chunks of a generation no manifest names may belong to a writer on another machine that
    # has not flipped yet: only leftovers older than this are collected there.
    server_leftover_grace_s: float = 15 * 60.0
    # Attempts of a write that fails transiently.
    write_attempts: int = 3
    # Rows per Chroma read when loading a snapshot, and per delete or add call.
    snapshot_page: int = 10_000
    write_batch: int = 500
    # Reads of a snapshot a concurrent writer may spoil before a turn gives up, and the first wait between them
    # (doubled each time, at most 1 s).
    snapshot_attempts: int = 6
    snapshot_backoff_s: float = 0.05
    # Unknown or vanished ids named in an error at most.
    ids_named: int = 3


@dataclass(frozen=True)
class Ingest:
    """The ingest pipeline (stores/ingest.py), chunking (text/chunking.py) and file loading (text/loaders.py)."""

    # Items each stage may run ahead of the next (bounded memory); a full queue is retried this often; a closed
    # pipeline waits this long for each worker.
    pipeline_depth: int = 4
    queue_poll_s: float = 0.1
    join_timeout_s: float = 5.0
    # The least chunk budget a caller may ask for (fewer splits sentences).
    min_chunk_tokens: int = 16
    chunk_tokens: int = setting(
        160,
        meaning=(
            "Maximum tokens per chunk (chunks follow headings and paragraphs; about one paragraph of the demo and "
            "doc2dial pages)."
        ),
        ge=min_chunk_tokens,
    )
    # A structured page's unit (a sentence with the code block, list or table it introduces) is never split up to
    # this many chunk budgets; a longer code block is cut at blank lines into parts of that size.
    max_unit_chunks: int = 3
    code_cut_slack: float = 1.5  # a code part may grow to this many budgets while it waits for a blank line to cut at
    # Link targets a chunk keeps in its metadata (the citation shows them; the text keeps the links' words).
    max_chunk_links: int = 8
    # A one-document file larger than this is refused: far larger ones took minutes and gigabytes to index.
    max_file_bytes: int = 16 * 2**20
    # From this size on, reading a file says so on the progress callback.
    large_file_bytes: int = 2 * 2**20
    # Bytes looked at for a NUL to call a file binary.
    binary_sniff_bytes: int = 8192
    # Documents a repair dropped, named in `reground ingest`'s summary at most.
    repaired_named: int = 5
    # Chunks flagged and embedded as one part of a document: the progress bar moves within a large file this often.
    part_chunks: int = 256
    # Files are indexed as they are read, in batches of up to this many documents, a batch handed on early when no
    # file has been read for `flush_idle_s` seconds: a slow file holds up nothing read before it. Each batch
    # rewrites the collection's document records once, so a large corpus goes in few, large batches.
    flush_documents: int = 1024
    flush_idle_s: float = 1.0


@dataclass(frozen=True)
class Locks:
    """Collection write locks (stores/locking.py)."""

    # How often a writer with a timeout retries the lock.
    poll_s: float = 0.05
    # Characters of a Chroma server URL kept in its lock file's name (a hash of the whole URL follows).
    url_chars: int = 60


@dataclass(frozen=True)
class EngineTuning:
    """The search engine backend (stores/postgres.py) and the LangChain adapters (stores/langchain.py,
    retrieval/langchain.py); measured in evals/results/scale (docs/deployment.md, "The scale curve")."""

    # BM25 as bm25s (Lucene variant) and tools/text/lexical.BM25 compute it.
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # Postings each query term reads, best impact first (a rarer term is read whole: exact BM25), and candidates
    # rescored exactly per wanted hit. Chosen at 200,000 chunks from the time and the top-50 overlap with exact
    # scoring per depth (evals/results/scale, docs/deployment.md).
    lexical_postings: int = 1500
    rescore_factor: int = 3
    # Candidates ranked before the chunks are joined, per wanted hit, when a scope will filter them; the factor the
    # window and the postings read grow by while a narrow scope leaves too few.
    scoped_window: int = 8
    widen: int = 4
    # hnsw.ef_search: at least this, at most pgvector's maximum.
    ef_search_min: int = 40
    ef_search_max: int = 1000  # fact: pgvector's limit on hnsw.ef_search
    # Connections per store (a `langgraph dev` worker runs 10 turns at once; each query holds one for milliseconds);
    # how long a turn waits for one (all busy, or the engine down); how long a new pool waits for the engine.
    pool_size: int = 4
    pool_wait_s: float = 10.0
    connect_timeout_s: float = 15.0
    # How stale a reader's view of the collection's version may be (a turn asks it a dozen times).
    stats_ttl_s: float = 1.0
    # Documents whose chunks stay in a process once read, and term statistics cached (per store version).
    doc_cache: int = 1024
    term_cache: int = 200_000
    # How often a writer retries the advisory write lock another writer holds; how long stopping the bundled
    # server may take.
    lock_poll_s: float = 0.2
    stop_timeout_s: float = 60.0
    # LangChain: hits asked per wanted one (dropped: outside the scope, unknown to the base store); chunks added per
    # call; the retriever's passages returned (its documents and dialogue budget are the run's: BUDGETS).
    langchain_oversample: int = 2
    langchain_batch: int = 256
    retriever_k: int = 4


@dataclass(frozen=True)
class Trusted:
    """What a collection trusts (stores/trusted_domains.py): a domain serving, or named by, at least this share of
    its documents and at least this many of them (or most of them). Set by reading the injection suites (every
    look-alike domain is one page's) against doc2dial (four domains, each far above the share) and the demo corpus."""

    min_share: float = 0.1
    min_documents: int = 2


STORE_IO: Final = StoreIO()
ENGINE: Final = EngineTuning()
INGEST: Final = Ingest()
LOCKS: Final = Locks()
TRUSTED: Final = Trusted()
