"""The scale curve: per-turn retrieval latency and resident memory at ~2k, 20k and 200k chunks, dense search exact
(every vector in memory) or through Chroma's own HNSW index.

    .venv/bin/python -m reground.evals.perf.bench_scale --docs ../shared/data/doc2dial/docs.jsonl \
        --cases ../shared/data/doc2dial/cases_dev.jsonl --sizes 2218,20000,200000

The collections are generated here and thrown away: the doc2dial collection (2,218 chunks, MiniLM) replicated
with new document ids and perturbed words (a seeded share of each chunk's words replaced by other corpus words,
so BM25 sees different texts) and perturbed vectors (the original plus Gaussian noise, re-normalised: embedding
200,000 chunks would take about 1.5 hours on 2 cores). Replica rows are written straight into Chroma in large
batches with the store's own row and manifest format (the benchmark measures reading, not ingest).

Each (size, mode) is measured in a fresh process: resident memory (VmRSS) before opening the store, after the
search index has loaded, and after the queries; the index's load time; `HybridRetriever.search` (what a turn's
retrieve node runs: hybrid document search, then paragraph scoring) over dev questions, and one dense search
alone, with the questions' vectors embedded beforehand (a turn's query embedding is measured by `bench ingest`).
The HNSW runs also report how many of the exact run's top-10 documents they return (recall@10 of the approximate
search against the exact one). Results merge into evals/results/bench.json under `scale`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.evals.perf.bench import DEFAULT_OUT, EVAL_CHUNK_TOKENS, _merge, _stats_ms
from reground.tools.tuning.turn import BUDGETS

COLLECTION = "scale"
NOISE = 0.35  # vector noise (per-dimension sigma x sqrt(dim)): replicas sit at cosine ~0.94 of their original
WORD_SHARE = 0.2  # share of a replica chunk's words replaced
WRITE_BATCH = 2000


def rss_mb() -> float:
    """Resident memory of this process now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(docs: Path, work: Path, sizes: Sequence[int], seed: int) -> dict[int, Path]:
    """One data dir per size: the real collection, then perturbed replicas up to the size."""
    import numpy as np
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore, generation_for
    from reground.tools.stores.vector_store import sentence_vectors_text

    base = PassageStore.open(COLLECTION, data_dir=work / "base", create=True)
    ingest([docs], base, max_tokens=EVAL_CHUNK_TOKENS, progress=False)
    snapshot = base.load_snapshot()
    blobs = base.sentence_vectors_of(snapshot.row_ids)
    vocabulary = sorted({w for c in snapshot.chunks for w in c["text"].split() if w.isalpha() and len(w) > 3})
    by_doc: dict[str, list[int]] = {}
    for i, chunk in enumerate(snapshot.chunks):
        by_doc.setdefault(chunk["doc_id"], []).append(i)
    out: dict[int, Path] = {}
    for size in sizes:
        rng = random.Random(seed)
        noise = np.random.default_rng(seed)
        data_dir = work / f"n{size}"
        out[size] = data_dir
        if (data_dir / "built").is_file():  # kept from an earlier run (--keep)
            continue
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.copytree(work / "base", data_dir)  # replica 0: the real collection
        store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
        written, replica = len(snapshot.chunks), 0
        rows: list[tuple[str, str, Any, list[Any]]] = []  # (doc_id, hash, generation, [(chunk, vector, blob)])
        while written < size:
            replica += 1
            for doc_id, positions in by_doc.items():
                if written >= size:
                    break
                new_id = f"{doc_id}~r{replica}"
                digest = f"replica-{replica}-{doc_id}"
                generation = generation_for(new_id, digest)
                items = []
                for i in positions:
                    chunk = dict(snapshot.chunks[i])
                    words = chunk["text"].split()
                    for w in range(len(words)):
                        if rng.random() < WORD_SHARE:
                            words[w] = rng.choice(vocabulary)
                    chunk.update(doc_id=new_id, chunk_id=f"{chunk['chunk_id']}r{replica}", text=" ".join(words))
                    vector = snapshot.vectors[i] + noise.normal(0, NOISE / np.sqrt(snapshot.vectors.shape[1]), 384)
                    items.append((chunk, vector / np.linalg.norm(vector), blobs[i]))
                rows.append((new_id, digest, generation, items))
                written += len(items)
            _write_rows(store, rows)
            rows = []
        (data_dir / "built").write_text(f"{written}\n")
        print(f"built {size}: {written} chunks in {data_dir}", file=sys.stderr)
    _ = sentence_vectors_text  # the row format: see _write_rows
    return out


def _write_rows(store: Any, documents: list[tuple[str, str, str, list[Any]]]) -> None:
    """Replica documents straight into Chroma in big batches, in the store's row and manifest format (the store's
    own `write_embedded` does six round trips per document: ~25,000 documents would take longer than the rest)."""
    import time as clock

    from reground.tools.stores.store import SENTENCE_VECTORS_KEY
    from reground.tools.stores.vector_store import sentence_vectors_text

    ids, texts, metadatas, vectors = [], [], [], []
    now = clock.time()
    for _doc_id, _digest, generation, items in documents:
        for chunk, vector, blob in items:
            meta = store._chunk_metadata(chunk, generation, now)
            if blob:
                meta[SENTENCE_VECTORS_KEY] = sentence_vectors_text(blob)
            ids.append(f"{chunk['chunk_id']}:{generation}")
            texts.append(chunk["text"])
            metadatas.append(meta)
            vectors.append([float(x) for x in vector])
    for start in range(0, len(ids), WRITE_BATCH):
        end = start + WRITE_BATCH
        store._chunks.add(
            ids=ids[start:end],
            documents=texts[start:end],
            metadatas=metadatas[start:end],
            embeddings=vectors[start:end],
        )
    records = [(d, {"hash": h, "generation": g, "chunks": len(items)}) for d, h, g, items in documents]
    for start in range(0, len(records), WRITE_BATCH):
        part = records[start : start + WRITE_BATCH]
        store._manifest.upsert(
            ids=[d for d, _ in part],
            documents=[d for d, _ in part],
            metadatas=[m for _, m in part],
            embeddings=[[0.0]] * len(part),
        )
    store._bump_version()


