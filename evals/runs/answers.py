"""The answers run: every case through every system, then metrics, judges and a summary.

    reground eval answers --docs docs.jsonl --cases cases_dev.jsonl --limit 100 --seed 7 \
        --systems naive_rag,reground --out runs/answers

Writes, per system, `OUT/<system>/cases.jsonl` (answer, passages, gold doc in top 3, proxy
scores, loop counts, LLM calls, tokens, latency, per-case metrics, the reply's behaviour and the
case's labels), `OUT/<system>/judges.jsonl` when a judge model is given,
`OUT/pairwise/<system>__vs__<baseline>.jsonl`, and `OUT/summary.json`.
A rerun with the same settings skips finished cases (failed ones are retried).

Labelled cases (MTRAG-UN: `answerability`) are all run, with or without a gold answer or gold
passages, and the summary adds each system's behaviour per class (`evals/runs/behaviour.py`). When the
cases name a `collection` and the documents carry that field, each case retrieves only from its own
collection: a metadata filter `{"collection": case.collection}` (the graph's `metadata_filter`, the
baselines' `where`), applied at every retrieval stage by the store.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from reground.evals.data.datasets import Case, load_cases
from reground.evals.metrics import MetricUnavailableError, load_metric
from reground.evals.records import latest_by_case, read_jsonl
from reground.evals.runs.baselines import BASELINES, run_baseline
from reground.evals.runs.behaviour import behaviour_of, behaviour_table
from reground.evals.runs.usefulness import holds_every, usefulness_table
from reground.tools.errors import InputError
from reground.tools.signals.scoring import k_precision, rouge_l, token_f1, token_recall
from reground.tools.tuning.models import CHAT

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

# The full graph and its ablations: Context overrides (fields of reground.nodes.context.Context; a group's field
# by its dotted name).
GRAPH_SYSTEMS: dict[str, dict[str, Any]] = {
    "reground": {},
    "reground-no_refiner": {"use_question_refiner": False},
    "reground-no_keywords": {"keyword_method": "off", "budgets.use_paragraph_scoring": False},
    "reground-no_rerank": {"rerank_method": "off"},
    "reground-paragraph": {"answer_length": "paragraph"},  # up to 3 evidence sentences from any passage
    "reground-write": {"answer_style": "write"},  # the chat model writes the reply (extract is the default)
    "reground-llm_self_check": {"answer_style": "write", "evidence.use_self_check": True},
    # never abstains early, hedges nor asks back
    "reground-no_triage": {
        "triage.support_threshold": 0.0,
        "triage.judge_hedge_threshold": 0.0,
        "triage.judge_answer_threshold": 0.0,
        "use_clarify": False,
    },
    "reground-no_judge": {"use_trained_judge": False},  # the hand-made evidence score and support threshold decide
    "reground-no_reground": {"use_reground": False},
    "reground-no_refine": {"use_principle_refinement": False},
}
SYSTEMS: tuple[str, ...] = (*BASELINES, *GRAPH_SYSTEMS)
DEFAULT_SYSTEMS = ("naive_rag", "history_rag", "reground")
JUDGES = ("hallucination", "geval", "rubric", "pairwise")
TOP_K = 3
SCOPE_FIELD = "collection"  # a case naming its collection retrieves only from it
DEFAULT_RELEVANCE_THRESHOLD = 0.5  # when the run's config names no relevance_threshold
RELEVANCE_FIELD = "refinement.relevance_threshold"  # the Context field the graph judges relevance by
JUDGE_MAX_TOKENS = 320  # room for a few sentences of reasoning before the verdict line

CaseRunner = Callable[[Case], dict[str, Any]]


class EvalRunError(InputError, RuntimeError):
    """A run cannot go on (bad system name, mismatched out dir, model down); says why."""


def parse_systems(text: str | Iterable[str]) -> list[str]:
    """'a,b,c' or a list → validated system names, in order, without duplicates."""
    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise EvalRunError(f"unknown systems {unknown or names}: choose from {', '.join(SYSTEMS)}")
    return list(dict.fromkeys(names))


# --- files ----------------------------------------------------------------------------------------


def shown_path(path: Path) -> str:
    """A path as results record it: relative to the working directory (from the repository: '../shared/...'), so
    committed results never name one machine's directories."""
    import os

    return os.path.relpath(path.resolve(), Path.cwd().resolve())


