"""Fine-grained retrieval: hybrid document search, then paragraph scoring, always inside the user's scope.

Retrieved text is data, never instructions: sentences that give the assistant orders, ask for credentials or send
the reader outside the document's site are flagged here (kept whole, the flags in each passage's metadata), and the
reply never obeys one or says one alone (signals/injection.py; measured in evals/README.md, "Prompt injection")."""

from __future__ import annotations

from typing import Any

from reground.nodes.common import NodeEnv
from reground.nodes.state import State, search_text, turn_search_query
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.retrieval.query_transforms import transform_query
from reground.tools.signals.injection import guard_candidates, model_judge


def retrieve(state: State, env: NodeEnv) -> dict[str, Any]:
    """Search the documents inside the user's scope for the turn's query and flag injected sentences in the
    candidates; after an abstention the earlier search's passages compete again."""
    context = env.context
    query_text = search_text(state)
    query = turn_search_query(
        state,
        context.budgets.history_token_budget,
        context.retrieval.phrase_history_tokens,
        expansions(query_text, state, env),
    )
    env.progress("retrieve", "searching the documents", query=query_text)
    candidates = env.services.retriever(context).search(
        query,
        where=context.metadata_filter or None,
        doc_k=context.budgets.doc_candidates,
        paragraph_k=context.budgets.paragraph_candidates,
        paragraph_scoring=context.budgets.use_paragraph_scoring,
    )
    judge = (
        model_judge(env.services.chat(context, "judge"), env.stats) if context.evidence.injection_model_check else None
    )
    candidates, _ = guard_candidates(candidates, env.stats.notes, judge)
    held = [p for p in state.get("held_passages", []) if p["chunk_id"] not in {c["chunk_id"] for c in candidates}]
    if held:
        # Re-grounding after an abstention: the earlier search's passages compete with the new query's in rerank.
        candidates = [*candidates, *held]
    env.stats.notes.append(f"{len(candidates)} candidates for {state.get('query_mode', 'refined')} query")
    return {"candidates": candidates}


def expansions(query_text: str, state: State, env: NodeEnv) -> tuple[str, ...]:
    """The texts the context's query transform (`context.retrieval.query_transform`) has the refiner model write;
    none by default, and none (noted) when its reply is unusable."""
    settings = env.context.retrieval
    if settings.query_transform == "none":
        return ()
    try:
        return transform_query(
            env.services.chat(env.context, "refiner"),
            settings.query_transform,
            query_text,
            state.get("history", []),
            env.stats,
            history_tokens=settings.transform_history_tokens,
            max_tokens=settings.transform_max_tokens,
        )
    except LLMReplyError as exc:
        env.stats.notes.append(f"query transform {settings.query_transform} unusable ({exc}); searching without it")
        return ()
