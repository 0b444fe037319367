"""Whether a turn can be answered from what retrieval found, LLM-free: support, coverage and readings.

Three measured signals decide between answering, abstaining and asking back (MTRAG-UN's three behaviours):

- **support**: how well the best passage sentence matches the question (the evidence score of tools/signals/evidence.py:
  IDF-weighted word overlap plus MiniLM cosine). A question the documents do not cover leaves every sentence far
  from it; on MTRAG-UN dev this separates answerable from unanswerable tasks (the trained judge,
  tools/signals/judge.py, separates them better out of fold and decides when it is on; evals/results/judge).
- **coverage**: the share of the question's content words that the passages contain; the missing words are what a
  partial answer says the documents do not cover.
- **readings**: a question that refers to something the dialogue never introduced ("the actor", "this county")
  while retrieval finds several documents about different things that fit it about equally admits several readings:
  the turn asks which one is meant, naming them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reground.tools.signals.evidence import Evidence
from reground.tools.text.lexical import lexical_tokens
from reground.tools.tuning.turn import TRIAGE

# A definite or demonstrative reference: the determiner, its first word, and the capitalised words that continue a
# name ("the actor", "this county", "the Prime Minister", "the New York county" -> "the New York").
_REFERENCE = re.compile(r"\b((?i:this|that|these|those|the))\s+([A-Za-z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)")
# "I" and its contractions are capitalised but never a name ("don't do that I'll get insurance").
_FIRST_PERSON = re.compile(r"^I(?:['’](?:ll|m|ve|d))?$")


@dataclass(frozen=True)
class Reading:
    """One thing an ambiguous question may refer to: a document retrieval found, with the passage that shows it."""

    doc_id: str
    label: str  # what the user is shown: the document's title, else the passage's first words
    chunk_id: str
    score: float


# Words that only make sense with the conversation: their presence (or a very short question) makes a question a
# follow-up (worth a rewrite call, and read with its dialogue when its support is measured). Pronouns, and the
# additive words that continue what was said ("also", "else", "more", "another": "where can I find more info?"
# usually means more about the topic at hand).
_ANAPHORA = re.compile(
    r"\b(it|its|it's|that|this|these|those|they|them|their|there|he|she|him|her|his|one|ones|"
    r"same|such|above|mentioned|former|latter|also|too|else|instead|then|so|more|another|other|again)\b",
    re.IGNORECASE,
)
_MIN_STANDALONE_WORDS = TRIAGE.min_standalone_words


def depends_on_dialogue(question: str, has_history: bool) -> bool:
    """Whether a question needs the dialogue to be understood: a short one, or one with a pronoun or an additive
    word ("more", "another"), does; a first turn, or a longer question without them, stands alone."""
    if not has_history:
        return False
    words = question.split()
    return len(words) < _MIN_STANDALONE_WORDS or bool(_ANAPHORA.search(question))


def support(evidence: Sequence[Evidence], dense_weight: float = 1.0) -> float:
    """How well the best passage sentence matches the question: its word overlap plus its cosine with the question
    or, for a follow-up that depends on the dialogue ("yes", "what about the car?"), with the question read in its
    dialogue, whichever is closer. On MTRAG-UN and doc2dial dev the dialogue view lets the same false-refusal rate
    (3-4%) catch 21-23 of 40 unanswerable tasks instead of 7 (evals/README.md, "Ask, abstain or answer")."""
    return max((e.lexical + dense_weight * max(e.dense, e.dense_dialogue) for e in evidence), default=0.0)


# A question with a pronoun and at most this many content words leans on the pronoun for its topic.
MAX_REFERENT_CONTENT_WORDS = 2


def dangling_referent(question: str, history: Sequence[Mapping[str, str]]) -> str:
    """The pronoun an opening question leans on for its topic ("How do I configure it?" -> "it"), when nothing said
    before names it and the question itself has at most MAX_REFERENT_CONTENT_WORDS content words; else ""."""
    if history:
        return ""
    match = re.search(r"\b(it|its|this|that|these|those|they|them|their)\b\s*[?.!]?\s*$", question.strip(), re.I)
    match = match or re.search(r"\b(it|they|them)\b", question, re.I)
    if match is None or len(lexical_tokens(question)) > MAX_REFERENT_CONTENT_WORDS:
        return ""
    return match.group(1).lower()


def stands_alone(question: str, history: Sequence[Mapping[str, str]]) -> bool:
    """Whether a follow-up can be read without the dialogue: no pronoun or ellipsis (`depends_on_dialogue`) and no
    definite reference to something the dialogue never named ("the first program", "the questions"). Only such a
    question may be searched as a new topic: on 100 doc2dial dev cases, searching "tell me the questions i must
    answer" without its dialogue answered from another document instead of abstaining."""
    return not depends_on_dialogue(question, bool(history)) and not unresolved_references(question, history)


