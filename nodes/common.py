"""What every node shares: its environment (clients, cost accounting, progress) and the prompt layout.

The formatting helpers live in prompts/formatting.py (evals use them too); they are re-exported here for nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from reground.nodes.context import Context
from reground.nodes.state import Draft, State
from reground.prompts import answer as answer_prompts
from reground.prompts.formatting import format_conversation, format_history, format_passages
from reground.tools.adapters.chat import CallStats
from reground.tools.adapters.structured import SchemaT, call_json
from reground.tools.services import Role, Services
from reground.tools.signals.evidence import Evidence
from reground.tools.signals.reading import TurnReading, read_turn
from reground.tools.types import Passage

__all__ = [
    "NodeEnv",
    "answerable_of",
    "current_draft",
    "evidence_for",
    "evidence_of",
    "format_conversation",
    "format_history",
    "format_passages",
    "grounded_messages",
    "question_of",
    "shared_prefix",
]


@dataclass
class NodeEnv:
    """Handed to a node next to (state, runtime): the graph's clients and this step's cost record."""

    services: Services
    runtime: Runtime[Context]
    stats: CallStats = field(default_factory=CallStats)

    @property
    def context(self) -> Context:
        return self.runtime.context

    def ask(
        self,
        role: Role,
        messages: Sequence[BaseMessage],
        schema: type[SchemaT],
        *,
        tags: Sequence[str],
        max_tokens: int,
        temperature: float | None = None,
    ) -> SchemaT:
        """One schema-constrained call to the role's model; LLMReplyError is left to the node, which has a fallback."""
        model = self.services.chat(self.context, role, temperature=temperature)
        reply, _ = call_json(model, messages, schema, self.stats, tags=tags, max_tokens=max_tokens)
        return reply

    def progress(self, node: str, message: str, **data: Any) -> None:
        """A custom stream event (stream_mode="custom") so UIs can show what the turn is doing."""
        self.runtime.stream_writer({"node": node, "message": message, **data})


def shared_prefix(passages: Sequence[Passage], history: Sequence[dict[str, str]], question: str) -> SystemMessage:
    """The system message every post-retrieval call of a turn starts with, byte for byte."""
    return SystemMessage(
        answer_prompts.SHARED_PREFIX.format(
            passages=format_passages(passages), conversation=format_conversation(history, question)
        )
    )


def grounded_messages(
    passages: Sequence[Passage], history: Sequence[dict[str, str]], question: str, task: str
) -> list[BaseMessage]:
    """Shared prefix first, the call's own task last: what lets the server reuse the prefix."""
    return [shared_prefix(passages, history, question), HumanMessage(task)]


def question_of(state: State) -> str:
    """What the answer must answer: the standalone question when there is one, else the message as asked."""
    return state.get("standalone_question") or state["question"]


def evidence_for(
    state: State, passages: Sequence[Passage], env: NodeEnv, *, answerability_only: bool = False
) -> TurnReading:
    """The passages' sentences ranked against the turn's question (computed once per retrieval, by triage): by the
    trained judge when the context uses it, which also says whether the passages answer the question at all.
    `answerability_only`: a caller that needs only that verdict; the reader and the unit ranker are not asked (the
    answerability head reads the sentence features and coverage, never their logits or the ranking)."""
    context = env.context
    judge = env.services.judge(context) if context.use_trained_judge else None
    unjudged = "the judge reads MiniLM vectors and this collection has others: hand-made ranking only"
    if context.use_trained_judge and judge is None and unjudged not in env.stats.notes:
        env.stats.notes.append(unjudged)  # once a step (triage reads the readings' passages too)
    ranks = not answerability_only
    return read_turn(
        question_of(state),
        state["question"],
        state.get("history", []),
        passages,
        env.services.retriever(context).embed,
        context.evidence_weights(),
        judge=judge,
        reader=env.services.reader() if ranks and judge is not None and context.evidence.reader_weight > 0 else None,
        unit_ranker=env.services.unit_ranker(context) if ranks and context.evidence.unit_ranking != "off" else None,
    )


def answerable_of(state: State, passages: Sequence[Passage], env: NodeEnv) -> float | None:
    """Only the judge's probability that `passages` answer the turn's question (None without the judge), at the
    cost of no reader pass: the value the full reading gives."""
    return evidence_for(state, passages, env, answerability_only=True).answerable


def evidence_of(state: State) -> list[Evidence]:
    """The ranked evidence triage kept in state."""
    return [Evidence(**item) for item in state.get("evidence", [])]


def current_draft(state: State, node: str) -> Draft:
    """The draft a node after the answer works on (the wiring guarantees one: its absence is a bug)."""
    draft = state.get("draft")
    if draft is None:
        raise ValueError(f"{node} ran without a draft answer")
    return draft