class _JsonlWriter:
    """Appends rows from worker threads, flushed per row: a killed run keeps finished cases."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, row: Mapping[str, Any]) -> None:
        with self._lock:
            self._fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def _progress(items: Sequence[Any], desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=len(items), desc=desc, unit="case", disable=not enabled, dynamic_ncols=True)


def _parallel(items: Sequence[Any], fn: Callable[[Any], None], *, workers: int, desc: str, progress: bool) -> None:
    bar = _progress(items, desc, progress)
    try:
        if workers <= 1:
            for item in items:
                fn(item)
                bar.update(1)
            return
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(fn, item) for item in items]:
                future.result()
                bar.update(1)
    finally:
        bar.close()


# --- one case -------------------------------------------------------------------------------------


def _is_fatal(exc: BaseException) -> bool:
    """A model or store that is down, or a broken install, stops the run (every later case would
    fail the same way)."""
    fatal = {"LLMUnavailableError", "CollectionNotFoundError", "EmptyCollectionError"}
    return isinstance(exc, ImportError) or type(exc).__name__ in fatal


def case_record(system: str, case: Case, result: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    """What a case's row holds: the answer, its evidence, its cost, and its cheap metrics."""
    answer = str(result.get("answer") or "")
    passages = [
        {
            "chunk_id": p.get("chunk_id", ""),
            "doc_id": p.get("doc_id", ""),
            "title": p.get("title", ""),
            "text": p.get("text", ""),
        }
        for p in result.get("passages") or []
    ]
    knowledge = [p["text"] for p in passages]
    gold = case.gold_answer
    gold_docs = {d for d in case.gold_doc_ids or [case.gold_doc_id] if d}
    behaviour, kind_source = behaviour_of(result)
    relevance = result.get("relevance")
    return {
        "case_id": case.case_id,
        "system": system,
        "question": case.question,
        "history": list(case.history),
        **case.labels(),
        "answer": answer,
        "must_contain": list(case.must_contain),
        "behaviour": behaviour,
        "kind_source": kind_source,
        "gold_answer": case.gold_answer,
        "gold_doc_id": case.gold_doc_id,
        "passages": passages,
        "retrieved_doc_ids": [p["doc_id"] for p in passages],
        # None: the case has no gold passages (nothing to find), so it is left out of the mean.
        "gold_in_top3": (bool(gold_docs & {p["doc_id"] for p in passages[:TOP_K]}) if passages else False)
        if gold_docs
        else None,
        "relevance": None if relevance is None else float(relevance),
        "kind": result.get("kind"),
        "signals": dict(result.get("signals") or {}),
        "options": [o.get("label") for o in result.get("options") or []],
        "groundedness": result.get("groundedness"),
        "principle_scores": result.get("principle_scores") or {},
        "passed": result.get("passed"),
        "fallback_reason": result.get("fallback_reason"),
        "reground_attempts": int(result.get("reground_attempts") or 0),
        "refine_iterations": int(result.get("refine_iterations") or 0),
        "llm_calls": int(result.get("llm_calls") or 0),
        "prompt_tokens": int(result.get("prompt_tokens") or 0),
        "completion_tokens": int(result.get("completion_tokens") or 0),
        "seconds": round(seconds, 4),
        "metrics": {  # reference metrics are None for a case without a gold answer
            "token_f1": None if gold is None else token_f1(answer, gold),
            "recall": None if gold is None else token_recall(answer, gold),
            "k_precision": k_precision(answer, knowledge) if knowledge else 0.0,
            "rouge_l": None if gold is None else rouge_l(answer, gold).fmeasure,
            "words": len(answer.split()),
            "useful": holds_every(answer, case.must_contain) if case.must_contain else None,
        },
        "error": None,
    }


def _error_record(system: str, case: Case, exc: BaseException, seconds: float) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "system": system,
        "error": f"{type(exc).__name__}: {exc}"[:500],
        "seconds": round(seconds, 4),
    }


