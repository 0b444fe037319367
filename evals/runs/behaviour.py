"""What a reply does: answer, abstain or ask for clarification (MTRAG-UN's three expected behaviours).

Graph systems say it themselves (`result["kind"]`); baselines only return text, so their replies are
classified by a stated rule, checked against MTRAG-UN's reference replies in the tests:

1. **clarify** — the reply's last sentence is a question that asks the user to choose or specify
   ("Which one do you mean?", "Are you referring to ...?", "Could you clarify ...?"), or the reply
   asks them to ("please specify which ..."). A question that merely continues the conversation
   ("Anything else?") is not a clarification.
2. **abstain** — some sentence says the information is missing ("the documents do not contain",
   "I don't have that information", "I cannot find", "I do not know") and the rest of the reply
   carries fewer than `PARTIAL_MIN_WORDS` words (words after a "but" / "however" in a refusal count
   as the rest): a refusal with a polite tail. A refusal followed by real content ("I do not have
   much information on X, but ...") is a partial answer: **answer**.
3. **answer** — everything else.

Graph results that predate `kind`, or carry an unknown one, fall back to the rule (the row records
which was used in `kind_source`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

# hedge: the graph's middle band, the closest passage said as not quite the answer (baselines never hedge).
Behaviour = Literal["answer", "hedge", "abstain", "clarify"]
KINDS: tuple[Behaviour, ...] = ("answer", "hedge", "abstain", "clarify")
ANSWERABILITY = ("ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED", "PARTIAL")
ANSWERED_CLASSES = ("ANSWERABLE", "PARTIAL")  # classes with a reference answer worth a token F1
PARTIAL_MIN_WORDS = 10
# The graph's own names for the same behaviours (the draft's "not_found" is an abstention).
GRAPH_KINDS: dict[str, Behaviour] = {
    "answer": "answer",
    "partial": "answer",
    "hedge": "hedge",
    "abstain": "abstain",
    "not_found": "abstain",
    "clarify": "clarify",
}

_CLARIFY = re.compile(
    r"\b(which|what)\b[^?]{0,80}\b(do|did|are|were|is|was|would|should)\s+you\b"
    r"|\bdo you mean\b|\bdid you mean\b"
    r"|\bare you (referring|asking|talking|thinking|interested|looking)\b"
    r"|\b(could|can|would) you (please )?(clarify|specify|tell me (which|what|more)|be more specific|provide more)"
    r"|\bwhich (one|of (these|them|the))\b",
    re.IGNORECASE,
)
_PLEASE_SPECIFY = re.compile(r"\bplease (clarify|specify)\b", re.IGNORECASE)
_ABSTAIN = re.compile(
    r"\b(do|does|did)\s*(not|n't)\s+(contain|include|mention|say|state|specify|cover|provide|address|discuss|"
    r"have|know|describe|explain|offer|give)\b"
    r"|\b(cannot|can't|can ?not|could ?not|couldn't|unable to|not able to)\s+(find|locate|answer|determine|"
    r"provide|help|say|tell|confirm|access|advise|explain|recommend|comment)\b"
    r"|\bno (relevant |specific |such |further |additional )?(information|details|data|answer|mention)\b"
    r"|\bnot (mentioned|covered|specified|stated|provided|included|addressed|available|found|given|described)\b"
    r"|\b(i am|i'm) (not sure|unsure|afraid)\b"
    r"|\bnothing (about|on|regarding)\b"
    r"|\bI (do not|don't) know\b",
    re.IGNORECASE,
)
_CONTRAST = re.compile(r"[,;:]?\s*\b(but|however|although|though|yet|still)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'%$.-]*")


def sentences(text: str) -> list[str]:
    """The reply's sentences (line breaks end sentences too), citations removed."""
    out: list[str] = []
    for line in _CITATION.sub("", text).splitlines():
        out += [s.strip() for s in _SENTENCE_END.split(line.strip()) if s.strip()]
    return out


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _content_words(sentence: str) -> tuple[bool, int]:
    """(is a refusal, words of content): a refusal's words after a 'but' / 'however' are content."""
    found = _ABSTAIN.search(sentence)
    if not found:
        return False, _words(sentence)
    turn = _CONTRAST.search(sentence, found.end())
    return True, _words(sentence[turn.end() :]) if turn else 0


def classify_reply(text: str) -> Behaviour:
    """The rule above, applied to a reply's text."""
    parts = sentences(text)
    if not parts:
        return "abstain"  # an empty reply gives the user nothing
    last = parts[-1]
    if (last.endswith("?") and _CLARIFY.search(last)) or _PLEASE_SPECIFY.search(text):
        return "clarify"
    judged = [_content_words(s) for s in parts]
    if any(refusal for refusal, _ in judged) and sum(words for _, words in judged) < PARTIAL_MIN_WORDS:
        return "abstain"
    return "answer"


def behaviour_of(result: Mapping[str, Any]) -> tuple[Behaviour, str]:
    """(behaviour, source): the graph's own `kind` when it names one, else the rule on the answer."""
    kind = result.get("kind")
    if isinstance(kind, str) and kind in GRAPH_KINDS:
        return GRAPH_KINDS[kind], "graph"
    return classify_reply(str(result.get("answer") or "")), "rule"


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def behaviour_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{ANSWERABILITY: {n, answer, abstain, clarify (fractions)[, token_f1, gold_in_passages]}} over
    finished rows with an answerability label; classes with no rows are left out."""
    table: dict[str, dict[str, Any]] = {}
    labels = [
        *ANSWERABILITY,
        *sorted({str(r["answerability"]) for r in rows if r.get("answerability")} - set(ANSWERABILITY)),
    ]
    for label in labels:
        group = [r for r in rows if r.get("answerability") == label and not r.get("error")]
        if not group:
            continue
        entry: dict[str, Any] = {"n": len(group)}
        for kind in KINDS:
            entry[kind] = sum(1 for r in group if r.get("behaviour") == kind) / len(group)
        if label in ANSWERED_CLASSES:
            entry["token_f1"] = _mean((r.get("metrics") or {}).get("token_f1") for r in group)
            entry["gold_in_passages"] = _mean(
                None if r.get("gold_in_top3") is None else float(r["gold_in_top3"]) for r in group
            )
        table[label] = entry
    return table
