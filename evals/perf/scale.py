"""The scale curve of both store backends, and the engine backend's retrieval parity.

    # parity: every doc2dial dev case, the embedded stack and the engine backend on the same documents
    .venv/bin/python -m reground.evals.perf.scale parity --docs ../shared/data/doc2dial/docs.jsonl \
        --cases ../shared/data/doc2dial/cases_dev.jsonl --engine pgserver:/tmp/reground-engine
    # the curve: a synthetic collection grown from the doc2dial chunks, per backend and size
    nice -n 10 .venv/bin/python -m reground.evals.perf.scale curve --docs ../shared/data/doc2dial/docs.jsonl \
        --cases ../shared/data/doc2dial/cases_dev.jsonl --backend engine --sizes 20000,200000,2000000 \
        --engine pgserver:/tmp/reground-engine --work /tmp/reground-scale

Both write into evals/results/scale/summary.json (`rows`, one per backend and size, and `parity`); details of each
row (single dense / lexical search times, memory at each step, generation time) go to runs.jsonl beside it.

The collection: replica 0 is the doc2dial collection itself (2,218 chunks, MiniLM); replica r copies every
document with a new id, 20% of each chunk's words replaced by other corpus words (BM25 sees new texts) and its
vector perturbed (Gaussian noise, cosine ~0.94 to the original), its sentence vectors copied. Nothing is embedded:
generation time is reported apart (`generate_s`), and a real ingest's embedding cost is MiniLM's ~40 chunks/s per
core (`bench ingest`). The engine backend writes through the store's own `write_documents` (the transaction ingest
uses, in batches of documents) with its ANN and postings indexes dropped, then builds them (`index_build_s`: HNSW,
the postings index, VACUUM ANALYZE). The embedded backend writes straight into Chroma as `bench_scale` does; its
`index_build_s` is what each process pays before its first search (snapshot load + BM25), and Chroma's own HNSW is
built during the writes.

Each (backend, size) is measured in a fresh process: VmRSS after the embedding model is loaded, after the store is
opened, and after the queries (`rss_mb`); 20 warm-up turns, then 50 timed turns (other dev questions, seeded) of
`HybridRetriever.search` (what a turn's retrieve node runs) with a fresh retriever, query embedding time
subtracted. For the engine backend, the measuring process counts whole-collection reads (`load_snapshot`,
`all_chunks`): a turn must make none.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from reground.tools.tuning.turn import BUDGETS

OUT = Path(__file__).resolve().parents[1] / "results" / "scale"
COLLECTION = "scale"
NOISE = 0.35  # per-dimension sigma x sqrt(dim), as bench_scale
WORD_SHARE = 0.2
BATCH_CHUNKS = 4000  # chunks per write transaction of the engine build
WARM_TURNS = 20
TIMED_TURNS = 50


def rss_mb() -> float:
    """VmRSS of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_ms(values: Sequence[float]) -> dict[str, float]:
    """Median and 95th percentile of timings in seconds, as milliseconds."""
    return {
        "p50_ms": round(1000 * statistics.median(values), 1),
        "p95_ms": round(1000 * percentile(values, 0.95), 1),
    }


# --- the synthetic collection ------------------------------------------------------------------


