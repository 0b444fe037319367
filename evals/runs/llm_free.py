"""The whole graph without an LLM over an eval corpus: the setup evals/runs/passages.py and evals/train/judge.py share.

A scripted chat model (a follow-up whose retrieval is unsure keeps its question unrewritten; replies are extracted,
as by default) over the corpus's eval collection, ingested once. With `chat_model_spec` the same graph runs with that
model instead (the local server's rewrites of follow-ups), for collectors that learn from what the graph reads
with an LLM as well as without one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver


@dataclass
class LlmFreeGraph:
    """The compiled graph, its scripted model (reset per case; None when a real model runs it), the store and the
    context to run it with."""

    graph: Any
    model: Any
    store: Any
    context: Any

    def final_state(self, case: Any, *, scoped: bool) -> dict[str, Any]:
        """One case run to its end in a thread of its own (scoped: within the collection the case names, as `eval
        answers` runs it), and the graph's state after it: what triage read is there for a collector to keep. The
        graph needs a checkpointer."""
        from reground.evals.runs.answers import SCOPE_FIELD, case_scope, graph_messages
        from reground.graph.builder import run_config

        if self.model is not None:
            self.model.reset()
        scope = case_scope(case, SCOPE_FIELD if scoped else None)
        context = self.context.with_(metadata_filter=scope) if scope else self.context
        config = run_config(context, configurable={"thread_id": case.case_id})
        self.graph.invoke({"messages": graph_messages(case)}, context=context, config=config)
        return dict(self.graph.get_state(config).values)


def llm_free_graph(
    docs: Path,
    *,
    data_dir: str | None = None,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    overrides: dict[str, Any] | None = None,
    store: Any = None,
    chat_model_spec: str | None = None,
) -> LlmFreeGraph:
    from reground.evals.data.datasets import EVAL_CHUNK_TOKENS
    from reground.evals.runs.retrieval import collection_name, open_eval_store
    from reground.graph.builder import build_graph
    from reground.nodes.context import Context

    from reground.testing.fake_chat import ScriptedChatModel, first_passage_reply

    if store is None:  # else a caller's store holding the same documents (evals/perf/scale.py: the engine backend)
        store = open_eval_store(docs, data_dir=data_dir, max_tokens=EVAL_CHUNK_TOKENS)
    # With a spec the graph builds that model from its context, as `eval answers` runs it.
    model = ScriptedChatModel(script={"answer": [first_passage_reply]}) if chat_model_spec is None else None
    context = Context(
        collection=collection_name(docs, EVAL_CHUNK_TOKENS),
        **({"data_dir": data_dir} if data_dir else {}),
        **({"chat_model": chat_model_spec} if chat_model_spec else {}),
        **(overrides or {}),
    )
    graph = build_graph(chat_model=model, store=store, checkpointer=checkpointer)
    return LlmFreeGraph(graph=graph, model=model, store=store, context=context)
