"""Graph state: what callers pass (InputState), what a turn carries, and what it returns (TurnResult)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from reground.nodes.thread_messages import add_turn_messages
from reground.tools.retrieval.query import RetrievalQuery, conversation_query
from reground.tools.types import Passage


class TraceEvent(TypedDict, total=False):
    """One step of a turn: which node ran, what it cost, and anything worth seeing in Studio."""

    node: str
    seconds: float
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    note: str


def merge_trace(current: list[TraceEvent] | None, update: list[TraceEvent] | None) -> list[TraceEvent]:
    """Append events; an update starting with {"node": "start_turn"} begins a fresh per-turn trace."""
    if not update:
        return list(current or [])
    if update[0].get("node") == "start_turn":
        return list(update)
    return [*(current or []), *update]


class Citation(TypedDict):
    number: int
    doc_id: str
    title: str
    url: str
    chunk_id: str
    quote: str


class PassageJudgement(TypedDict):
    number: int
    chunk_id: str
    helpful: bool
    reason: str


class EvidenceItem(TypedDict):
    """A passage sentence ranked against the question (signals/evidence.py), kept in state for the turn's nodes."""

    text: str
    passage: int  # 1-based number of the passage it comes from
    score: float
    lexical: float
    dense: float
    dense_dialogue: float
    order: int
    continuity: float  # how closely it follows the sentence the previous reply came from, in [0, 1]
    judge: float  # the trained judge's probability that it answers the question (-1: not judged)
    judge_weight: float  # the weight of that probability in the ranking
    unit_score: float | None  # the unit ranker's logit when it ranked the turn's units (documentation with code)


class ClarifyOption(TypedDict):
    """One reading of an ambiguous question: a document retrieval found, named so the user can pick it."""

    label: str
    doc_id: str
    chunk_id: str


class Draft(TypedDict):
    """An answer candidate with its proxy scores (ProMiSe) and groundedness (ReGround)."""

    text: str
    principle_scores: dict[str, float]
    groundedness: float
    groundedness_parts: dict[str, float]
    unsupported_claims: list[str]
    kind: str  # "answer" | "partial" (answers part, says what is missing) | "not_found" | "clarify"
    relevance: (
        float  # does it answer the question: token F1 against the closest passage sentences (tools/signals/evidence.py)
    )
    relevance_parts: dict[str, float]


class TurnResult(TypedDict):
    answer: str
    citations: list[Citation]
    passages: list[Passage]
    groundedness: float
    relevance: float
    principle_scores: dict[str, float]
    passed: bool
    fallback_reason: str | None
    reground_attempts: int
    refine_iterations: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    review: dict[str, Any] | None
    notices: list[str]  # what the user should know about how the turn treated the input (e.g. a cut question)
    # What kind of reply this is: "answer", "partial" (answers what the documents cover and says what they do
    # not), "clarify" (asks which of `options` the user means) or "abstain" (the documents do not cover it).
    kind: str
    options: list[ClarifyOption]  # the readings a clarifying question offers, with the documents behind them
    missing: list[str]  # for a partial answer: the question's words no passage covers
    signals: dict[str, float]  # the measured signals the turn decided on (support, coverage, readings, ...)
    # Why the reply carries a warning: it asks for a secret, personal data or a payment, or gives a contact off the
    # collection's trusted domains (tools/signals/sensitive.py); empty when it needs none.
    cautions: list[str]
    # Statements of the reply's fact in the passages that disagree with it (tools/signals/conflicts.py): each
    # {"statements": [{"text", "number", "doc_id", "title"}, ...], "about": what they disagree on}.
    conflicts: list[dict[str, Any]]


class InputState(TypedDict):
    """What a caller passes: the conversation, the last message being the user's question.

    A new user message replaces unanswered ones a failed turn left at the thread's end (nodes/thread_messages.py).
    """

    messages: Annotated[list[AnyMessage], add_turn_messages]