class Base:
    """The doc2dial collection's chunks, vectors and packed sentence vectors (from the embedded eval store)."""

    def __init__(self, docs: Path) -> None:
        from reground.evals.perf.bench import EVAL_CHUNK_TOKENS
        from reground.evals.runs.retrieval import open_eval_store

        store: Any = open_eval_store(docs, data_dir=None, max_tokens=EVAL_CHUNK_TOKENS)
        snapshot = store.load_snapshot()
        self.embedder = store.embedder
        self.chunks = snapshot.chunks
        self.vectors = np.asarray(snapshot.vectors, dtype=np.float32)
        self.blobs = store.sentence_vectors_of(snapshot.row_ids)
        self.vocabulary = sorted({w for c in self.chunks for w in c["text"].split() if w.isalpha() and len(w) > 3})
        self.by_doc: dict[str, list[int]] = {}
        for i, chunk in enumerate(self.chunks):
            self.by_doc.setdefault(chunk["doc_id"], []).append(i)

    def documents(self, size: int, seed: int) -> Iterator[tuple[str, str, list[Any], np.ndarray, list[Any]]]:
        """(doc_id, content hash, chunks, vectors, sentence blobs) until `size` chunks: replica 0, 1, ..."""
        rng = random.Random(seed)
        noise = np.random.default_rng(seed)
        dim = self.vectors.shape[1]
        written, replica = 0, 0
        while written < size:
            for doc_id, positions in self.by_doc.items():
                if written >= size:
                    return
                new_id = doc_id if replica == 0 else f"{doc_id}~r{replica}"
                chunks, rows = [], []
                for i in positions:
                    chunk = dict(self.chunks[i])
                    if replica:
                        words = chunk["text"].split()
                        for w in range(len(words)):
                            if rng.random() < WORD_SHARE:
                                words[w] = rng.choice(self.vocabulary)
                        chunk.update(doc_id=new_id, chunk_id=f"{chunk['chunk_id']}r{replica}", text=" ".join(words))
                    chunks.append(chunk)
                    rows.append(i)
                vectors = self.vectors[rows]
                if replica:
                    vectors = vectors + noise.normal(0, NOISE / np.sqrt(dim), vectors.shape).astype(np.float32)
                    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                yield new_id, f"replica-{replica}-{doc_id}", chunks, vectors, [self.blobs[i] for i in rows]
                written += len(chunks)
            replica += 1


def write_in_batches(
    rows: Iterable[tuple[Any, int]], write: Callable[[list[Any]], None], label: str
) -> tuple[float, float, int]:
    """Write (row, its chunk count) pairs in batches of about BATCH_CHUNKS chunks: (seconds generating the rows,
    seconds writing them, chunks written). Both builders time generation apart from the store's writes."""
    generate_s = write_s = 0.0
    batch: list[Any] = []
    held = written = 0
    started = time.perf_counter()
    for row, chunks in rows:
        batch.append(row)
        held += chunks
        if held < BATCH_CHUNKS:
            continue
        generate_s += time.perf_counter() - started
        write_s += _timed(write, batch)
        written += held
        batch, held = [], 0
        print(f"  {label}: {written} chunks written", file=sys.stderr, flush=True)
        started = time.perf_counter()
    generate_s += time.perf_counter() - started
    if batch:
        write_s += _timed(write, batch)
        written += held
    return generate_s, write_s, written


def _timed(write: Callable[[list[Any]], None], batch: list[Any]) -> float:
    started = time.perf_counter()
    write(batch)
    return time.perf_counter() - started


def build_engine(base: Base, spec: str, size: int, seed: int, work_mem: str = "4GB") -> dict[str, Any]:
    """Write a `scale-<size>` collection into the engine through `write_documents`, then build its indexes."""
    from reground.tools.stores.postgres import PostgresStore, engine_uri

    uri = engine_uri(spec)
    name = f"{COLLECTION}-{size}"
    try:
        existing = PostgresStore(uri, name, embedder=base.embedder)
        if existing.count() >= size and existing.indexes_built():
            return {"kept": True, **existing.disk()}
        existing.drop()
    except Exception as exc:  # not there yet
        if "does not exist" not in str(exc):
            raise
    store = PostgresStore(uri, name, embedder=base.embedder, create=True)
    store.drop_indexes()
    documents = ((document, len(document[2])) for document in base.documents(size, seed))
    generate_s, write_s, _ = write_in_batches(documents, store.write_documents, name)
    index_s = store.build_indexes(maintenance_work_mem=work_mem)
    chunks = store.count()
    return {
        "kept": False,
        "chunks": chunks,
        "generate_s": round(generate_s, 1),
        "write_s": round(write_s, 1),
        "ingest_chunks_per_s": round(chunks / max(write_s, 1e-9), 1),
        "index_build_s": round(index_s, 1),
        "maintenance_work_mem": work_mem,
        **store.disk(),
    }