def unresolved_references(question: str, history: Sequence[Mapping[str, str]]) -> list[str]:
    """Definite or demonstrative references of the question whose words the dialogue never used ("the actor",
    "this burger"): they point at something the user has in mind but has not named."""
    said = set(lexical_tokens(" ".join(str(turn.get("text", "")) for turn in history)))
    found: list[str] = []
    for match in _REFERENCE.finditer(question):
        words = list(itertools.takewhile(lambda w: not _FIRST_PERSON.match(w), match.group(2).split()))
        if not words:
            continue
        if not words[0][0].isupper():
            words = words[:1]  # a common noun: the word after the determiner ("the policy give" -> "the policy")
        terms = lexical_tokens(" ".join(words))
        if terms and not set(terms) & said:
            found.append(f"{match.group(1).lower()} {' '.join(words)}")
    return found


def _label(candidate: Mapping[str, Any], words: int = TRIAGE.reading_label_words) -> str:
    """The document's title; for one without a title of its own (the loaders title it by its id, which means nothing
    to a reader: "ibmcld_13724-17421-19534"), its passage's first words."""
    title = str(candidate.get("title") or "").strip()
    if title and title != str(candidate.get("doc_id", "")):
        return title
    text = " ".join(str(candidate.get("text", "")).split()[:words])
    return f"{text} ..." if text else str(candidate.get("doc_id", ""))


def readings(candidates: Iterable[Mapping[str, Any]], ratio: float, limit: int = TRIAGE.max_readings) -> list[Reading]:
    """Distinct documents among the candidates whose document score is within `ratio` of the best one, best first
    (one reading per title: several passages of one document are one reading)."""
    ranked = sorted(candidates, key=lambda c: -float(c.get("doc_score", 0.0)))
    if not ranked:
        return []
    top = float(ranked[0].get("doc_score", 0.0))
    out: list[Reading] = []
    seen_labels: set[str] = set()
    seen_docs: set[str] = set()
    for candidate in ranked:
        score = float(candidate.get("doc_score", 0.0))
        if top > 0 and score < ratio * top:
            break
        label, doc_id = _label(candidate), str(candidate["doc_id"])
        if label.lower() in seen_labels or doc_id in seen_docs:
            continue
        seen_labels.add(label.lower())
        seen_docs.add(doc_id)
        out.append(Reading(doc_id, label, str(candidate.get("chunk_id", "")), round(score, 4)))
        if len(out) >= limit:
            break
    return out


def coverage(question: str, texts: Sequence[str]) -> tuple[float, list[str]]:
    """(share of the question's content words found in `texts`, the missing words in question order)."""
    terms = list(dict.fromkeys(lexical_tokens(question)))
    if not terms:
        return 1.0, []
    present: set[str] = set()
    for text in texts:
        present.update(lexical_tokens(text))
    missing = [t for t in terms if t not in present]
    return 1.0 - len(missing) / len(terms), missing