class State(InputState, total=False):
    question: str
    history: list[dict[str, str]]
    standalone_question: str
    retrieval_query: str
    # "refined" | "history" (no usable rewrite) | "forced_history" | "rewritten" | "clarified" | "new_topic"
    # (re-grounding after no support: the question searched without the dialogue)
    query_mode: str
    keywords: list[str]
    candidates: list[Passage]
    passages: list[Passage]
    # The passages the search before a re-grounding found (after an abstention or an ungrounded reply), kept while
    # re_ground searches again: the turn answers from whichever search the judge finds more answerable (a new query
    # can lose the right document).
    held_passages: list[Passage]
    held_answerable: float
    evidence: list[EvidenceItem]  # the passages' sentences ranked against the question (set by triage)
    signals: dict[str, float]  # support, coverage and readings measured on the passages (set by triage)
    decision: str  # "answer" | "hedge" | "clarify" | "abstain": triage's verdict on the retrieved passages
    options: list[ClarifyOption]  # the readings a clarifying question offers
    referent: str  # an opening question's pronoun that nothing said yet names ("it"): the turn asks what it is
    missing: list[str]  # the question's content words no passage covers
    judgements: list[PassageJudgement]
    draft: Draft | None
    quoted: bool  # the written reply failed its checks and the passages' own sentences replaced it
    draft_checked: bool  # False while the current draft has not been through check_groundedness
    reground_attempts: int
    refine_iterations: int
    turn_started: float
    review: dict[str, Any] | None
    notices: list[str]
    trace: Annotated[list[TraceEvent], merge_trace]
    result: TurnResult


# Every per-turn key of State with the value a turn starts from: start_turn resets exactly these, so a key added
# to State must be listed here or in CARRIED_ACROSS_TURNS (tests/unit/test_context.py checks that every key is).
PER_TURN_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "question": "",
        "history": [],
        "standalone_question": "",
        "retrieval_query": "",
        "query_mode": "refined",
        "keywords": [],
        "candidates": [],
        "passages": [],
        "held_passages": [],
        "held_answerable": -1.0,
        "evidence": [],
        "signals": {},
        "decision": "answer",
        "options": [],
        "referent": "",
        "missing": [],
        "judgements": [],
        "draft": None,
        "draft_checked": False,
        "quoted": False,
        "reground_attempts": 0,
        "refine_iterations": 0,
        "turn_started": 0.0,
        "review": None,
        "notices": [],
    }
)
# Kept from turn to turn: the thread's messages, the trace (its reducer restarts it at start_turn) and the
# last turn's result (replaced by finalize).
CARRIED_ACROSS_TURNS = frozenset({"messages", "trace", "result"})


def search_text(state: Mapping[str, Any]) -> str:
    """The text a turn searches: a re-grounding's query, else the standalone question, else the message."""
    return str(state.get("retrieval_query") or state.get("standalone_question") or state["question"])


def turn_search_query(
    state: Mapping[str, Any], budget_tokens: int, phrase_tokens: int, expansions: Sequence[str] = ()
) -> RetrievalQuery:
    """What a graph turn searches with, read from its state: the re-grounding's search text (or the standalone
    question, or the message), the dialogue (none when a re-grounding suspects a change of subject), the keywords,
    and the turn's question for the chunk ranker. The retrieve node and evals/train/chunk_ranker.py both read a
    turn's state here, so tools/retrieval/ takes explicit arguments only."""
    question = str(state["question"])
    history = [] if state.get("query_mode") == "new_topic" else list(state.get("history", []))
    return conversation_query(
        question,
        history,
        budget_tokens,
        search_question=search_text(state),
        keywords=list(state.get("keywords", [])),
        expansions=expansions,
        phrase_tokens=phrase_tokens,
        turn_question=str(state.get("standalone_question") or question),
    )


def fresh_turn(**values: Any) -> dict[str, Any]:
    """The per-turn part of the state for a new turn: the declared defaults (fresh copies), then `values`."""
    unknown = set(values) - set(PER_TURN_DEFAULTS)
    if unknown:
        raise KeyError(f"not per-turn state keys: {sorted(unknown)} (declare them in PER_TURN_DEFAULTS)")
    return {**copy.deepcopy(dict(PER_TURN_DEFAULTS)), **values}


class OutputState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_turn_messages]
    result: TurnResult


# --- the ingestion graph (graph/ingest_graph.py) ---------------------------------------------


class IngestInput(TypedDict, total=False):
    """Inline documents and/or server-side paths (files or folders), and doc_ids to delete first."""

    documents: list[dict[str, Any]]
    paths: list[str]
    delete: list[str]


class IngestOutput(TypedDict, total=False):
    summary: dict[str, Any]


class IngestState(IngestInput, IngestOutput, total=False):
    pass
