"""`reground eval retrieval`: document-level recall@k / MRR of the LLM-free stack and two BM25 baselines.

Systems, all over the same ingested collection (chunks of `max_tokens`; a document scores its best chunk):
- `reground`: tools.retrieval.HybridRetriever (question + recent dialogue, BM25 + MiniLM, weighted RRF);
- `bm25_question`: BM25 with the question only;
- `bm25_history`: BM25 with the question plus the last ~100 words of the dialogue;
- `reground_passages`: the documents of the top passages after paragraph scoring and fusion rerank
  (what the answer step sees), so "gold document in the top 3 passages" is recall@3 there.

Passage quality beside document recall: `span_recall` is the share of the gold span's content words found in
the best of the kept passages; `span_hit` counts cases where it reaches 0.5 (the right paragraph, not only
the right document). Both are reported for `reground_passages`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reground.evals.datasets import Case, load_cases
from reground.evals.ranking import DEFAULT_KS, first_relevant_rank, metrics_from_ranks
from reground.tools.retrieval import (
    HybridRetriever,
    RetrievalQuery,
    RetrievalSettings,
    content_terms,
    fuse_rerank,
    history_query,
)

if TYPE_CHECKING:
    from reground.tools.retrieval import SearchStore

SPAN_HIT = 0.5  # a case's span counts as found when half its content words are in one kept passage
RANK_DEPTH = 20  # documents kept per ranking (MRR counts a gold document below this as 0)
BASELINE_HISTORY_WORDS = 100
SYSTEMS = ("reground", "bm25_question", "bm25_history", "reground_passages")


def last_words(history: Sequence[dict[str, str]] | Sequence[Any], n: int) -> str:
    """The last n words of the dialogue (the BM25 baseline's history window)."""
    words = " ".join(t["text"] for t in history).split()
    return " ".join(words[-n:]) if n > 0 else ""


def _best_docs(hits: Sequence[tuple[dict[str, Any], float]], depth: int) -> list[str]:
    docs: list[str] = []
    for chunk, _ in hits:  # hits come best first
        if chunk["doc_id"] not in docs:
            docs.append(chunk["doc_id"])
            if len(docs) == depth:
                break
    return docs


def span_recall(span: str, passages: Sequence[str]) -> float | None:
    """Share of the span's content words (stopwords removed) found in the best single passage; None without a span."""
    wanted = set(content_terms(span))
    if not wanted:
        return None
    return max((len(wanted & set(content_terms(p))) / len(wanted) for p in passages), default=0.0)


def collection_name(docs_path: Path, max_tokens: int) -> str:
    """One collection per corpus content and chunk size, so reruns reuse it and changes never mix."""
    digest = hashlib.sha1(docs_path.read_bytes()).hexdigest()[:10]
    stem = re.sub(r"[^a-zA-Z0-9_-]+", "-", docs_path.stem)[:40] or "docs"
    return f"eval-{stem}-{digest}-t{max_tokens}"


def open_eval_store(
    docs_path: Path, *, data_dir: str | Path | None, max_tokens: int, embedding: str = ""
) -> SearchStore:
    """The collection of docs_path chunked at max_tokens, ingested once (ingest is idempotent)."""
    from reground.tools.embeddings import load_embedder
    from reground.tools.ingest import ingest
    from reground.tools.store import PassageStore

    name = collection_name(docs_path, max_tokens)
    embedder = load_embedder(embedding) if embedding else load_embedder()
    store = PassageStore.open(name, data_dir=str(data_dir) if data_dir else None, embedder=embedder, create=True)
    summary = ingest([docs_path], store, max_tokens=max_tokens, progress=True)
    print(f"collection {name}: {summary}", file=sys.stderr)
    return store


def case_query(case: Case, budget_tokens: int, *, keywords: bool) -> RetrievalQuery:
    """What the graph's retrieve node builds for this turn when no LLM rewrites the question."""
    hq = history_query(case.question, case.history, budget_tokens)
    kws: tuple[str, ...] = ()
    if keywords:
        from reground.tools.keywords import lexical_keywords

        recent = " ".join(t["text"] for t in case.history[-2:])
        kws = tuple(lexical_keywords(case.question, case.question, recent))
    return RetrievalQuery(question=case.question, history_query=hq, keywords=kws)


def run_retrieval_eval(
    docs_path: str | Path,
    cases_path: str | Path,
    *,
    limit: int | None = None,
    seed: int | None = None,
    out_dir: str | Path,
    data_dir: str | Path | None = None,
    max_tokens: int = 160,
    history_token_budget: int = 100,
    settings: RetrievalSettings | None = None,
    keywords: bool = False,
    top_n: int = 3,
    doc_k: int = 8,
    paragraph_k: int = 8,
    store: SearchStore | None = None,
    progress: bool = True,
    embedding: str = "",
) -> dict[str, Any]:
    """Rank documents for every case with each system; write summary.json and cases.jsonl into out_dir."""
    from tqdm import tqdm

    docs_path, out = Path(docs_path), Path(out_dir)
    if not docs_path.is_file():
        raise FileNotFoundError(f"documents file not found: {docs_path} (pass --docs PATH/docs.jsonl)")
    cases = load_cases(cases_path, limit=limit, seed=seed)
    kept = [c for c in cases if c.gold_doc_in_corpus and c.gold_doc_id]
    store = store or open_eval_store(docs_path, data_dir=data_dir, max_tokens=max_tokens, embedding=embedding)
    retriever = HybridRetriever(store, settings)
    out.mkdir(parents=True, exist_ok=True)
    ranks: dict[str, list[int | None]] = {s: [] for s in SYSTEMS}
    seconds: dict[str, float] = dict.fromkeys(SYSTEMS, 0.0)
    span_recalls: list[float] = []
    started = time.perf_counter()
    with (out / "cases.jsonl").open("w", encoding="utf-8") as fh:
        for case in tqdm(kept, desc="retrieval eval", unit="case", disable=not progress):
            rankings: dict[str, list[str]] = {}
            query = case_query(case, history_token_budget, keywords=keywords)
            t0 = time.perf_counter()
            rankings["reground"] = [d for d, _ in retriever.rank_documents(query, where=None, k=RANK_DEPTH)]
            t1 = time.perf_counter()
            candidates = retriever.search(query, where=None, doc_k=doc_k, paragraph_k=paragraph_k)
            passages = fuse_rerank(candidates, top_n, retriever.settings.same_document_penalty)
            rankings["reground_passages"] = list(dict.fromkeys(p["doc_id"] for p in passages))
            recall = span_recall(case.gold_span, [p["text"] for p in passages])
            t2 = time.perf_counter()
            hits = store.lexical_search(case.question, 10 * RANK_DEPTH, where=None)
            rankings["bm25_question"] = _best_docs(hits, RANK_DEPTH)
            t3 = time.perf_counter()
            text = f"{case.question} {last_words(case.history, BASELINE_HISTORY_WORDS)}".strip()
            rankings["bm25_history"] = _best_docs(store.lexical_search(text, 10 * RANK_DEPTH), RANK_DEPTH)
            t4 = time.perf_counter()
            for name, dt in zip(SYSTEMS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                seconds[name] += dt
            row: dict[str, Any] = {
                "case_id": case.case_id,
                "dial_id": case.dial_id,
                "followup": case.is_followup,
                "gold_doc_id": case.gold_doc_id,
                "query": query.history_query,
            }
            for name in SYSTEMS:
                rank = first_relevant_rank(rankings[name], case.gold_doc_ids or case.gold_doc_id)
                ranks[name].append(rank)
                row[f"{name}_rank"] = rank
            row["reground_top5"] = rankings["reground"][:5]
            row["passage_chunks"] = [p["chunk_id"] for p in passages]
            if recall is not None:
                span_recalls.append(recall)
                row["span_recall"] = round(recall, 4)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    n = len(kept)
    followups = [i for i, c in enumerate(kept) if c.is_followup]
    summary: dict[str, Any] = {
        "systems": {
            name: {
                **{k: round(v, 4) for k, v in metrics_from_ranks(ranks[name], DEFAULT_KS).items()},
                "ms_per_case": round(1000 * seconds[name] / max(n, 1), 2),
            }
            for name in SYSTEMS
        },
        "followups": {
            name: {k: round(v, 4) for k, v in metrics_from_ranks([ranks[name][i] for i in followups]).items()}
            for name in SYSTEMS
        },
        "passage_span": {
            "cases_with_span": len(span_recalls),
            "span_recall": round(sum(span_recalls) / max(len(span_recalls), 1), 4),
            f"span_hit@{SPAN_HIT}": round(sum(r >= SPAN_HIT for r in span_recalls) / max(len(span_recalls), 1), 4),
        },
        "cases": n,
        "followup_cases": len(followups),
        "excluded_gold_doc_not_in_corpus": len(cases) - n,
        "docs": str(docs_path),
        "cases_path": str(cases_path),
        "limit": limit,
        "seed": seed,
        "max_tokens": max_tokens,
        "history_token_budget": history_token_budget,
        "baseline_history_words": BASELINE_HISTORY_WORDS,
        "keywords": keywords,
        "embedding": store.embedder.name,
        "settings": _settings_dict(retriever.settings),
        "rank_depth": RANK_DEPTH,
        "top_n_passages": top_n,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _settings_dict(settings: RetrievalSettings) -> dict[str, Any]:
    return {
        "chunk_k": settings.chunk_k,
        "rrf_k": settings.rrf_k,
        "weights": dict(settings.weights),
        "keyword_weight": settings.keyword_weight,
        "lexical_paragraph_weight": settings.lexical_paragraph_weight,
        "doc_prior_weight": settings.doc_prior_weight,
        "history_paragraph_weight": settings.history_paragraph_weight,
        "same_document_penalty": settings.same_document_penalty,
    }


def format_summary(summary: dict[str, Any]) -> str:
    ks = [f"recall@{k}" for k in DEFAULT_KS]
    lines = [f"{'system':<20}" + "".join(f"{k:>11}" for k in [*ks, "mrr"]) + f"{'ms/case':>10}"]
    for name, m in summary["systems"].items():
        lines.append(f"{name:<20}" + "".join(f"{m[k]:>11.3f}" for k in [*ks, "mrr"]) + f"{m['ms_per_case']:>10.1f}")
    span = summary.get("passage_span")
    if span:
        lines.append(
            f"kept passages: gold span recall {span['span_recall']:.3f}, span found (>= {SPAN_HIT}) "
            f"{span[f'span_hit@{SPAN_HIT}']:.3f} over {span['cases_with_span']} cases"
        )
    lines.append(
        f"{summary['cases']} cases ({summary['followup_cases']} follow-ups), "
        f"{summary['excluded_gold_doc_not_in_corpus']} excluded (gold document not in the corpus)"
    )
    return "\n".join(lines)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog="reground eval retrieval",
        description="Document-level retrieval recall of reground and BM25 baselines.",
    )
    parser.add_argument("--docs", required=True, help="documents .jsonl (doc_id, title, text, ...)")
    parser.add_argument("--cases", required=True, help="cases .jsonl (doc2dial case schema)")
    parser.add_argument("--limit", type=int, default=None, help="first N cases only")
    parser.add_argument("--seed", type=int, default=None, help="with --limit: a seeded sample, not the first N")
    parser.add_argument("--out", required=True, help="output directory (summary.json, cases.jsonl)")
    parser.add_argument("--data-dir", default=None, help="store directory (default: reground's data dir)")
    parser.add_argument("--max-tokens", type=int, default=160, help="chunk size used when ingesting the docs")
    parser.add_argument("--history-tokens", type=int, default=100, help="dialogue tokens added to the query")
    parser.add_argument("--keywords", action="store_true", help="add lexical keywords to the reground query")
    parser.add_argument(
        "--embedding", default="", help="embedding spec, e.g. local:multilingual-e5-small (default: MiniLM)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    summary = run_retrieval_eval(
        args.docs,
        args.cases,
        limit=args.limit,
        seed=args.seed,
        out_dir=args.out,
        data_dir=args.data_dir,
        max_tokens=args.max_tokens,
        history_token_budget=args.history_tokens,
        keywords=args.keywords,
        embedding=args.embedding,
    )
    print(format_summary(summary))
    print(f"wrote {Path(args.out) / 'summary.json'} and cases.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