def build_embedded(base: Base, work: Path, size: int, seed: int) -> dict[str, Any]:
    """A `scale` collection of `size` chunks in its own embedded data dir (rows straight into Chroma)."""
    from reground.evals.perf.bench_scale import _write_rows
    from reground.tools.stores.store import PassageStore, generation_for

    data_dir = work / f"embedded-{size}"
    if (data_dir / "built.json").is_file():
        return {"kept": True, **json.loads((data_dir / "built.json").read_text())}
    import shutil

    shutil.rmtree(data_dir, ignore_errors=True)
    store = PassageStore.open(COLLECTION, data_dir=data_dir, embedder=base.embedder, create=True)
    rows = (
        ((doc_id, digest, generation_for(doc_id, digest), list(zip(chunks, vectors, blobs, strict=True))), len(chunks))
        for doc_id, digest, chunks, vectors, blobs in base.documents(size, seed)
    )
    generate_s, write_s, written = write_in_batches(rows, lambda batch: _write_rows(store, batch), f"embedded {size}")
    info = {
        "chunks": written,
        "generate_s": round(generate_s, 1),
        "write_s": round(write_s, 1),
        "ingest_chunks_per_s": round(written / max(write_s, 1e-9), 1),
        "disk_mb": round(sum(f.stat().st_size for f in (data_dir / "chroma").rglob("*") if f.is_file()) / 2**20, 1),
    }
    (data_dir / "built.json").write_text(json.dumps(info))
    return {"kept": False, **info}


# --- measuring (a fresh process per backend and size) -----------------------------------------------


