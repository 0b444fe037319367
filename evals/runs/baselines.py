"""The systems reground is compared with: one answer call each, costed the way the graph costs
itself.

- `no_retrieval`: the conversation alone.
- `naive_rag`: retrieval with the question only, top-3 passages, one answer call.
- `history_rag`: retrieval with the question plus the last ~100 tokens of dialogue (ReGround's
  DH_tokens query), top-3 passages, one answer call.

Retrieval is the same LLM-free stack the graph uses (`HybridRetriever`), so the comparison
isolates what the graph adds: refinement, keywords, rerank, self-check and the two loops. Every
baseline returns a dict shaped like the graph's `TurnResult`, with LLM calls and tokens counted
from the AIMessage usage metadata through the same `CallStats` the nodes use. A metadata filter
(`where`, e.g. a case's `{"collection": "govt"}`) scopes their retrieval as `metadata_filter` scopes
the graph's. Baselines say nothing about what kind of reply they gave: `evals/runs/behaviour.py` classifies
their text (answer / abstain / clarify) by a stated rule.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reground.prompts import baselines as prompts
from reground.tools.signals.scoring import principle_scores

if TYPE_CHECKING:  # LangChain and the retrieval stack load on first use: `reground --help` stays quick
    from langchain_core.language_models import BaseChatModel
    from reground.tools.adapters.chat import CallStats
    from reground.tools.retrieval.search import HybridRetriever
    from reground.tools.types import Passage

BASELINES = ("no_retrieval", "naive_rag", "history_rag")
TOP_K = 3
HISTORY_TOKENS = 100


def _turns(history: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """Dataset turns (role user|agent) as the graph's history (role user|assistant)."""
    return [
        {
            "role": "assistant" if t.get("role") in ("agent", "assistant") else "user",
            "text": str(t.get("text", "")),
        }
        for t in history
    ]


def _result(
    answer: str,
    passages: list[Passage],
    stats: CallStats,
    started: float,
    history: Sequence[Mapping[str, str]],
    question: str,
) -> dict[str, Any]:
    recent = " ".join(str(t.get("text", "")) for t in history[-2:])
    return {
        "answer": answer,
        "citations": [],
        "passages": passages,
        "groundedness": None,
        "principle_scores": principle_scores(answer, [p["text"] for p in passages], f"{question} {recent}"),
        "passed": None,
        "fallback_reason": None,
        "reground_attempts": 0,
        "refine_iterations": 0,
        "llm_calls": stats.llm_calls,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "seconds": round(time.perf_counter() - started, 4),
    }


def no_retrieval(model: BaseChatModel, *, history: Sequence[Mapping[str, str]], question: str) -> dict[str, Any]:
    """Answer from the dialogue alone."""
    from langchain_core.messages import HumanMessage
    from reground.prompts.formatting import format_conversation
    from reground.tools.adapters.chat import CallStats, call_text

    started, stats = time.perf_counter(), CallStats()
    prompt = prompts.NO_RETRIEVAL.format(conversation=format_conversation(_turns(history), question))
    answer = call_text(model, [HumanMessage(prompt)], stats, tags=["baseline"])
    return _result(answer, [], stats, started, history, question)


def rag_passages(
    retriever: HybridRetriever,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    use_history: bool,
    k: int = TOP_K,
    history_tokens: int = HISTORY_TOKENS,
    where: dict[str, Any] | None = None,
) -> list[Passage]:
    """The k passages a RAG baseline answers from: the question alone, or with the last `history_tokens` of dialogue."""
    from reground.tools.retrieval.search import RetrievalQuery
    from reground.tools.text.tokens import history_query

    query_text = history_query(question, _turns(history), history_tokens) if use_history else question
    return retriever.search(
        RetrievalQuery(question=question, history_query=query_text), where=where, doc_k=k, paragraph_k=k
    )


def rag(
    model: BaseChatModel,
    retriever: HybridRetriever,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    use_history: bool,
    where: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Retrieve the passages (`rag_passages`), then one answer call."""
    from langchain_core.messages import HumanMessage
    from reground.prompts.formatting import format_conversation, format_passages
    from reground.tools.adapters.chat import CallStats, call_text

    started, stats = time.perf_counter(), CallStats()
    turns = _turns(history)
    passages = rag_passages(retriever, history=history, question=question, use_history=use_history, where=where)
    prompt = prompts.RAG.format(passages=format_passages(passages), conversation=format_conversation(turns, question))
    answer = call_text(model, [HumanMessage(prompt)], stats, tags=["baseline"])
    result = _result(answer, passages, stats, started, history, question)
    # The graph's relevance signal on an answer no loop acted on: the honest test of the signal itself.
    result["relevance"] = baseline_relevance(answer, question, turns, passages, retriever.embed)
    return result


def baseline_relevance(
    answer: str, question: str, turns: Sequence[Mapping[str, str]], passages: Sequence[Passage], embed: Any
) -> float:
    """The graph's answer-relevance signal (tools/signals/evidence.py) for a baseline's answer, LLM-free."""
    from reground.tools.signals.evidence import previous_reply, relevance_parts, turn_evidence_vectors

    evidence = turn_evidence_vectors(question, turns, passages, embed)[0]
    return relevance_parts(answer, evidence, previous_reply(turns))["relevance"]


def run_baseline(
    name: str,
    model: BaseChatModel,
    retriever: HybridRetriever | None,
    *,
    history: Sequence[Mapping[str, str]],
    question: str,
    where: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One case through one baseline by name; `where` filters retrieval by document metadata."""
    if name == "no_retrieval":
        return no_retrieval(model, history=history, question=question)
    if name not in ("naive_rag", "history_rag"):
        raise ValueError(f"unknown baseline {name!r}: expected one of {', '.join(BASELINES)}")
    if retriever is None:
        raise ValueError(f"baseline {name!r} needs a retriever over the document store")
    return rag(model, retriever, history=history, question=question, use_history=name == "history_rag", where=where)
