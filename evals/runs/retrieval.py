"""`reground eval retrieval`: document-level recall@k / MRR of the LLM-free stack and two BM25 baselines.

Systems, all over the same ingested collection (chunks of `max_tokens`; a document scores its best chunk):
- `reground`: tools.retrieval.search.HybridRetriever (question + recent dialogue, BM25 + MiniLM, weighted RRF);
- `bm25_question`: BM25 with the question only;
- `bm25_history`: BM25 with the question plus the last ~100 words of the dialogue;
- `reground_passages`: the documents of the top passages after paragraph scoring and the graph's default rerank
  (`sentence_rerank`: what the answer step sees), so "gold document in the top 3 passages" is recall@3 there.

Passage quality beside document recall: `span_recall` is the share of the gold span's content words found in
the best of the kept passages; `span_hit` counts cases where it reaches 0.5 (the right paragraph, not only
the right document). Both are reported for `reground_passages`.

Query transforms (`--transform hyde|topics|multi_query --model SPEC`): the model writes each case's texts (one
structured call, as the graph's retrieve node makes it with the refiner model) and `reground` and
`reground_passages` search with them; the texts, the call's seconds and failures are recorded per case, and
`--expansions-from RUN/cases.jsonl` reuses a run's texts without calling a model. Cases that name a `collection`
(MTRAG-UN) retrieve only from it unless `--no-case-scope`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace as dataclasses_replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reground.evals.data.datasets import Case, load_cases, load_corpus
from reground.evals.ranking import DEFAULT_KS, first_relevant_rank, metrics_from_ranks
from reground.tools.retrieval.search import (
    HybridRetriever,
    RetrievalQuery,
    RetrievalSettings,
    content_terms,
    conversation_query,
    sentence_rerank,
)
from reground.tools.signals.evidence import best_sentence_cosines
from reground.tools.tuning.models import CHAT
from reground.tools.tuning.retrieval import TRANSFORMS

if TYPE_CHECKING:
    from reground.tools.retrieval.search import SearchStore

NEAR_DUPLICATE_DISTANCE = 100  # Levenshtein distance under which two documents count as one (near_duplicates)
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


def near_duplicates(docs_path: Path, max_distance: int = 100) -> dict[str, set[str]]:
    """{doc_id: the other documents whose text is within Levenshtein distance max_distance of it} (the HR chatbot
    paper's tolerance: doc2dial holds 24 such pairs, versions of a page that differ only in its heading, so a
    ranking cannot tell them apart). Texts whose lengths differ by more than the distance are never compared."""
    from rapidfuzz.distance import Levenshtein

    docs = sorted(((d["doc_id"], d["text"]) for d in load_corpus(docs_path)), key=lambda d: len(d[1]))
    twins: dict[str, set[str]] = {}
    for i, (doc_a, text_a) in enumerate(docs):
        for doc_b, text_b in docs[i + 1 :]:
            if len(text_b) - len(text_a) > max_distance:
                break
            if Levenshtein.distance(text_a, text_b, score_cutoff=max_distance) <= max_distance:
                twins.setdefault(doc_a, set()).add(doc_b)
                twins.setdefault(doc_b, set()).add(doc_a)
    return twins


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
    from reground.tools.adapters.embeddings import load_embedder
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    name = collection_name(docs_path, max_tokens)
    embedder = load_embedder(embedding) if embedding else load_embedder()
    store = PassageStore.open(name, data_dir=str(data_dir) if data_dir else None, embedder=embedder, create=True)
    summary = ingest([docs_path], store, max_tokens=max_tokens, progress=True)
    print(f"collection {name}: {summary}", file=sys.stderr)
    return store


def case_query(case: Case, budget_tokens: int, *, keywords: bool, phrase_tokens: int = 400) -> RetrievalQuery:
    """What the graph's retrieve node builds for this turn when no LLM rewrites the question."""
    kws: tuple[str, ...] = ()
    if keywords:
        from reground.tools.retrieval.keywords import lexical_keywords

        recent = " ".join(t["text"] for t in case.history[-2:])
        kws = tuple(lexical_keywords(case.question, case.question, recent))
    return conversation_query(case.question, case.history, budget_tokens, keywords=kws, phrase_tokens=phrase_tokens)


