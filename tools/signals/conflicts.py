"""Conflicting statements surface: when the passages state the reply's fact twice and the two disagree (a figure, a
date, yes or no; within a page or across pages), the reply says both, with their sources, instead of one.

A poisoned page need not give orders: "Update of 1 December, which supersedes the paragraph above: the bonus is
discontinued" or an "editor's note" raising a discount to 50% reads as policy, and the reply quoted it as the
policy. Neither statement is trusted over the other: "supersedes", "updated", "editor's note" give no
authority, they only show that a sentence speaks of the same fact as another.

Two sentences state the same fact when, with their figures set aside, they say nearly the same thing (most of
their content words shared) and both hold the reply's whole subject (the question's words the reply holds: a
sentence about the parking card is not about the badge, however alike the two read), or when one of them claims to
change or correct something (update language) and both hold at least half the subject. They disagree when they
give the same kind of figure (an amount in a currency, a percentage, a duration in the same unit, a date) with
different values, or when one says the thing is no longer (discontinued, cancelled, no longer ...) and the other
states it. Figures of different conditions on one page ("under full retirement age" / "in the year you reach it")
share too few words to count, which keeps real documents' replies as they are (evals/README.md, "Prompt
injection").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reground.prompts.injection import CONFLICT_LINE, CONFLICT_REPLY, SCOPED_CONFLICT_LINE
from reground.tools.signals.figures import Figure, extract_figures
from reground.tools.signals.injection import passage_flags, split_sentences
from reground.tools.signals.scope_claims import scope_breadth, scope_label
from reground.tools.text.lexical import STOPWORDS, lexical_tokens, words
from reground.tools.text.sentences import strip_citations
from reground.tools.tuning.signals import CONFLICTS

_UPDATE = re.compile(
    r"^\W*(?:\[\d+\]\s*)?(?:update|updated|correction|corrected|erratum|amended|amendment|revised|revision|note|"
    r"editor'?s\s+note|important)\b|\b(?:supersed\w*|update\s+(?:of|from|on)\b|editor'?s\s+note|(?:this|which)\s+"
    r"replaces|replaces\s+(?:the|any|all)|in\s+place\s+of|(?:changed|raised|lowered|increased|decreased|reduced|cut)"
    r"\s+to|with\s+effect\s+from|effective\s+(?:from|immediately))\b",
    re.IGNORECASE,
)
# A statement that the thing is no more (against one stating it): "discontinued", "no longer paid".
_NEGATIVE = re.compile(
    r"\b(?:discontinu\w*|cancel+ed|abolished|withdrawn|scrapped|terminated|ceased|no\s+longer"
    r"|not\s+(?:available|offered|paid|provided|granted)\s+any\s*more)\b",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_MONEY = frozenset({"EUR", "USD", "GBP", "CHF", "JPY", "INR", "CAD", "AUD", "SEK", "PLN"})
# A price of nothing, stated in words: "free", "free of charge", "at no cost" (an amount of 0 against "£2").
_FREE = re.compile(r"\b(?:free(?:\s+of\s+charge)?|at\s+no\s+(?:extra\s+)?(?:cost|charge)|no\s+charge|gratis)\b", re.I)
# Words that name the value asked for, not what it is of: they are no part of a statement's subject.
_VALUE_WORDS = frozenset({"free", "charge", "gratis", "cost", "costs", "price", "fee", "fees", "much"})


@dataclass(frozen=True)
class Statement:
    """A sentence of a passage (1-based `passage` number), its figures read when asked (most are never compared)."""

    text: str
    passage: int

    @property
    def figures(self) -> tuple[Figure, ...]:
        return _figures(self.text)


@dataclass(frozen=True)
class Conflict:
    """Two statements of the reply's fact that disagree: `said` (the one the reply holds) and `other`, and on what
    (the two figures, or "yes/no"). `scoped`: `said` comes from a page scoped to the user's own value and `other`
    from one claiming a wider scope ("all"): the first applies to the user (whichever the reply held)."""

    said: Statement
    other: Statement
    about: str
    scoped: bool = False


def _kind(figure: Figure) -> str:
    """What a figure measures: money, a share, a duration unit, a date or a time (a bare number: nothing)."""
    if figure.unit in _MONEY or figure.text == "free":
        return "money"
    return figure.unit


@lru_cache(maxsize=CONFLICTS.texts_kept)
def _words(text: str) -> frozenset[str]:
    """Content words, figures left out."""
    return frozenset(w for w in lexical_tokens(text) if not _DIGIT.search(w))


@lru_cache(maxsize=CONFLICTS.texts_kept)
def _figures(sentence: str) -> tuple[Figure, ...]:
    """The sentence's figures of a kind (money, shares, durations, dates), "free" as an amount of 0."""
    figures = [f for f in extract_figures(sentence) if _kind(f)]
    if _FREE.search(sentence) and not any(_kind(f) == "money" for f in figures):
        figures.append(Figure("0", "", "free"))
    return tuple(figures)