def run_systems(
    runners: Mapping[str, CaseRunner],
    cases: Sequence[Case],
    out_dir: Path,
    *,
    workers: int = 1,
    progress: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Run every system's unfinished cases, case by case: each case goes through every system before the next
    one, the systems' order rotating from case to case. A shared machine's load then falls on all systems alike,
    so their seconds per turn compare within a run. Rows append to OUT/<system>/cases.jsonl (resumable)."""
    names = list(runners)
    paths = {name: out_dir / name / "cases.jsonl" for name in names}
    done = {
        name: {cid for cid, row in latest_by_case(read_jsonl(paths[name])).items() if not row.get("error")}
        for name in names
    }
    todo = [(i, case) for i, case in enumerate(cases) if any(case.case_id not in done[n] for n in names)]
    writers = {name: _JsonlWriter(paths[name]) for name in names}
    fatal: list[tuple[str, BaseException]] = []

    def one(item: tuple[int, Case]) -> None:
        index, case = item
        shift = index % len(names)
        for name in [*names[shift:], *names[:shift]]:
            if fatal:
                return
            if case.case_id in done[name]:
                continue
            started = time.perf_counter()
            try:
                result = runners[name](case)
            except Exception as exc:
                if _is_fatal(exc):
                    fatal.append((name, exc))
                    return
                writers[name].write(_error_record(name, case, exc, time.perf_counter() - started))
                continue
            writers[name].write(case_record(name, case, result, time.perf_counter() - started))

    try:
        _parallel(todo, one, workers=workers, desc=" + ".join(names), progress=progress)
    finally:
        for writer in writers.values():
            writer.close()
    if fatal:
        name, exc = fatal[0]
        raise EvalRunError(f"system {name!r} stopped: {exc}") from exc
    wanted = {c.case_id for c in cases}
    return {
        name: [row for cid, row in latest_by_case(read_jsonl(paths[name])).items() if cid in wanted] for name in names
    }


# --- systems --------------------------------------------------------------------------------------


def graph_messages(case: Case) -> list[dict[str, str]]:
    """A case as the graph's input messages (dataset 'agent' turns are the assistant's)."""
    turns = [{"role": "assistant" if t["role"] == "agent" else "user", "content": t["text"]} for t in case.history]
    return [*turns, {"role": "user", "content": case.question}]


def case_scope(case: Case, scope_field: str | None) -> dict[str, Any]:
    """The metadata filter that keeps a case inside its own collection ({} when unscoped)."""
    if scope_field != SCOPE_FIELD or not case.collection:
        return {}
    return {SCOPE_FIELD: case.collection}


def graph_runner(
    system: str,
    *,
    chat_model: BaseChatModel | None,
    store: Any,
    base_context: Mapping[str, Any],
    scope_field: str | None = None,
) -> CaseRunner:
    """The full graph (or an ablation) as a case runner; the result is the graph's TurnResult.
    With a scope field, each case's collection is added to the context's `metadata_filter`."""
    from reground.graph.builder import build_graph, run_config
    from reground.nodes.context import Context

    context = Context(**base_context).with_(**GRAPH_SYSTEMS[system])
    graph = build_graph(chat_model=chat_model, store=store)

    def run(case: Case) -> dict[str, Any]:
        scope = case_scope(case, scope_field)
        ctx = context.with_(metadata_filter={**context.metadata_filter, **scope}) if scope else context
        out = graph.invoke({"messages": graph_messages(case)}, context=ctx, config=run_config(ctx))
        return dict(out["result"])

    return run


def baseline_runner(
    system: str,
    *,
    chat_model: BaseChatModel,
    store: Any,
    scope_field: str | None = None,
    where: Mapping[str, Any] | None = None,
) -> CaseRunner:
    """A baseline as a case runner; `where` (the run's filter) plus the case's scope filter retrieval."""
    retriever = None
    if system != "no_retrieval":
        from reground.tools.retrieval.search import HybridRetriever

        retriever = HybridRetriever(store)

    def run(case: Case) -> dict[str, Any]:
        scope = {**dict(where or {}), **case_scope(case, scope_field)}
        return run_baseline(
            system, chat_model, retriever, history=case.history, question=case.question, where=scope or None
        )

    return run


def load_eval_model(spec: str, max_tokens: int = 160) -> BaseChatModel:
    from reground.tools.adapters.llm import ensure_reachable, load_chat_model

    ensure_reachable(spec)
    model: BaseChatModel = load_chat_model(spec, temperature=0.0, max_tokens=max_tokens, timeout_s=CHAT.timeout_s)
    return model


# --- metrics, judges and the summary --------------------------------------------------------------


def _scored(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows with a gold answer: the only ones reference metrics mean anything on."""
    return [r for r in rows if r.get("gold_answer") is not None]


def _mean(values: Iterable[float | int | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def corpus_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The reference metrics of finished rows, through the project's evaluate modules."""
    rows = _scored(rows)
    if not rows:
        return {}
    predictions = [str(r["answer"]) for r in rows]
    references = [str(r.get("gold_answer") or "") for r in rows]
    knowledge = [[p["text"] for p in r["passages"]] or [""] for r in rows]
    out: dict[str, Any] = {}
    out["token_f1"] = load_metric("token_f1").compute(predictions=predictions, references=references)["token_f1"]
    rk = load_metric("recall_kprecision").compute(predictions=predictions, references=references, knowledge=knowledge)
    out.update(recall=rk["recall"], k_precision=rk["k_precision"])
    rouge = load_metric("rouge").compute(predictions=predictions, references=references)
    out.update(rouge1=rouge["rouge1"], rouge2=rouge["rouge2"], rougeL=rouge["rougeL"])
    out.update(load_metric("bleu").compute(predictions=predictions, references=references))
    out["sacrebleu"] = load_metric("sacrebleu").compute(predictions=predictions, references=references)["score"]
    try:
        out["meteor"] = load_metric("meteor").compute(predictions=predictions, references=references)["meteor"]
    except MetricUnavailableError as exc:
        out["meteor"] = None
        out["meteor_skipped"] = str(exc)
    return out


def system_summary(rows: Sequence[Mapping[str, Any]], judges: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Everything the report tables show for one system (reference metrics over the cases with a
    gold answer, `n_scored`; gold doc in top 3 over the cases with gold passages)."""
    ok = [r for r in rows if not r.get("error")]
    seconds = [float(r["seconds"]) for r in ok]
    summary: dict[str, Any] = {
        "n_cases": len(rows),
        "n_errors": len(rows) - len(ok),
        "n_scored": len(_scored(ok)),
        **corpus_metrics(ok),
        "words": _mean(r["metrics"]["words"] for r in ok),
        "gold_in_top3": _mean(None if r.get("gold_in_top3") is None else float(r["gold_in_top3"]) for r in ok),
        "llm_calls": _mean(r["llm_calls"] for r in ok),
        "prompt_tokens": _mean(r["prompt_tokens"] for r in ok),
        "completion_tokens": _mean(r["completion_tokens"] for r in ok),
        "latency_median_s": _percentile(seconds, 50),
        "latency_p90_s": _percentile(seconds, 90),
        "reground_attempts": _mean(r["reground_attempts"] for r in ok),
        "refine_iterations": _mean(r["refine_iterations"] for r in ok),
        "groundedness": _mean(r.get("groundedness") for r in ok),
        "passed": _mean(None if r.get("passed") is None else float(r["passed"]) for r in ok),
        "fallbacks": sum(1 for r in ok if r.get("fallback_reason")),
    }
    usefulness = usefulness_table(ok)
    if usefulness:
        summary["usefulness"] = usefulness
    behaviour = behaviour_table(ok)
    if behaviour:
        summary["behaviour"] = behaviour
        summary["behaviour_source"] = {s: sum(1 for r in ok if r.get("kind_source") == s) for s in ("graph", "rule")}
    if judges:
        from reground.evals.runs.judges import summarize_values

        halluc = summarize_values(j.get("hallucination") for j in judges if "hallucination" in j)
        if halluc["n"] or halluc["unparseable"]:
            summary["hallucination_rate"] = halluc["mean"]
            summary["hallucination_unparseable"] = halluc["unparseable"]
        for dim in sorted({d for j in judges for d in (j.get("geval") or {})}):
            values = summarize_values((j.get("geval") or {}).get(dim) for j in judges if j.get("geval"))
            summary[f"geval_{dim}"] = values["mean"]
            summary[f"geval_{dim}_unparseable"] = values["unparseable"]
        rubric = summarize_values(j.get("rubric") for j in judges if "rubric" in j)
        if rubric["n"] or rubric["unparseable"]:
            summary["rubric"] = rubric["mean"]
            summary["rubric_unparseable"] = rubric["unparseable"]
    return summary


def passage_texts(passages: Iterable[Mapping[str, Any] | str]) -> list[str]:
    """The texts of a row's passages (stored as passage records, or already as texts)."""
    return [p["text"] if isinstance(p, Mapping) else str(p) for p in passages]


def judge_inputs(row: Mapping[str, Any]) -> dict[str, Any]:
    """What every per-answer judge reads from a case row."""
    return {
        "history": row["history"],
        "question": row["question"],
        "answer": row["answer"],
        "passages": passage_texts(row["passages"]),
    }


def run_judges(
    system: str,
    rows: Sequence[Mapping[str, Any]],
    judge_model: BaseChatModel,
    out_dir: Path,
    *,
    judges: Sequence[str] = ("hallucination", "geval", "rubric"),
    workers: int = 1,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Reference-free judges (and the rubric with the gold reply) per finished case; resumable."""
    from reground.evals.runs import judges as J

    path = out_dir / system / "judges.jsonl"
    done = set(latest_by_case(read_jsonl(path)))
    todo = [r for r in rows if not r.get("error") and r["case_id"] not in done]
    writer = _JsonlWriter(path)

    def one(row: Mapping[str, Any]) -> None:
        kw = judge_inputs(row)
        out: dict[str, Any] = {"case_id": row["case_id"], "system": system}
        if "hallucination" in judges:
            verdict = J.hallucination(judge_model, **kw)
            out.update(hallucination=verdict.value, hallucination_raw=verdict.raw[:500])
        if "geval" in judges:
            ratings = J.geval(judge_model, **kw)
            out["geval"] = {d: j.value for d, j in ratings.items()}
            out["geval_raw"] = {d: j.raw[:300] for d, j in ratings.items()}  # to audit the parser
        if "rubric" in judges:
            graded = J.rubric_score(judge_model, reference=row.get("gold_answer"), **kw)
            out.update(rubric=graded.value, rubric_raw=graded.raw[:300])
        writer.write(out)

    try:
        _parallel(todo, one, workers=workers, desc=f"judge {system}", progress=progress)
    finally:
        writer.close()
    wanted = {r["case_id"] for r in rows}
    return [j for cid, j in latest_by_case(read_jsonl(path)).items() if cid in wanted]


def run_pairwise(
    system: str,
    baseline: str,
    rows: Mapping[str, Mapping[str, Any]],
    base_rows: Mapping[str, Mapping[str, Any]],
    judge_model: BaseChatModel,
    out_dir: Path,
    *,
    workers: int = 1,
    progress: bool = True,
) -> dict[str, Any]:
    """Pairwise judge (both orders) of `system` (A) against `baseline` (B) on their common cases."""
    from reground.evals.runs import judges as J

    path = out_dir / "pairwise" / f"{system}__vs__{baseline}.jsonl"
    done = set(latest_by_case(read_jsonl(path)))
    common = [
        cid for cid in rows if cid in base_rows and not rows[cid].get("error") and not base_rows[cid].get("error")
    ]
    writer = _JsonlWriter(path)

    def one(cid: str) -> None:
        a, b = rows[cid], base_rows[cid]
        passages = list(dict.fromkeys(p["text"] for p in [*a["passages"], *b["passages"]]))
        j = J.pairwise(
            judge_model,
            history=a["history"],
            question=a["question"],
            answer_a=a["answer"],
            answer_b=b["answer"],
            passages=passages,
        )
        writer.write({"case_id": cid, **dataclasses.asdict(j)})

    try:
        _parallel(
            [c for c in common if c not in done],
            one,
            workers=workers,
            desc=f"pairwise {system}",
            progress=progress,
        )
    finally:
        writer.close()
    judged = [j for cid, j in latest_by_case(read_jsonl(path)).items() if cid in set(common)]
    return {"a": system, "b": baseline, **J.summarize_pairwise(judged)}


def relevance_threshold_of(config: Mapping[str, Any]) -> tuple[float, str]:
    """(threshold, source) the graph judged relevance by: a `--set refinement.relevance_threshold=` override
    (`relevance_threshold=` in runs written before the Context's groups), else the Context default recorded when the
    run started, else DEFAULT_RELEVANCE_THRESHOLD."""
    overrides = config.get("context_overrides") or {}
    override = overrides.get(RELEVANCE_FIELD, overrides.get("relevance_threshold"))
    if override is not None:
        return float(override), "context override"
    if config.get("context_relevance_threshold") is not None:
        return float(config["context_relevance_threshold"]), "context default"
    return DEFAULT_RELEVANCE_THRESHOLD, "default"


def _context_default(name: str) -> Any:
    """A Context field's default (a group's field by its dotted name), without building a Context (None if the field
    does not exist)."""
    from reground.nodes.context import Context

    group, _, name_in_group = name.rpartition(".")
    field = Context.model_fields.get(group or name)
    if field is None:
        return None
    value = field.get_default(call_default_factory=True)
    return getattr(value, name_in_group, None) if group else value


def _rows_from_file(out_dir: Path, system: str, wanted: set[str]) -> list[dict[str, Any]]:
    rows = latest_by_case(read_jsonl(out_dir / system / "cases.jsonl"))
    return [row for cid, row in rows.items() if cid in wanted]


def summarize_run(out_dir: str | Path, case_ids: Iterable[str]) -> dict[str, Any]:
    """The summary of every system an out dir holds (this invocation's and earlier ones'), from
    its files: cases, judges and pairwise verdicts of the given cases. Writes OUT/summary.json."""
    from reground.evals.runs.judges import summarize_pairwise

    out = Path(out_dir)
    wanted = set(case_ids)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    systems = [s for s in config.get("systems", []) if (out / s / "cases.jsonl").is_file()]
    from reground.evals.runs.correlation import relevance_report

    threshold, threshold_source = relevance_threshold_of(config)
    per_system = {}
    for name in systems:
        judged = latest_by_case(read_jsonl(out / name / "judges.jsonl"))
        rows = _rows_from_file(out, name, wanted)
        per_system[name] = system_summary(rows, [j for cid, j in judged.items() if cid in wanted])
        if name in GRAPH_SYSTEMS or any(r.get("relevance") is not None for r in rows):
            per_system[name]["correlations"] = relevance_report(
                [r for r in rows if not r.get("error")],
                threshold=threshold,
                threshold_source=threshold_source,
            )
    pairwise: dict[str, Any] = {}
    for path in sorted((out / "pairwise").glob("*__vs__*.jsonl")):
        a, b = path.stem.split("__vs__", 1)
        verdicts = [j for cid, j in latest_by_case(read_jsonl(path)).items() if cid in wanted]
        if verdicts:
            pairwise[f"{a} vs {b}"] = {"a": a, "b": b, **summarize_pairwise(verdicts)}
    summary = {"kind": "answers", "config": config, "systems": per_system, "pairwise": pairwise}
    check = out / "judge_check.json"
    if check.is_file():  # written by `reground eval judge-check`: whether the hallucination judge is trusted
        summary["judge_check"] = {
            k: v for k, v in json.loads(check.read_text(encoding="utf-8")).items() if k != "examples"
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


# --- the run --------------------------------------------------------------------------------------


def _check_config(out_dir: Path, config: dict[str, Any]) -> None:
    """A rerun must use the same cases and models, or finished rows would mix with others."""
    path = out_dir / "config.json"
    keys = ("cases", "docs", "limit", "seed", "only_followups", "chat_model", "only_with_answer", "case_scope")
    defaults = {"only_with_answer": True, "case_scope": None}  # what runs written before these keys did
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))

        def value(settings: dict[str, Any], key: str) -> Any:
            raw = settings.get(key, defaults.get(key))
            return str(Path(raw).resolve()) if key in ("cases", "docs") and raw else raw

        changed = [k for k in keys if value(old, k) != value(config, k)]
        if changed:
            raise EvalRunError(
                f"{out_dir} holds a run with other settings ({', '.join(changed)} differ): "
                "pass a new --out directory, or delete it to start over"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    old_systems = json.loads(path.read_text(encoding="utf-8")).get("systems", []) if path.is_file() else []
    merged = {**config, "systems": list(dict.fromkeys([*old_systems, *config["systems"]]))}
    path.write_text(json.dumps(merged, indent=2), encoding="utf-8")


def _docs_have_field(docs_path: Path, name: str) -> bool:
    """Whether the documents carry a metadata field (so a filter on it can match anything)."""
    from reground.evals.data.datasets import load_corpus

    return any(name in doc["metadata"] for doc in load_corpus(docs_path))


def _case_scope_field(cases: Sequence[Case], docs_path: Path, enabled: bool) -> str | None:
    """SCOPE_FIELD when cases name their collection and the documents carry it, else None.
    Cases with collections over documents without the field is an error: every search would be empty."""
    if not enabled or not any(c.collection for c in cases):
        return None
    if not _docs_have_field(docs_path, SCOPE_FIELD):
        raise EvalRunError(
            f"the cases name a {SCOPE_FIELD!r} but no document in {docs_path} has that field: "
            f"add it to the documents, or pass --no-case-scope to search all documents for every case"
        )
    return SCOPE_FIELD


def _check_scored(summary: Mapping[str, Any], names: Sequence[str], out: Path) -> None:
    """A system that scored no case is a failed run, not a table of zeros."""
    for name in names:
        s = summary["systems"].get(name) or {}
        if s.get("n_cases", 0) - s.get("n_errors", 0) <= 0:
            first = next((r["error"] for r in read_jsonl(out / name / "cases.jsonl") if r.get("error")), None)
            raise EvalRunError(
                f"system {name!r} scored 0 of {s.get('n_cases', 0)} cases"
                + (f" (first error: {first})" if first else "")
                + f": see {out / name / 'cases.jsonl'}, fix the cause and rerun (failed cases are retried)"
            )


def run_answers_eval(
    docs: str | Path,
    cases: str | Path,
    *,
    systems: Sequence[str] | str = DEFAULT_SYSTEMS,
    limit: int | None = 100,
    seed: int | None = 0,
    only_followups: bool = False,
    all_cases: bool | None = None,
    case_scope: bool = True,
    collection: str | None = None,
    out_dir: str | Path,
    chat_model_spec: str = "local:default",
    judge_model_spec: str | None = None,
    workers: int = 1,
    data_dir: str | Path | None = None,
    judges: Sequence[str] = JUDGES,
    pairwise_baseline: str = "naive_rag",
    chat_model: BaseChatModel | None = None,
    judge_model: BaseChatModel | None = None,
    store: Any | None = None,
    context_overrides: Mapping[str, Any] | None = None,
    chunk_tokens: int = 160,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the systems over a seeded sample of cases; returns the summary.

    Cases without a gold answer are left out unless `all_cases` (None: only when the cases carry
    answerability labels, as MTRAG-UN's do: the behaviour table needs every task). `case_scope`
    keeps each case inside its own `collection` when the cases and documents name one; `collection` runs only the
    cases of that collection.
    `chat_model` / `judge_model` / `store` are instances that replace the specs (tests, notebooks).
    Raises EvalRunError when no case is selected or a system scores none.
    """
    docs_path, cases_path, out = Path(docs), Path(cases), Path(out_dir)
    names = parse_systems(systems)
    for path, what in ((docs_path, "documents"), (cases_path, "cases")):
        if not path.is_file():
            raise EvalRunError(f"{what} file not found: {path}")
    bad_judges = [j for j in judges if j not in JUDGES]
    if bad_judges:
        raise EvalRunError(f"unknown judges {bad_judges}: choose from {', '.join(JUDGES)}")
    every = load_cases(cases_path)
    if all_cases is None:
        all_cases = any(c.answerability for c in every)
    selected = load_cases(
        cases_path, limit=limit, seed=seed, only_with_answer=not all_cases, only_followups=only_followups
    )
    if collection:  # one collection's cases (a leave-one-corpus-out run measures each collection apart)
        selected = [c for c in selected if c.collection == collection]
    if not selected:
        raise EvalRunError(
            f"no cases to run in {cases_path} (only_followups={only_followups}, "
            f"only with a gold answer={not all_cases}, limit={limit}): choose other filters or another cases file"
        )
    scope_field = _case_scope_field(selected, docs_path, case_scope)
    eval_collection = None
    if store is None and any(n != "no_retrieval" for n in names):
        # The same collection as `reground eval retrieval` (one per corpus content and chunk size).
        from reground.evals.runs.retrieval import collection_name

        eval_collection = collection_name(docs_path, chunk_tokens)
    config = {
        "docs": shown_path(docs_path),
        # The store's collection (`eval calibrate --for-collection` calibrates for it); a caller's store: its context's.
        "collection": eval_collection or (context_overrides or {}).get("collection"),
        "cases": shown_path(cases_path),
        "limit": limit,
        "seed": seed,
        "only_followups": only_followups,
        "only_with_answer": not all_cases,
        "collection_filter": collection,
        "case_scope": scope_field,
        "chat_model": chat_model_spec if chat_model is None else f"instance:{type(chat_model).__name__}",
        "judge_model": judge_model_spec if judge_model is None else f"instance:{type(judge_model).__name__}",
        "systems": names,
        "n_cases": len(selected),
        "context_overrides": dict(context_overrides or {}),
    }
    if any(n in GRAPH_SYSTEMS for n in names):
        config["context_relevance_threshold"] = _context_default(RELEVANCE_FIELD)
    _check_config(out, config)

    base_context: dict[str, Any] = {"chat_model": chat_model_spec, **dict(context_overrides or {})}
    if eval_collection:
        from reground.evals.runs.retrieval import open_eval_store

        store = open_eval_store(docs_path, data_dir=data_dir, max_tokens=chunk_tokens)
        base_context["collection"] = eval_collection
    model = chat_model if chat_model is not None else load_eval_model(chat_model_spec)
    if data_dir:
        base_context["data_dir"] = str(data_dir)

    wanted = {c.case_id for c in selected}
    runners: dict[str, CaseRunner] = {}
    for name in names:
        if name in GRAPH_SYSTEMS:
            runners[name] = graph_runner(
                name, chat_model=chat_model, store=store, base_context=base_context, scope_field=scope_field
            )
        else:
            runners[name] = baseline_runner(
                name,
                chat_model=model,
                store=store,
                scope_field=scope_field,
                where=base_context.get("metadata_filter"),
            )
    all_rows = run_systems(runners, selected, out, workers=workers, progress=progress)

    if judge_model is not None or judge_model_spec:
        jm = (
            judge_model
            if judge_model is not None
            else load_eval_model(str(judge_model_spec), max_tokens=JUDGE_MAX_TOKENS)
        )
        per_case = [j for j in judges if j != "pairwise"]
        for name in names if per_case else []:
            run_judges(name, all_rows[name], jm, out, judges=per_case, workers=workers, progress=progress)
        base_rows = all_rows.get(pairwise_baseline) or _rows_from_file(out, pairwise_baseline, wanted)
        if "pairwise" in judges and base_rows:
            base = latest_by_case(base_rows)
            for name in names:
                if name == pairwise_baseline:
                    continue
                run_pairwise(
                    name,
                    pairwise_baseline,
                    latest_by_case(all_rows[name]),
                    base,
                    jm,
                    out,
                    workers=workers,
                    progress=progress,
                )

    summary = summarize_run(out, wanted)
    _check_scored(summary, names, out)
    return summary