def parse_setting(text: str) -> tuple[str, Any]:
    """`field=value` (value as JSON, else a string) of a RetrievalSettings field; ValueError naming bad ones."""
    import dataclasses

    name, sep, raw = text.partition("=")
    known = [f.name for f in dataclasses.fields(RetrievalSettings)]
    if not sep or name not in known:
        raise ValueError(f"bad --set {text!r}: use FIELD=VALUE with FIELD one of {', '.join(known)}")
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return name, value


def settings_with(overrides: Sequence[str], base: RetrievalSettings | None = None) -> RetrievalSettings:
    """RetrievalSettings with `field=value` overrides applied (a `weights` value merges into the defaults)."""
    import dataclasses

    base = base or RetrievalSettings()
    changes: dict[str, Any] = {}
    for text in overrides:
        name, value = parse_setting(text)
        if name == "weights":
            if not isinstance(value, dict):
                raise ValueError(f"bad --set {text!r}: weights takes a JSON object of signal weights")
            value = {**dict(base.weights), **changes.get("weights", {}), **value}
        changes[name] = value
    return dataclasses.replace(base, **changes)


def load_expansions(path: str | Path) -> dict[str, list[str]]:
    """{case_id: expansions} from an earlier run's cases.jsonl (to measure other weights without model calls)."""
    found: dict[str, list[str]] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if "expansions" in row:
                found[str(row["case_id"])] = list(row["expansions"])
    if not found:
        raise ValueError(f"{path} holds no case with 'expansions' (write it with --transform and --model)")
    return found


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
    model: str | None = None,
    chat_model: Any = None,
    expansions_from: str | Path | None = None,
    case_scope: bool = True,
) -> dict[str, Any]:
    """Rank documents for every case with each system; write summary.json and cases.jsonl into out_dir.

    With `settings.query_transform` set, each case's texts come from `chat_model` (or the model `model` names),
    or from `expansions_from`, an earlier run's cases.jsonl."""
    from tqdm import tqdm

    docs_path, out = Path(docs_path), Path(out_dir)
    if not docs_path.is_file():
        raise FileNotFoundError(f"documents file not found: {docs_path} (pass --docs PATH/docs.jsonl)")
    cases = load_cases(cases_path, limit=limit, seed=seed)
    kept = [c for c in cases if c.gold_doc_in_corpus and c.gold_doc_id]
    store = store or open_eval_store(docs_path, data_dir=data_dir, max_tokens=max_tokens, embedding=embedding)
    retriever = HybridRetriever(store, settings)
    transform = retriever.settings.query_transform
    writer = _ExpansionWriter(transform, model, chat_model, expansions_from, retriever.settings)
    out.mkdir(parents=True, exist_ok=True)
    ranks: dict[str, list[int | None]] = {s: [] for s in SYSTEMS}
    seconds: dict[str, float] = dict.fromkeys(SYSTEMS, 0.0)
    span_recalls: list[float] = []
    twins = near_duplicates(docs_path, NEAR_DUPLICATE_DISTANCE)
    near_hits: dict[str, int] = dict.fromkeys(SYSTEMS, 0)
    started = time.perf_counter()
    with (out / "cases.jsonl").open("w", encoding="utf-8") as fh:
        for case in tqdm(kept, desc="retrieval eval", unit="case", disable=not progress):
            rankings: dict[str, list[str]] = {}
            query = case_query(
                case, history_token_budget, keywords=keywords, phrase_tokens=retriever.settings.phrase_history_tokens
            )
            where = {"collection": case.collection} if case_scope and case.collection else None
            t_llm = time.perf_counter()
            query = writer.expand(case, query)
            t0 = time.perf_counter()
            seconds["transform"] = seconds.get("transform", 0.0) + t0 - t_llm
            rankings["reground"] = [d for d, _ in retriever.rank_documents(query, where=where, k=RANK_DEPTH)]
            t1 = time.perf_counter()
            candidates = retriever.search(query, where=where, doc_k=doc_k, paragraph_k=paragraph_k)
            cosines = best_sentence_cosines(retriever.embed, query.question, candidates)
            passages = sentence_rerank(
                candidates,
                cosines,
                top_n,
                retriever.settings.sentence_rerank_weight,
                retriever.settings.same_document_penalty,
            )
            rankings["reground_passages"] = list(dict.fromkeys(p["doc_id"] for p in passages))
            recall = span_recall(case.gold_span, [p["text"] for p in passages])
            t2 = time.perf_counter()
            hits = store.lexical_search(case.question, 10 * RANK_DEPTH, where=where)
            rankings["bm25_question"] = _best_docs(hits, RANK_DEPTH)
            t3 = time.perf_counter()
            text = f"{case.question} {last_words(case.history, BASELINE_HISTORY_WORDS)}".strip()
            rankings["bm25_history"] = _best_docs(store.lexical_search(text, 10 * RANK_DEPTH, where=where), RANK_DEPTH)
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
            if transform != "none":
                row["expansions"] = list(query.expansions)
                row["transform_seconds"] = round(t0 - t_llm, 3)
            if where:
                row["collection"] = case.collection
            golds = case.gold_doc_ids or [case.gold_doc_id]
            tolerant = {d for g in golds for d in (g, *twins.get(g, ()))}
            for name in SYSTEMS:
                rank = first_relevant_rank(rankings[name], case.gold_doc_ids or case.gold_doc_id)
                ranks[name].append(rank)
                row[f"{name}_rank"] = rank
                near_hits[name] += bool(rankings[name]) and rankings[name][0] in tolerant
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
        "near_duplicate_recall@1": {
            "max_levenshtein": NEAR_DUPLICATE_DISTANCE,
            "duplicate_pairs": sum(len(v) for v in twins.values()) // 2,
            **{name: round(near_hits[name] / max(n, 1), 4) for name in SYSTEMS},
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
        "case_scope": "collection" if case_scope and any(c.collection for c in kept) else None,
    }
    if transform != "none":
        reground_s = seconds["reground"] + seconds["reground_passages"]
        summary["transform"] = {
            "name": transform,
            "model": writer.source,
            "llm_calls": writer.stats.llm_calls,
            "failed": writer.failed,
            "completion_tokens": writer.stats.completion_tokens,
            "transform_s_per_case": round(seconds["transform"] / max(n, 1), 3),
            "retrieval_s_per_case": round(reground_s / max(n, 1), 3),
            "s_per_query": round((seconds["transform"] + reground_s) / max(n, 1), 3),
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _settings_dict(settings: RetrievalSettings) -> dict[str, Any]:
    import dataclasses

    return {f.name: _plain(getattr(settings, f.name)) for f in dataclasses.fields(settings)}


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


class _ExpansionWriter:
    """Each case's query-transform texts: from a model (one structured call), or from an earlier run."""

    def __init__(
        self,
        transform: str,
        model: str | None,
        chat_model: Any,
        expansions_from: str | Path | None,
        settings: RetrievalSettings,
    ) -> None:
        from reground.tools.adapters.chat import CallStats

        self.transform, self.settings, self.failed = transform, settings, 0
        self.stats = CallStats()
        self.known = load_expansions(expansions_from) if expansions_from else None
        self.model = chat_model
        self.source = f"from {expansions_from}" if expansions_from else (model or "the given chat model")
        if transform == "none" or self.known is not None or chat_model is not None:
            return
        if not model:
            raise ValueError(f"--transform {transform} needs --model SPEC (e.g. local:default) or --expansions-from")
        from reground.tools.adapters.llm import ensure_reachable, load_chat_model

        ensure_reachable(model)
        self.model = load_chat_model(model, temperature=0.0, timeout_s=CHAT.timeout_s)

    def expand(self, case: Case, query: RetrievalQuery) -> RetrievalQuery:
        if self.transform == "none":
            return query
        if self.known is not None:
            if case.case_id not in self.known:
                raise ValueError(f"case {case.case_id} has no expansions in the --expansions-from run")
            return dataclasses_replace(query, expansions=tuple(self.known[case.case_id]))
        from reground.tools.adapters.chat import LLMReplyError
        from reground.tools.retrieval.query_transforms import transform_query

        try:
            texts = transform_query(
                self.model,
                self.transform,
                query.question,
                case.history,
                self.stats,
                history_tokens=self.settings.transform_history_tokens,
                max_tokens=self.settings.transform_max_tokens,
            )
        except LLMReplyError:
            self.failed += 1
            texts = ()
        return dataclasses_replace(query, expansions=texts)


def format_summary(summary: dict[str, Any]) -> str:
    ks = [f"recall@{k}" for k in DEFAULT_KS]
    lines = [f"{'system':<20}" + "".join(f"{k:>11}" for k in [*ks, "mrr"]) + f"{'ms/case':>10}"]
    for name, m in summary["systems"].items():
        lines.append(f"{name:<20}" + "".join(f"{m[k]:>11.3f}" for k in [*ks, "mrr"]) + f"{m['ms_per_case']:>10.1f}")
    near = summary.get("near_duplicate_recall@1")
    if near:
        lines.append(
            f"recall@1 counting near-duplicate documents as one (Levenshtein <= {near['max_levenshtein']}, "
            f"{near['duplicate_pairs']} pairs): "
            + ", ".join(f"{name} {near[name]:.3f}" for name in SYSTEMS if name in near)
        )
    span = summary.get("passage_span")
    if span and span.get("cases_with_span"):
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
    parser.add_argument("--limit", type=int, default=None, help="first N cases only (0 = all)")
    parser.add_argument("--seed", type=int, default=None, help="with --limit: a seeded sample, not the first N")
    parser.add_argument("--out", required=True, help="output directory (summary.json, cases.jsonl)")
    parser.add_argument("--data-dir", default=None, help="store directory (default: reground's data dir)")
    parser.add_argument("--max-tokens", type=int, default=160, help="chunk size used when ingesting the docs")
    parser.add_argument("--history-tokens", type=int, default=100, help="dialogue tokens added to the query")
    parser.add_argument("--keywords", action="store_true", help="add lexical keywords to the reground query")
    parser.add_argument(
        "--embedding", default="", help="embedding spec, e.g. local:multilingual-e5-small (default: MiniLM)"
    )
    parser.add_argument(
        "--transform",
        choices=TRANSFORMS,
        default=None,
        help="query transform (RetrievalSettings.query_transform); the texts come from --model or --expansions-from",
    )
    parser.add_argument("--model", default=None, help="chat model spec that writes the transform's texts")
    parser.add_argument("--expansions-from", default=None, help="reuse the texts of an earlier run's cases.jsonl")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a RetrievalSettings field, the value as JSON (repeatable): --set transform_weight=0.5",
    )
    parser.add_argument(
        "--no-case-scope", action="store_true", help="search all documents even for cases naming a collection"
    )
    return parser


def run_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Run the eval the parsed options describe (this module's `main` and `reground eval retrieval`).

    Raises ValueError for a bad --set or a transform without its texts' source."""
    if args.limit is not None and args.limit < 0:
        raise ValueError(f"--limit must be >= 0 (0 = all cases), got {args.limit}")
    overrides = [*args.settings, *([f"query_transform={args.transform}"] if args.transform else [])]
    try:
        settings = settings_with(overrides)
    except TypeError as exc:
        raise ValueError(f"bad --set: {exc}") from exc
    return run_retrieval_eval(
        args.docs,
        args.cases,
        limit=args.limit or None,
        seed=args.seed,
        out_dir=args.out,
        data_dir=args.data_dir,
        max_tokens=args.max_tokens,
        history_token_budget=args.history_tokens,
        keywords=args.keywords,
        embedding=args.embedding,
        settings=settings,
        model=args.model,
        expansions_from=args.expansions_from,
        case_scope=not args.no_case_scope,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        summary = run_from_args(args)
    except ValueError as exc:
        parser.error(str(exc))
    print(format_summary(summary))
    print(f"wrote {Path(args.out) / 'summary.json'} and cases.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