def measure(data_dir: Path, cases: Path, mode: str, queries: int, seed: int) -> dict[str, Any]:
    """In this (fresh) process: memory, load time and per-turn retrieval latency of one collection and mode."""
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.retrieval import case_query
    from reground.tools.retrieval.search import HybridRetriever
    from reground.tools.stores.search_index import IndexSettings
    from reground.tools.stores.store import PassageStore

    before_open = rss_mb()
    store = PassageStore.open(COLLECTION, data_dir=data_dir, index=IndexSettings(dense=mode))
    embedder = store.embedder
    embedder.embed(["warm up"])
    with_model = rss_mb()
    started = time.perf_counter()
    chunks = store.count()  # loads the snapshot (and, exact, every vector)
    store.index._load().bm25()
    load_s = time.perf_counter() - started
    loaded = rss_mb()
    sample = load_cases(cases, limit=queries, seed=seed)
    built = [case_query(c, 100, keywords=False) for c in sample]
    retriever = HybridRetriever(store)
    for query in built:  # embeds each question once (cached): the timed pass measures search only
        retriever.search(query, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
    search_s, dense_s, tops = [], [], []
    for query in built:
        t0 = time.perf_counter()
        retriever.search(query, where=None, doc_k=BUDGETS.doc_candidates, paragraph_k=BUDGETS.paragraph_candidates)
        t1 = time.perf_counter()
        hits = store.dense_search(retriever.embed([query.history_query])[0], retriever.settings.chunk_k)
        t2 = time.perf_counter()
        search_s.append(t1 - t0)
        dense_s.append(t2 - t1)
        tops.append(list(dict.fromkeys(c["doc_id"] for c, _ in hits))[:10])
    return {
        "chunks": chunks,
        "mode": store.index.dense_mode,
        "index_load_s": round(load_s, 2),
        "rss_mb": {
            "before_open": round(before_open),
            "with_model": round(with_model),
            "index_loaded": round(loaded),
            "after_queries": round(rss_mb()),
        },
        "turn_retrieval": _stats_ms(search_s),
        "dense_search": _stats_ms(dense_s),
        "top_docs": tops,
    }


def _source(doc_id: str) -> str:
    """The doc2dial document a replica was made from."""
    return doc_id.split("~r", 1)[0]


def _child(data_dir: Path, cases: Path, mode: str, queries: int, seed: int) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "reground.evals.perf.bench_scale",
        "--measure",
        str(data_dir),
        "--cases",
        str(cases),
        "--mode",
        mode,
        "--queries",
        str(queries),
        "--seed",
        str(seed),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {data_dir} ({mode}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(docs: Path, cases: Path, sizes: Sequence[int], queries: int, seed: int, keep: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="reground-scale-") as tmp:
        work = keep or Path(tmp)
        dirs = build(docs, work, sizes, seed)
        rows = []
        for size in sizes:
            exact = _child(dirs[size], cases, "exact", queries, seed)
            hnsw = _child(dirs[size], cases, "hnsw", queries, seed)
            pairs = list(zip(exact.pop("top_docs"), hnsw.pop("top_docs"), strict=True))
            overlap = [len(set(a) & set(b)) / max(1, len(a)) for a, b in pairs]
            hnsw["dense_recall_at_10_vs_exact"] = round(statistics.mean(overlap), 4)
            # Replicas of one document are near-duplicates (cosine ~0.94): count the document they were made from.
            sources = [({_source(d) for d in a}, {_source(d) for d in b}) for a, b in pairs]
            hnsw["source_recall_at_10_vs_exact"] = round(
                statistics.mean(len(a & b) / max(1, len(a)) for a, b in sources), 4
            )
            hnsw["top1_same_source_as_exact"] = round(
                statistics.mean(float(bool(a) and bool(b) and _source(a[0]) == _source(b[0])) for a, b in pairs), 4
            )
            rows.append({"target_chunks": size, "exact": exact, "hnsw": hnsw})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return {
        "sizes": rows,
        "queries": queries,
        "seed": seed,
        "replicas": {"word_share_replaced": WORD_SHARE, "vector_noise": NOISE},
        "note": "2-core machine shared with an LLM server and other jobs: absolute timings are noisy",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, help="documents .jsonl (the collection replicated)")
    parser.add_argument("--cases", type=Path, required=True, help="cases .jsonl (the questions searched)")
    parser.add_argument("--sizes", default="2218,20000,200000", help="collection sizes in chunks")
    parser.add_argument("--queries", type=int, default=50, help="questions per measurement (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="build the collections here and keep them")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--mode", default="exact", choices=["exact", "hnsw"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.cases, args.mode, args.queries, args.seed)))
        return 0
    if args.docs is None:
        parser.error("--docs is required")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1:
        parser.error("--sizes needs positive chunk counts, e.g. 2218,20000,200000")
    result = run(args.docs, args.cases, sizes, args.queries, args.seed, args.keep)
    _merge(args.out, "scale", result)
    print(json.dumps({"scale": result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