def measure(backend: str, where: str, cases: Path, seed: int) -> dict[str, Any]:
    """Memory and per-turn retrieval latency of one collection, in this process."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.retrieval import case_query
    from reground.tools.adapters.embeddings import load_embedder
    from reground.tools.retrieval.search import HybridRetriever

    before = rss_mb()
    embedder = load_embedder()
    embedder.embed(["warm up"])
    with_model = rss_mb()
    whole_reads = {"n": 0}
    t0 = time.perf_counter()
    if backend == "engine":
        from reground.tools.stores.postgres import PostgresStore, engine_uri

        spec = where.rsplit("#", 1)[0]
        store: Any = PostgresStore(engine_uri(spec), f"{COLLECTION}-{cases_size(where)}", embedder=embedder)
        store = _counting(store, whole_reads)
        search: Any = store
        chunks = store.count()
    else:
        from reground.tools.stores.store import PassageStore

        store = PassageStore.open(COLLECTION, data_dir=where, embedder=embedder)
        search = store
        chunks = store.count()  # loads the snapshot
        store.index._load().bm25()
    load_s = time.perf_counter() - t0
    opened = rss_mb()
    sample = load_cases(cases, limit=WARM_TURNS + TIMED_TURNS, seed=seed)
    queries = [case_query(c, 100, keywords=False) for c in sample]
    warm = HybridRetriever(search)
    for query in queries[:WARM_TURNS]:
        warm.search(query, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
    embed_s = {"t": 0.0}

    class Timed(HybridRetriever):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            started = time.perf_counter()
            try:
                return super().embed(texts)
            finally:
                embed_s["t"] += time.perf_counter() - started

    if backend == "engine":
        store._docs.clear()
    retriever = Timed(search)
    turns, dense, lexical = [], [], []
    for query in queries[WARM_TURNS:]:
        embed_s["t"] = 0.0
        started = time.perf_counter()
        retriever.search(query, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
        turns.append(time.perf_counter() - started - embed_s["t"])
        vector = retriever.embed([query.history_query])[0]
        t1 = time.perf_counter()
        search.dense_search(vector, retriever.settings.chunk_k)
        t2 = time.perf_counter()
        search.lexical_search(query.history_query, retriever.settings.chunk_k)
        t3 = time.perf_counter()
        dense.append(t2 - t1)
        lexical.append(t3 - t2)

    return {
        "chunks": chunks,
        "open_s": round(load_s, 2),
        "rss": {
            "before": round(before),
            "model_loaded": round(with_model),
            "store_opened": round(opened),
            "after_queries": round(rss_mb()),
            "peak": round(peak_rss_mb()),
        },
        "turn": latency_ms(turns),
        "dense_search": latency_ms(dense),
        "lexical_search": latency_ms(lexical),
        "whole_collection_reads": whole_reads["n"],
        "dense_mode": getattr(search, "dense_mode", None) or store.index.dense_mode,
    }


def cases_size(where: str) -> int:
    """The engine measurement passes 'spec#size'."""
    return int(where.rsplit("#", 1)[1]) if "#" in where else 0


def _counting(store: Any, counter: dict[str, int]) -> Any:
    """The store with its whole-collection reads counted (a turn on the engine must make none)."""
    for name in ("load_snapshot", "all_chunks"):
        original = getattr(store, name)

        def wrapped(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            counter["n"] += 1
            return _original(*args, **kwargs)

        setattr(store, name, wrapped)
    return store


def _child(backend: str, where: str, cases: Path, seed: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "reground.evals.perf.scale", "measure", backend, where, "--cases", str(cases)]
    command += ["--seed", str(seed)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=7200)
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {backend} at {where} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- results ------------------------------------------------------------------------------------


def _load(out: Path) -> dict[str, Any]:
    path = out / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {"rows": [], "parity": {}}


def not_run_row(rows: list[dict[str, Any]], size: int = 2_000_000) -> dict[str, Any] | None:
    """The embedded backend at `size`, not run: its app-process memory projected linearly from the two largest sizes
    measured (every process holds the snapshot, BM25 and Chroma's caches; 2,997 MB at 200,000 chunks)."""
    measured = sorted((r for r in rows if r["backend"] == "embedded" and r.get("rss_mb")), key=lambda r: r["chunks"])
    if len(measured) < 2:
        return None
    a, b = measured[-2], measured[-1]
    slope = (b["rss_mb"] - a["rss_mb"]) / (b["chunks"] - a["chunks"])
    load = b["index_build_s"] * size / b["chunks"] if b.get("index_build_s") else None
    return {
        "backend": "embedded",
        "target_chunks": size,
        "chunks": size,
        "rss_mb": None,
        "query_p50_ms": None,
        "query_p95_ms": None,
        "ingest_chunks_per_s": None,
        "disk_mb": None,
        "index_build_s": None,
        "not_run": "every app process would hold the whole collection: projected_rss_mb is about all of this "
        "24 GiB machine's memory, which other jobs share",
        "projected_rss_mb": round(b["rss_mb"] + slope * (size - b["chunks"])),
        "projected_index_load_s": round(load) if load else None,
    }


def _save(out: Path, summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for r in summary["rows"] if not r.get("not_run")]
    projected = not_run_row(rows)
    summary["rows"] = sorted(rows + ([projected] if projected else []), key=lambda r: (r["backend"], r["chunks"]))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def record(out: Path, row: dict[str, Any], details: dict[str, Any]) -> None:
    """Append the run to runs.jsonl and rewrite summary.json's rows from it (`rows_from_runs`)."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**row, "details": details}) + "\n")
    summary = _load(out)
    summary["rows"] = rows_from_runs(out / "runs.jsonl")
    _save(out, summary)


def rows_from_runs(path: Path) -> list[dict[str, Any]]:
    """One row per (backend, size): the latest measurement, with the build numbers of the latest run that built the
    collection (a later run that kept it measures again without rebuilding)."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    built: dict[tuple[str, int], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        run = json.loads(line)
        key = (run["backend"], run["target_chunks"])
        latest[key] = run
        if not run["details"]["built"].get("kept"):
            built[key] = run
    rows = []
    for key, run in latest.items():
        row = {k: v for k, v in run.items() if k != "details"}
        build = built.get(key)
        if build is not None:
            for name in ("ingest_chunks_per_s", "disk_mb"):
                row[name] = build[name]
            if key[0] == "engine":
                row["index_build_s"] = build["index_build_s"]
        rows.append(row)
    return rows


def curve(args: argparse.Namespace) -> None:
    base = Base(args.docs)
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if args.backend == "engine":
            built = build_engine(base, args.engine, size, args.seed, args.maintenance_work_mem)
            measured = _child("engine", f"{args.engine}#{size}", args.cases, args.seed)
        else:
            built = build_embedded(base, args.work, size, args.seed)
            measured = _child("embedded", str(args.work / f"embedded-{size}"), args.cases, args.seed)
        index_build = built.get("index_build_s") if args.backend == "engine" else measured["open_s"]
        row = {
            "backend": args.backend,
            "target_chunks": size,
            "chunks": measured["chunks"],
            "rss_mb": measured["rss"]["after_queries"],
            "query_p50_ms": measured["turn"]["p50_ms"],
            "query_p95_ms": measured["turn"]["p95_ms"],
            "ingest_chunks_per_s": built.get("ingest_chunks_per_s"),
            "disk_mb": built.get("disk_mb"),
            "index_build_s": index_build,
        }
        record(args.out, row, {"built": built, "measured": measured, "started": started})
        print(json.dumps(row), flush=True)


def parity(args: argparse.Namespace) -> None:
    """recall@1 and gold-document-in-passages on every dev case, embedded and engine, same documents."""
    from reground.evals.perf.bench import EVAL_CHUNK_TOKENS
    from reground.evals.runs.retrieval import run_retrieval_eval
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.postgres import PostgresStore, engine_uri

    runs = {}
    base = Base(args.docs)
    engine = PostgresStore(engine_uri(args.engine), "parity-doc2dial", embedder=base.embedder, create=True)
    print(
        f"engine collection: {ingest([args.docs], engine, max_tokens=EVAL_CHUNK_TOKENS, progress=False)}",
        file=sys.stderr,
    )
    work = Path(args.work)
    for name, store in (("embedded", None), ("engine", engine)):
        runs[name] = run_retrieval_eval(
            args.docs,
            args.cases,
            out_dir=work / f"parity-{name}",
            store=store,
            max_tokens=EVAL_CHUNK_TOKENS,
            progress=False,
        )
    emb, eng = runs["embedded"]["systems"], runs["engine"]["systems"]
    # The whole graph without an LLM (evals/runs/passages.py) on every dev case with a gold answer, on both backends.
    graph = {}
    if args.graph:
        from reground.evals.runs.passages import compare_passages

        for name, store in (("embedded", None), ("engine", engine)):
            graph[name] = compare_passages(args.docs, args.cases, store=store)["summary"]
    summary = _load(args.out)
    summary["parity"] = {
        "backend": "engine",
        "cases": runs["engine"]["cases"],
        "recall@1": eng["reground"]["recall@1"],
        "embedded_recall@1": emb["reground"]["recall@1"],
        # the share of cases whose 3 kept passages hold the gold document
        "gold_in_passages": eng["reground_passages"]["recall@3"],
        "embedded_gold_in_passages": emb["reground_passages"]["recall@3"],
        "ms_per_case": {"engine": eng["reground"]["ms_per_case"], "embedded": emb["reground"]["ms_per_case"]},
        **(
            {
                "graph_gold_in_passages": graph["engine"]["gold_doc_in_passages"]["reground"],
                "embedded_graph_gold_in_passages": graph["embedded"]["gold_doc_in_passages"]["reground"],
                "graph_cases": graph["engine"]["cases"],
                "graph_seconds": {"engine": graph["engine"]["seconds"], "embedded": graph["embedded"]["seconds"]},
            }
            if graph
            else {}
        ),
        "systems": {"engine": eng, "embedded": emb},
    }
    _save(args.out, summary)
    print(json.dumps(summary["parity"], indent=2))


# --- an alternative engine, measured for the choice (docs/deployment.md, "Why PostgreSQL") ------------------------


def lancedb_build(base: Base, root: Path, size: int, seed: int) -> dict[str, Any]:
    """The same replicas in an embedded LanceDB table (`pip install 'reground[lancedb]'`): reground's BM25 tokens
    (whitespace-joined, so the FTS index sees the same terms) and the vectors; HNSW (IVF_HNSW_SQ) and native FTS.
    Texts and sentence vectors are not stored: its disk is not comparable with the engine's."""
    import shutil

    import lancedb
    import pyarrow as pa
    from reground.tools.text.lexical import lexical_tokens

    shutil.rmtree(root, ignore_errors=True)
    db = lancedb.connect(str(root))
    table: Any = None
    write_s = 0.0
    columns: dict[str, list[Any]] = {"chunk_id": [], "doc_id": [], "terms": [], "vectors": []}

    def flush() -> None:
        nonlocal table, write_s
        if not columns["chunk_id"]:
            return
        flat = pa.array(np.concatenate(columns["vectors"]).astype(np.float32).ravel())
        dimension = base.vectors.shape[1]
        batch = pa.table(
            {
                "chunk_id": columns["chunk_id"],
                "doc_id": columns["doc_id"],
                "terms": columns["terms"],
                "vector": pa.FixedSizeListArray.from_arrays(flat, dimension),
            }
        )
        started = time.perf_counter()
        if table is None:
            table = db.create_table(COLLECTION, data=batch)
        else:
            table.add(batch)
        write_s += time.perf_counter() - started
        for values in columns.values():
            values.clear()

    for doc_id, _digest, chunks, vectors, _blobs in base.documents(size, seed):
        for chunk in chunks:
            columns["chunk_id"].append(chunk["chunk_id"])
            columns["doc_id"].append(doc_id)
            columns["terms"].append(" ".join(lexical_tokens(f"{chunk['title']} {chunk['section']} {chunk['text']}")))
        columns["vectors"].append(vectors)
        if len(columns["chunk_id"]) >= BATCH_CHUNKS * 5:
            flush()
    flush()
    started = time.perf_counter()
    table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_HNSW_SQ")
    vector_s = time.perf_counter() - started
    started = time.perf_counter()
    table.create_fts_index(
        "terms", base_tokenizer="whitespace", lower_case=False, stem=False, remove_stop_words=False, with_position=False
    )
    fts_s = time.perf_counter() - started
    chunks_written = int(table.count_rows())
    return {
        "chunks": chunks_written,
        "ingest_chunks_per_s": round(chunks_written / max(write_s, 1e-9)),
        "index_build_s": round(vector_s + fts_s, 1),
        "disk_mb": round(sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20),
    }


def lancedb_measure(root: Path, cases: Path, seed: int) -> dict[str, Any]:
    """In this (fresh) process: RSS and one dense (k=150) and one BM25 (k=150) search per dev question."""
    import lancedb
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.retrieval import case_query
    from reground.tools.adapters.embeddings import load_embedder
    from reground.tools.text.lexical import lexical_tokens

    embedder = load_embedder()
    embedder.embed(["warm up"])
    model = rss_mb()
    table = lancedb.connect(str(root)).open_table(COLLECTION)
    opened = rss_mb()
    queries = [case_query(c, 100, keywords=False) for c in load_cases(cases, limit=WARM_TURNS + TIMED_TURNS, seed=seed)]
    vectors = embedder.embed([q.topic_query or q.history_query for q in queries])
    dense, lexical = [], []
    for i, query in enumerate(queries):
        t0 = time.perf_counter()
        nearest: Any = table.search(vectors[i].tolist())
        nearest.distance_type("cosine").limit(150).select(["chunk_id", "doc_id"]).to_list()
        t1 = time.perf_counter()
        text = " ".join(lexical_tokens(query.history_query))
        table.search(text, query_type="fts", fts_columns="terms").limit(150).select(["chunk_id", "doc_id"]).to_list()
        t2 = time.perf_counter()
        if i >= WARM_TURNS:
            dense.append(t1 - t0)
            lexical.append(t2 - t1)

    return {
        "rss": {"model_loaded": round(model), "opened": round(opened), "after_queries": round(rss_mb())},
        "dense_search": latency_ms(dense),
        "lexical_search": latency_ms(lexical),
    }


def lancedb_compare(args: argparse.Namespace) -> None:
    """Build and measure LanceDB at each size; summary.json `alternatives`."""
    base = Base(args.docs)
    summary = _load(args.out)
    found = {(r["engine"], r["chunks_target"]): r for r in summary.get("alternatives", [])}
    for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
        root = args.work / f"lancedb-{size}"
        built = lancedb_build(base, root, size, args.seed)
        command = [
            sys.executable,
            "-m",
            "reground.evals.perf.scale",
            "measure-lancedb",
            str(root),
            "--cases",
            str(args.cases),
        ]
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"measuring LanceDB at {size} failed:\n{proc.stderr[-3000:]}")
        measured = json.loads(proc.stdout.strip().splitlines()[-1])
        found[("lancedb", size)] = {"engine": "lancedb", "chunks_target": size, **built, **measured}
        print(json.dumps(found[("lancedb", size)]), flush=True)
    summary["alternatives"] = list(found.values())
    _save(args.out, summary)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reground.evals.perf.scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("curve", "parity", "lancedb"):
        p = sub.add_parser(name)
        p.add_argument("--docs", type=Path, required=True)
        p.add_argument("--cases", type=Path, required=True)
        p.add_argument("--engine", default="pgserver:/tmp/reground-engine", help="engine store spec")
        p.add_argument("--work", type=Path, default=Path("/tmp/reground-scale"), help="embedded stores, eval outputs")
        p.add_argument("--out", type=Path, default=OUT)
        p.add_argument("--seed", type=int, default=0)
        if name == "curve":
            p.add_argument("--backend", choices=["engine", "embedded"], required=True)
        if name in ("curve", "lancedb"):
            p.add_argument("--sizes", default="20000,200000,2000000")
            p.add_argument("--maintenance-work-mem", default="4GB", help="the engine's memory for building indexes")
        if name == "parity":
            p.add_argument(
                "--graph",
                action="store_true",
                help="also the whole LLM-free graph on every dev case (evals/runs/passages.py)",
            )
    lm = sub.add_parser("measure-lancedb")  # the child process of `lancedb`
    lm.add_argument("root", type=Path)
    lm.add_argument("--cases", type=Path, required=True)
    lm.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("measure")  # the child process of `curve`
    m.add_argument("backend", choices=["engine", "embedded"])
    m.add_argument("where")
    m.add_argument("--cases", type=Path, required=True)
    m.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.command == "measure":
        print(json.dumps(measure(args.backend, args.where, args.cases, args.seed)))
    elif args.command == "measure-lancedb":
        print(json.dumps(lancedb_measure(args.root, args.cases, args.seed)))
    elif args.command == "lancedb":
        args.work.mkdir(parents=True, exist_ok=True)
        lancedb_compare(args)
    elif args.command == "curve":
        args.work.mkdir(parents=True, exist_ok=True)
        curve(args)
    else:
        args.work.mkdir(parents=True, exist_ok=True)
        parity(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
