"""What a conversation turn searches with: the (refined) question, the question plus recent dialogue, the
conversation's opening exchange and earlier messages (for topic shifts), the latest replies' phrases, keywords and
transforms' expansions (`conversation_query`). tools/retrieval/search.py runs the query; ranking.py fuses its
signals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reground.tools.text.tokens import history_query
from reground.tools.types import is_assistant


@dataclass(frozen=True)
class EarlierTurn:
    """A user message earlier in the dialogue: its text, its own history query and the reply that followed it."""

    text: str
    history_query: str
    reply: str = ""


@dataclass(frozen=True)
class Topic:
    """Where the conversation's current topic began: the text the topic signal searches and, when a topic shift was
    detected, the index in `earlier_turns` of the message that opened it (len(earlier_turns): this turn)."""

    text: str
    since: int | None = None


@dataclass(frozen=True)
class RetrievalQuery:
    """What to search with: the (refined) question, the question plus recent dialogue, keywords, and the texts a
    query transform wrote (`expansions`: a hypothetical passage, topics or question variants)."""

    question: str
    history_query: str
    keywords: tuple[str, ...] = ()
    expansions: tuple[str, ...] = ()
    # The conversation's topic: its opening exchange (the user's first message and the reply to it; the question
    # itself on a first turn), searched densely as the `dense_topic` signal (empty: the history query stands in).
    # `earlier_turns` holds each later user message of the dialogue with its own history query and the reply that
    # followed it, so that topic-shift detection can move the topic to the latest message that changed it.
    topic_query: str = ""
    earlier_turns: tuple[EarlierTurn, ...] = ()
    # The latest assistant replies, whose word n-grams the `document_phrases` signal looks up (replies quote the
    # documents they come from; the user's own words would only find documents that share common phrases).
    phrase_query: str = ""
    # The turn's question as the dialogue reads it (the standalone rewrite, else the message), when `question` is a
    # re-grounding's search text: what the chunk ranker reads paragraphs against. Empty: `question`.
    turn_question: str = ""

    @property
    def asked(self) -> str:
        return self.turn_question.strip() or self.question


# The texts chunk-level signals search, and the whole-document signals with the text each one reads
# (see RetrievalSettings.weights).
CHUNK_TEXTS = ("question", "history", "topic")
DOCUMENT_SIGNALS = {"document_lexical": "history", "document_question": "question", "document_phrases": "phrases"}


def _turn(turn: tuple[str, str] | Mapping[str, str]) -> tuple[str, str]:
    if isinstance(turn, tuple):
        return str(turn[0]), str(turn[1]).strip()
    return str(turn.get("role", "")), str(turn.get("text", "")).strip()


def conversation_query(
    question: str,
    history: Sequence[tuple[str, str] | Mapping[str, str]],
    budget_tokens: int,
    *,
    search_question: str | None = None,
    keywords: Sequence[str] = (),
    expansions: Sequence[str] = (),
    phrase_tokens: int,
    turn_question: str = "",
) -> RetrievalQuery:
    """The query of a conversation turn: the question (or a rewrite of it, `search_question`), the question plus
    recent dialogue (`budget_tokens`), the latest assistant replies (`phrase_tokens` of them: the phrase query),
    the conversation's opening exchange and its earlier user messages (for topic shifts).

    A user turn is any turn whose role is not an assistant's ("agent", "assistant", "ai")."""
    turns = [_turn(t) for t in history]
    turns = [(role, text) for role, text in turns if text]
    users = [i for i, (role, _) in enumerate(turns) if not is_assistant(role)]

    def reply_after(i: int) -> str:
        return next((text for role, text in turns[i + 1 :] if is_assistant(role)), "")

    if users:
        first = users[0]
        opening = f"{turns[first][1]} {reply_after(first)}".strip()
    else:
        opening = question.strip()
    earlier = tuple(
        EarlierTurn(turns[i][1], history_query(turns[i][1], turns[:i], budget_tokens), reply_after(i))
        for i in users[1:]
    )
    return RetrievalQuery(
        question=(search_question or question).strip(),
        history_query=history_query(question, history, budget_tokens),
        keywords=tuple(keywords),
        expansions=tuple(expansions),
        topic_query=opening,
        earlier_turns=earlier,
        phrase_query=history_query("", [t for t in turns if is_assistant(t[0])], phrase_tokens),
        turn_question=turn_question.strip(),
    )