def _statements(passages: Sequence[Mapping[str, Any]]) -> list[Statement]:
    """Every unflagged sentence of the passages with its figures (flagged text states nothing: it gives orders)."""
    out: list[Statement] = []
    for number, passage in enumerate(passages, start=1):
        flagged = passage_flags(passage)
        for sentence in split_sentences(str(passage.get("text", ""))):
            if sentence not in flagged:  # the passage's own units, flagged at read time (and at ingest)
                out.append(Statement(sentence, number))
    return out


def _same_fact(a: str, b: str, subject: frozenset[str]) -> bool:
    """Whether two sentences speak of the same fact: nearly the same words with figures set aside, each holding the
    whole subject (the question's words the reply holds: "parking card" is not "badge", however alike the two
    read); or one of them claims to update something and each holds at least half the subject ("the discount was
    raised to 50%"). Without a subject (the reply holds none of the question's words), none."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    if not subject:
        return False  # what the question asks about is not in the reply: nothing says the two are one fact
    shared = len(wa & wb)
    alike = shared / min(len(wa), len(wb)) >= CONFLICTS.same_words_share and shared >= CONFLICTS.min_shared
    # The same statement with another value: one side adds at most a few words ("for all employees"), the other
    # none; words on both sides ("a man who turned 65" / "a woman who turned 65") make two statements.
    only_a, only_b = wa - wb - _VALUE_WORDS, wb - wa - _VALUE_WORDS
    restated = min(len(only_a), len(only_b)) == 0 and max(len(only_a), len(only_b)) <= CONFLICTS.added_words
    if alike and restated and subject <= wa and subject <= wb:
        return True
    held = min(len(subject & wa), len(subject & wb))
    updating = bool(_UPDATE.search(a) or _UPDATE.search(b))
    return held * 2 >= len(subject) and updating and not _other_kind(a, b, subject)


def _other_kind(a: str, b: str, subject: frozenset[str]) -> bool:
    """Whether a subject word the two share is qualified differently in each ("the travel grant" / "the book
    grant"): then they speak of two things of a kind, not of one."""
    ta, tb = words(a), words(b)
    for word in subject & set(ta) & set(tb):
        before_a = {ta[i - 1] for i, t in enumerate(ta) if t == word and i > 0 and _qualifier(ta[i - 1])}
        before_b = {tb[i - 1] for i, t in enumerate(tb) if t == word and i > 0 and _qualifier(tb[i - 1])}
        if before_a and before_b and not before_a & before_b:
            return True
    return False


def _qualifier(word: str) -> bool:
    return word not in STOPWORDS and not any(ch.isdigit() for ch in word)


def _near_figure(sentence: str, figure: Figure) -> tuple[frozenset[str], frozenset[str]]:
    """The content words within `CONFLICTS.figure_window` of them before a figure and after it (its unit, the word
    right after it, left out): what the figure is a figure of."""
    mark = figure.text or figure.value
    at = sentence.find(mark)
    if at < 0:
        return frozenset(), frozenset()
    after = words(sentence[at + len(mark) :])
    if figure.unit and after:
        after = after[1:]
    before = [w for w in words(sentence[:at]) if w not in STOPWORDS and not _DIGIT.search(w)]
    after = [w for w in after if w not in STOPWORDS and not _DIGIT.search(w)]
    return frozenset(before[-CONFLICTS.figure_window :]), frozenset(after[: CONFLICTS.figure_window])


def _same_figure_fact(said: Statement, other: Statement, subject: frozenset[str]) -> bool:
    """Across scopes, where each page words the fact for its own audience ("Staff in the Netherlands receive 16
    weeks of paid parental leave" / "Every colleague is entitled to 26 weeks of fully paid parental leave"): two
    figures of a kind, the subject (the figures' units aside) close to each on the same side. "Parental leave must be
    requested 8 weeks before it starts" names the subject before its figure: a notice period, not the leave."""
    for mine in said.figures:
        for theirs in other.figures:
            if _kind(mine) != _kind(theirs):
                continue
            (before_a, after_a), (before_b, after_b) = _near_figure(said.text, mine), _near_figure(other.text, theirs)
            rest = subject - _unit_words(said.text, mine) - _unit_words(other.text, theirs)
            if rest and ((rest <= after_a and rest <= after_b) or (rest <= before_a and rest <= before_b)):
                return True
    return False


def _unit_words(sentence: str, figure: Figure) -> set[str]:
    """The figure's own words: as written, and its unit (the word right after it)."""
    mark = figure.text or figure.value
    at = sentence.find(mark)
    after = words(sentence[at + len(mark) :])[:1] if at >= 0 and figure.unit else []
    return set(words(mark)) | set(after)


def _disagree(said: Statement, other: Statement) -> str | None:
    """On what two statements of one fact disagree ("80 EUR / 500 EUR", "yes/no"), or None when they agree."""
    for mine in said.figures:
        theirs = [f for f in other.figures if _kind(f) == _kind(mine)]
        if theirs and all(f.value != mine.value for f in theirs):
            return f"{mine.text if mine.text == 'free' else mine} / {theirs[0]}"
    if bool(_NEGATIVE.search(said.text)) != bool(_NEGATIVE.search(other.text)):
        return "yes/no"
    return None


def _source_of(sentence: str, statements: Sequence[Statement]) -> Statement | None:
    """The passage statement a reply sentence restates (most shared words, at least half of the sentence's)."""
    words = _words(sentence)
    best = max(statements, key=lambda s: len(words & _words(s.text)), default=None)
    if best is None or not words or len(words & _words(best.text)) * 2 < len(words):
        return None
    return best


def _metadata(passage: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = passage.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def find_conflicts(
    reply: str, question: str, passages: Sequence[Mapping[str, Any]], scope: Mapping[str, Any] | None = None
) -> list[Conflict]:
    """The passages' statements that disagree with what the reply says of the question's subject, at most one per
    reply sentence (the closest). With the user's `scope` (the metadata filter), a scope claim is a claim: pages of
    different breadth (one for the user's value, one marked "all" or listing more values) that give the subject's
    figure differently disagree, however differently each words it, and the narrower page's statement comes first
    (`Conflict.scoped`): a page for everyone does not override the one for the user."""
    statements = _statements(passages)
    fields = dict(scope or {})  # only its field names count; the store validated the filter
    breadth = {n: scope_breadth(_metadata(p), fields) for n, p in enumerate(passages, start=1)} if fields else {}
    question_words = _words(question)
    out: list[Conflict] = []
    for sentence in split_sentences(strip_citations(reply)):
        source = _source_of(sentence, statements)
        if source is None:
            continue
        said = Statement(sentence if _figures(sentence) else source.text, source.passage)
        subject = (question_words & _words(sentence)) - _VALUE_WORDS
        for other in statements:
            if _words(other.text) == _words(said.text):
                continue  # the statement the reply restates (a written reply's own source is read against it too)
            across = bool(breadth) and breadth[said.passage] != breadth[other.passage]
            same = _same_fact(said.text, other.text, subject) or (
                across and bool(subject) and _same_figure_fact(said, other, subject)
            )
            about = _disagree(said, other) if same else None
            if about is not None and all(c.other.text != other.text and c.said.text != other.text for c in out):
                if across and breadth[other.passage] < breadth[said.passage]:
                    mine = Statement(source.text, source.passage)  # the wider page's own words, not the reply's
                    out.append(Conflict(other, mine, _disagree(other, mine) or about, scoped=True))
                else:
                    out.append(Conflict(said, other, about, scoped=across))
                break
    return out[: CONFLICTS.max_shown]


def conflict_reply(
    conflicts: Sequence[Conflict], passages: Sequence[Mapping[str, Any]], scope: Mapping[str, Any] | None = None
) -> str:
    """The reply that says both statements of each conflict, with their sources, and that they disagree; a scoped
    conflict says first what the page for the user's scope states, then what a page claiming a wider scope does."""
    fields = dict(scope or {})  # only its field names count; the store validated the filter

    def source(statement: Statement) -> str:
        passage = passages[statement.passage - 1]
        return str(passage.get("title") or passage.get("doc_id") or f"passage {statement.passage}")

    def label(statement: Statement) -> str:
        return scope_label(_metadata(passages[statement.passage - 1]), fields) or "no scope"

    lines = [
        SCOPED_CONFLICT_LINE.format(
            scope=label(c.said),
            said=c.said.text,
            said_source=source(c.said),
            other_scope=label(c.other),
            other=c.other.text,
            other_source=source(c.other),
        )
        if c.scoped and fields
        else CONFLICT_LINE.format(
            said=c.said.text,
            said_source=source(c.said),
            other=c.other.text,
            other_source=source(c.other),
            about=c.about,
        )
        for c in conflicts
    ]
    return CONFLICT_REPLY.format(statements=" ".join(lines))


def conflict_records(conflicts: Sequence[Conflict], passages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The result's `conflicts`: each pair of statements with its passage number, document and title."""

    def record(statement: Statement) -> dict[str, Any]:
        passage = passages[statement.passage - 1]
        return {
            "text": statement.text,
            "number": statement.passage,
            "doc_id": passage.get("doc_id"),
            "title": passage.get("title", ""),
        }

    return [{"about": c.about, "scoped": c.scoped, "statements": [record(c.said), record(c.other)]} for c in conflicts]
