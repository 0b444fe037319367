"""What several nodes share: their environment (clients, cost accounting, progress), the prompt layout, the turn's
reading of its passages, how a draft is made and capped, the extract reply at a length, and the rewrite's reply
schema. No node module imports another node's module: what two of them need lives here (or in routes.py).

The formatting helpers live in prompts/formatting.py (evals use them too); they are re-exported here for nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator
from reground.nodes.context import Context, EvidenceSettings
from reground.nodes.state import Draft, State
from reground.prompts import answer as answer_prompts
from reground.prompts.formatting import format_conversation, format_history, format_passages
from reground.tools.adapters.chat import CallStats, one_line
from reground.tools.adapters.structured import SchemaT, call_json
from reground.tools.services import Role, Services
from reground.tools.signals.contacts import registrable_domain
from reground.tools.signals.evidence import Evidence, previous_reply, relevance_parts, reply_words
from reground.tools.signals.extract_reply import extractive_answer
from reground.tools.signals.reading import TurnReading, read_turn
from reground.tools.signals.scoring import principle_scores
from reground.tools.signals.sensitive import Trust
from reground.tools.stores.trusted_domains import settings_dir, trusted_domains
from reground.tools.text.code_blocks import close_fences
from reground.tools.text.sentences import sentence_parts, text_sentences
from reground.tools.types import Passage

__all__ = [
    "NodeEnv",
    "Rewrite",
    "answerable_of",
    "cap_sentences",
    "collection_trust",
    "current_draft",
    "evidence_for",
    "evidence_of",
    "extracted_sentences",
    "format_conversation",
    "format_history",
    "format_passages",
    "grounded_messages",
    "make_draft",
    "question_of",
    "rewrite_reply",
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
    """The passages' sentences ranked against the turn's question: by the trained judge when the context uses it,
    which also says whether the passages answer the question at all. Triage reads the kept passages once per
    retrieval and keeps the evidence in state for the answer; rerank's "judge" method reads the candidates, a larger
    set whose reading differs (the overlap IDF is over its sentences).
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


def cap_sentences(text: str, max_sentences: int) -> str:
    """Dialogue replies are short: the answer rules' sentence cap, applied to what the model wrote; a last
    sentence the length cap cut off (no closing punctuation) is dropped when a whole one comes before it. A reply
    with a code block keeps its lines: its sentences are capped, each with the block it introduces, and a block the
    length cap cut off is closed."""
    if "```" in text or "~~~" in text:
        units = text_sentences(close_fences(text))
        return "\n".join(units[:max_sentences]) if units else text.strip()
    parts = sentence_parts(text)
    if len(parts) > 1 and not re.search(r"[.!?\])\"']$", parts[-1]):
        parts = parts[:-1]
    return " ".join(parts[:max_sentences])


def make_draft(
    text: str, passages: Sequence[Passage], state: State, evidence: Sequence[Evidence], *, kind: str = "answer"
) -> Draft:
    """A draft of `text` with its principle and relevance scores (groundedness is check_groundedness's)."""
    scores = principle_scores(text, [p["text"] for p in passages], question_of(state))
    relevance = relevance_parts(text, evidence, previous_reply(state.get("history", [])))
    scores["relevance"] = relevance["relevance"]
    return Draft(
        text=text,
        principle_scores=scores,
        groundedness=0.0,
        groundedness_parts={},
        unsupported_claims=[],
        kind=kind,
        relevance=relevance["relevance"],
        relevance_parts=relevance,
    )


def extracted_sentences(
    evidence: Sequence[Evidence],
    settings: EvidenceSettings,
    length: str,
    history: Sequence[Mapping[str, str]] = (),
) -> tuple[str, list[int]]:
    """The reply an extract-style answer gives at a length (measured on doc2dial and MTRAG-UN dev: evals/README.md).
    'conversation': about as many words as the assistant's replies so far (their median); a first turn, with no
    reply before it, is answered as 'sentence'. Units the unit ranker ranked (documentation with code): the best
    `unit_reply_units` from any passage, whatever the length."""
    if evidence and evidence[0].unit_score is not None:
        return extractive_answer(evidence, settings.unit_reply_units, 0.0)
    target = reply_words(history) if length == "conversation" else 0.0
    if length == "conversation" and not target:
        length = "sentence"
    shape = settings.answer_lengths[length]
    return extractive_answer(
        evidence, shape.sentences, shape.ratio, same_passage=shape.same_passage, target_words=target
    )


class Rewrite(BaseModel):
    """A rewritten question or search query: one line of at least two words."""

    max_chars: ClassVar[int | None] = None  # the run's `refinement.rewrite_max_chars` (rewrite_reply sets it)
    question: str = Field(description="the standalone question")

    @field_validator("question")
    @classmethod
    def _one_question(cls, value: str) -> str:
        value = one_line(value, min_words=2, problem="the rewrite is empty or a single word")
        if cls.max_chars is not None and len(value) > cls.max_chars:
            raise ValueError("the rewrite is far longer than a question")
        return value


@cache
def rewrite_reply(max_chars: int) -> type[Rewrite]:
    """The rewrite's reply schema with the run's length cap (the same JSON schema; one class per cap)."""
    return type("Rewrite", (Rewrite,), {"__doc__": Rewrite.__doc__, "__module__": __name__, "max_chars": max_chars})


def collection_trust(env: NodeEnv) -> Trust:
    """What the sensitive-request check trusts: the collection's trusted domains (learned at ingest, edited with
    `reground collections`) plus the context's `groundedness.trusted_domains`."""
    context = env.context
    store = env.services.passage_store(context)
    record = trusted_domains(settings_dir(store, context.data_dir or None), context.collection)
    extra = frozenset(registrable_domain(d) for d in context.groundedness.trusted_domains if d.strip())
    return record.trust(extra)


def current_draft(state: State, node: str) -> Draft:
    """The draft a node after the answer works on (the wiring guarantees one: its absence is a bug)."""
    draft = state.get("draft")
    if draft is None:
        raise ValueError(f"{node} ran without a draft answer")
    return draft
