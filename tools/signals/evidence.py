"""Evidence sentences and answer relevance, LLM-free (the extract reply made of them: extract_reply.py).

An answer that answers the question restates the passage sentence that matches the question best (the
*extractive anchor*) rather than another sentence (the carry-over rule for "how many days do I get"), and an
answer that repeats the previous reply does not answer a follow-up. On seeded doc2dial dev answers this signal
tracks token F1 against the human reply better than ROUGE-L against the question (evals/README.md, "Answer
relevance").

Sentences are scored by IDF-weighted overlap with the question's content words (IDF over the candidate
sentences, so words every passage shares count little; a follow-up adds the user's previous message) plus the
question's cosine with the sentence (MiniLM): the dense part lifts the anchor's own token F1 on that dev sample.
A follow-up that depends on the dialogue also counts half its cosine with the question read in its dialogue
(`dialogue_weight`), which lifts reply F1 on such doc2dial dev follow-ups (evals/README.md).

A follow-up's answer usually comes next in the document: a sentence that follows the previous reply's sentence in
the same section gains up to `continuity_weight`, fading over the next `CONTINUITY_WINDOW` sentences (on doc2dial
dev the next human reply is often grounded a few spans after the previous one; evals/README.md, "Continuity").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from reground.tools.signals.code_terms import code_names, unsupported_code
from reground.tools.signals.scoring import rouge_l, token_f1
from reground.tools.text.code_blocks import CUT_MARK
from reground.tools.text.lexical import STOPWORDS, lexical_tokens
from reground.tools.text.sentences import split_unit, strip_citations, text_sentences
from reground.tools.tuning.turn import EVIDENCE
from reground.tools.types import Passage, is_assistant

_TOKEN_RUN = re.compile(r"[^\W_]+(?:[.,]\d+)*")  # a word, or a number with its decimals ("11.5")
_SAYS_END = re.compile(r"[.!?:;)\]\"'”’]$")  # how a sentence that says something whole ends
# Headings, lists, repeats and continuity (each value's meaning and measurement: tools/tuning/turn.py EVIDENCE).
MAX_HEADING_WORDS = EVIDENCE.max_heading_words
REPEAT_PRECISION = EVIDENCE.repeat_precision
CONTINUITY_MATCH = EVIDENCE.continuity_match
CONTINUITY_WINDOW = EVIDENCE.continuity_window
CONTINUITY_MAX_REPLY_SENTENCES = EVIDENCE.continuity_max_reply_sentences


@dataclass(frozen=True)
class Evidence:
    """A passage sentence and how well it matches the question (higher is better)."""

    text: str
    passage: int  # 1-based number of the passage as the prompt shows it
    score: float
    lexical: float
    dense: float
    dense_dialogue: float = 0.0  # cosine with the question in its dialogue (the history query), when one was given
    order: int = 0  # the sentence's place in the passages (passage by passage, in reading order)
    continuity: float = 0.0  # in [0, 1]: 1 right after the previous reply's sentence, fading (before weighting)
    judge: float = -1.0  # the judge's probability that the sentence answers the question (-1: not judged)
    judge_weight: float = 0.0  # how much of that probability the ranking adds to the score
    unit_score: float | None = None  # the unit ranker's logit (signals/units.py), when it ranked the turn

    @property
    def strength(self) -> float:
        """What the evidence is ranked by: the hand-made score plus, when the judge read it, its weighted
        probability that the sentence answers the question."""
        return self.score + self.judge_weight * max(self.judge, 0.0)


def passage_sentences(passages: Sequence[Passage]) -> list[tuple[int, str]]:
    """(passage number, sentence) for every sentence of at least three words, in passage order."""
    return [
        (number, sentence)
        for number, passage in enumerate(passages, start=1)
        for sentence in text_sentences(passage["text"])
    ]


def word_overlap(question: str, texts: Sequence[str]) -> list[float]:
    """Per text, the IDF-weighted share of the question's content words it contains, in [0, 1] (IDF over the texts,
    so words every text shares count little)."""
    bags = [set(lexical_tokens(text)) for text in texts]
    df = Counter(term for bag in bags for term in bag)
    n = len(bags)
    terms = set(lexical_tokens(question))
    idf = {t: math.log(1 + n / df[t]) if df[t] else math.log(1 + n) for t in terms}
    total = sum(idf.values())
    return [sum(w for t, w in idf.items() if t in bag) / total if total else 0.0 for bag in bags]


def continuity(
    passages: Sequence[Passage], previous_reply: str, sentences: Sequence[tuple[int, str]] | None = None
) -> list[float]:
    """Per sentence of `passage_sentences`, how closely it follows the sentence the previous reply came from: 1 for
    the next sentence (and for that sentence itself when the reply asked a question), fading linearly to 0 after
    `CONTINUITY_WINDOW`, counted across the boundary into the next chunk of the same document, never across a
    section heading; 0 everywhere when no sentence restates the reply or the reply has more than
    `CONTINUITY_MAX_REPLY_SENTENCES` sentences. `sentences`: the passages' `passage_sentences`, if already split."""
    sentences = passage_sentences(passages) if sentences is None else sentences
    texts = [text for _, text in sentences]
    # (passage number, chunk's document, position, section, index in the chunk) of every sentence, in reading order
    counts = Counter(number for number, _ in sentences)
    seen: Counter[int] = Counter()
    places: list[tuple[int, str, int, str, int]] = []
    for number, _ in sentences:
        p = passages[number - 1]
        places.append((number, p["doc_id"], p.get("position", -1), p.get("section", ""), seen[number]))
        seen[number] += 1
    # The sentence each sentence of the reply restates (a reply under three words, "No", restates nothing), and
    # whether the reply's sentence asks: after "Is your vehicle registered in New York?" and the user's "Yes", the
    # sentence the question came from answers ("If your vehicle is registered in New York, it must ..."), so it
    # counts itself (doc2dial dev, re-scored: both halves of the dialogues gain).
    anchors: dict[int, bool] = {}
    parts = text_sentences(previous_reply)
    for part in parts if len(parts) <= CONTINUITY_MAX_REPLY_SENTENCES else []:
        matches = [token_f1(text, part) for text in texts]
        if matches and max(matches) >= CONTINUITY_MATCH:
            anchor = matches.index(max(matches))
            anchors[anchor] = anchors.get(anchor, False) or part.rstrip().endswith("?")
    bonus = [0.0] * len(places)
    for anchor, asked in anchors.items():
        number, doc, position, section, index = places[anchor]
        first = 0 if asked else 1
        for i, (_, other_doc, other_position, other_section, other_index) in enumerate(places):
            if other_doc != doc or other_section != section:
                continue
            if other_position == position:
                steps = other_index - index
            elif other_position == position + 1:
                steps = counts[number] - index + other_index
            else:
                continue
            if first <= steps <= CONTINUITY_WINDOW:
                bonus[i] = max(bonus[i], 1.0 - max(steps - 1, 0) / CONTINUITY_WINDOW)
    return bonus


def rank_evidence(
    question: str,
    passages: Sequence[Passage],
    *,
    sentence_vectors: np.ndarray | None = None,
    question_vector: np.ndarray | None = None,
    dense_weight: float = 1.0,
    dialogue_vector: np.ndarray | None = None,
    dialogue_weight: float = 0.0,
    previous_reply: str = "",
    continuity_weight: float = 0.0,
) -> list[Evidence]:
    """Every passage sentence scored against the question, best first (ties: earlier passage first).

    The lexical part is the IDF-weighted share of the question's content words a sentence contains, in
    [0, 1]; the dense part is the cosine of unit vectors, if both vectors are given (one row per sentence of
    `passage_sentences`, the question's vector). With the vector of the question read in its dialogue, each
    sentence's cosine with it is kept (`dense_dialogue`) and adds `dialogue_weight` of itself to the score: a
    follow-up ("and is any of it paid?") says little on its own. With the previous reply, a sentence that follows
    the one it came from adds `continuity_weight` x its `continuity`.
    """
    sentences = passage_sentences(passages)
    if not sentences:
        return []
    n = len(sentences)
    lexical = word_overlap(question, [text for _, text in sentences])
    following = continuity(passages, previous_reply, sentences) if previous_reply and continuity_weight else [0.0] * n
    dense = [0.0] * n
    dialogue = [0.0] * n
    if sentence_vectors is not None and len(sentence_vectors) == n:
        if question_vector is not None:
            dense = [float(x) for x in np.asarray(sentence_vectors) @ np.asarray(question_vector)]
        if dialogue_vector is not None:
            dialogue = [float(x) for x in np.asarray(sentence_vectors) @ np.asarray(dialogue_vector)]
    ranked = [
        Evidence(
            text=text,
            passage=number,
            score=lexical[i]
            + dense_weight * dense[i]
            + dialogue_weight * dialogue[i]
            + continuity_weight * following[i],
            lexical=lexical[i],
            dense=dense[i],
            dense_dialogue=dialogue[i],
            order=i,
            continuity=following[i],
        )
        for i, (number, text) in enumerate(sentences)
    ]
    order = sorted(range(n), key=lambda i: (-ranked[i].score, i))
    return [ranked[i] for i in order]


def previous_reply(history: Sequence[Mapping[str, str]]) -> str:
    """The assistant's last reply in a dialogue (role 'assistant', or 'agent' in the datasets)."""
    return next((str(t["text"]) for t in reversed(history) if is_assistant(str(t.get("role", "")))), "")


def reply_words(history: Sequence[Mapping[str, str]]) -> float:
    """How long the assistant's replies in this conversation run: the median of their word counts (0 before the
    first). A reply in the conversation's own register is about as long as the ones before it."""
    counts = sorted(len(str(t["text"]).split()) for t in history if is_assistant(str(t.get("role", ""))))
    if not counts:
        return 0.0
    middle = len(counts) // 2
    return float(counts[middle]) if len(counts) % 2 else (counts[middle - 1] + counts[middle]) / 2


def stored_sentence_vectors(embed: Callable[..., Any], passages: Sequence[Passage]) -> list[np.ndarray | None]:
    """The passages' sentence vectors kept at ingest, when `embed` is a retriever's cached `embed` whose store keeps
    them (`SearchIndex.sentence_vectors`); None for each passage otherwise (its sentences are embedded instead)."""
    store = getattr(getattr(embed, "__self__", None), "store", None)
    lookup = getattr(store, "sentence_vectors", None)
    if not callable(lookup):
        return [None] * len(passages)
    kept = list(lookup(passages))
    return kept if len(kept) == len(passages) else [None] * len(passages)


def sentence_vectors(
    embed: Callable[[Sequence[str]], np.ndarray],
    queries: Sequence[str],
    passages: Sequence[Passage],
    per_passage: Sequence[Sequence[str]],
) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """The queries' vectors and, per passage, the vectors of its sentences (`per_passage`: `text_sentences` of each
    passage), in one embedding call: a passage's sentence vectors come from the store when it kept them at ingest,
    the others are embedded with the queries (a cached query costs nothing)."""
    kept = stored_sentence_vectors(embed, passages)
    usable = [v is not None and len(v) == len(texts) for v, texts in zip(kept, per_passage, strict=True)]
    missing = [t for ok, texts in zip(usable, per_passage, strict=True) if not ok for t in texts]
    vectors = np.asarray(embed([*queries, *missing]))
    fresh = iter(vectors[len(queries) :])
    rows = [
        list(stored) if ok and stored is not None else [next(fresh) for _ in texts]
        for ok, stored, texts in zip(usable, kept, per_passage, strict=True)
    ]
    return vectors[: len(queries)], rows


def best_sentence_cosines(
    embed: Callable[[Sequence[str]], np.ndarray], question: str, passages: Sequence[Passage]
) -> list[float]:
    """Per passage, the cosine of its sentence closest to the question (0 for a passage with no sentence): the
    rerank's finer view of a paragraph, since an answer is one sentence, not a paragraph's average. The sentence
    vectors come from the store when it kept them at ingest, so this embeds at most the question (cached)."""
    per_passage = [text_sentences(p["text"]) for p in passages]
    (question_vector,), rows = sentence_vectors(embed, [question], passages, per_passage)
    return [float(np.max(np.asarray(r) @ question_vector)) if r else 0.0 for r in rows]


def turn_evidence_vectors(
    question: str,
    history: Sequence[Mapping[str, str]],
    passages: Sequence[Passage],
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    rewritten: bool = False,
    dense_weight: float = 1.0,
    dialogue_query: str = "",
    dialogue_weight: float = 0.0,
    continuity_weight: float = 0.0,
) -> tuple[list[Evidence], np.ndarray, np.ndarray, np.ndarray | None]:
    """The passage sentences closest to a turn's question: its words (plus, for a follow-up that was not rewritten, the
    user's previous message), its vector and, given `dialogue_query`, the vector of the question read in its
    dialogue (weighted `dialogue_weight`), and how closely they follow the previous reply (`continuity_weight`).
    Sentences the previous reply already said, and units whose every code name it gave, are left out, unless the
    question asks for one again (`asked_again`): they are not the answer to a follow-up. `embed` maps texts to unit
    vectors (the retriever's cached MiniLM); the sentences' vectors come from the store when it kept them at ingest,
    so a turn embeds at most the question. Returns (evidence best first, every sentence's vector in `order` order,
    the question's vector, the dialogue reading's vector or None): what the judge (tools/signals/judge.py) reads
    beside the evidence."""
    lexical_query = question
    if not rewritten:
        previous_user = next((str(t["text"]) for t in reversed(history) if t.get("role") == "user"), "")
        lexical_query = f"{question} {previous_user}".strip()
    per_passage = [text_sentences(p["text"]) for p in passages]
    if not any(per_passage):
        return [], np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32), None
    # One call: the question (cached), the question in its dialogue if given, and the sentences not kept at ingest.
    dialogue = [dialogue_query] if dialogue_query and dialogue_query != question else []
    vectors, per_passage_rows = sentence_vectors(embed, [question, *dialogue], passages, per_passage)
    rows = np.asarray([row for passage_rows in per_passage_rows for row in passage_rows])
    said = previous_reply(history)
    ranked = rank_evidence(
        lexical_query,
        passages,
        sentence_vectors=rows,
        question_vector=vectors[0],
        dense_weight=dense_weight,
        # The question read with its dialogue: the support signal's second view, and a part of the ranking.
        dialogue_vector=vectors[1] if dialogue else None,
        dialogue_weight=dialogue_weight,
        previous_reply=said,
        continuity_weight=continuity_weight,
    )
    again = asked_again(question, ranked)
    kept = [e for e in ranked if e.order == again or not (repeats(e.text, said) or gives_again(e.text, said))]
    return kept, rows, vectors[0], (vectors[1] if dialogue else None)


def asked_again(question: str, evidence: Sequence[Evidence]) -> int | None:
    """The `order` of the one sentence holding every content word of the question itself ("what about partner
    leave?" after the reply that named partner leave), if exactly one does: what the user asks about by name, even
    if the previous reply said it (else the follow-up would be answered with an unrelated sentence)."""
    if not lexical_tokens(question):
        return None
    overlap = word_overlap(question, [e.text for e in evidence])
    complete = [e.order for e, share in zip(evidence, overlap, strict=True) if share >= 1.0 - 1e-9]
    return complete[0] if len(complete) == 1 else None


def quoted_verbatim(answer: str, texts: Sequence[str]) -> bool:
    """Whether every sentence of the answer stands word for word in the passages (an extracted reply does): such an
    answer is grounded by construction, whatever a sentence-to-passage cosine or a small judge would say. Markers
    are read out of both sides alike: a page's own footnote ("the DMV Call Center [2].") is part of what was copied."""
    body = " ".join(" ".join(strip_citations(text).split()) for text in texts)
    parts = text_sentences(strip_citations(answer))
    return bool(parts) and all(piece in body for part in parts for piece in _quoted_pieces(part))


def _quoted_pieces(unit: str) -> list[str]:
    """What must stand in the passages for a unit to be quoted: its sentence, and each line of its code block or table
    but the `...` that marks a cut (text/code_blocks.py), whitespace collapsed."""
    prose, structured = split_unit(unit)
    lines = [" ".join(line.split()) for line in structured.split("\n") if line.strip() and line.strip() != CUT_MARK]
    return [p for p in [" ".join(prose.split()), *lines] if p]


def gives_again(unit: str, previous_reply: str) -> bool:
    """Whether the previous reply gave what a unit gives: the code its sentence names (`exclude_unset`, again), or for
    a unit whose sentence names none, at least REPEAT_PRECISION of its code's names (a local name of its example,
    `data`, may be new). A follow-up ("does the input model need anything special for that?") wants what comes next,
    not the same call in the page's other words."""
    if not previous_reply.strip():
        return False
    prose, _ = split_unit(unit)
    names = code_names(prose) or code_names(unit)
    if not names:
        return False
    held = 1.0 - len(unsupported_code(" ".join(f"`{n}`" for n in names), [previous_reply])) / len(names)
    return held >= REPEAT_PRECISION


def repeats(answer: str, previous_reply: str) -> bool:
    """Whether the answer is mostly the previous reply again (it then answers nothing new)."""
    if not previous_reply.strip() or not answer.strip():
        return False
    return rouge_l(strip_citations(answer), previous_reply).precision >= REPEAT_PRECISION


# "how many days", "how much leave", "how much does it cost": the question asks for a figure (of the word after it,
# when that word is a content word).
_FIGURE_QUESTION = re.compile(r"\bhow\s+(?:many|much)\b\s*([^\W\d_]*)", re.I)
_NUMBER = re.compile(r"\d")
FIGURE_RATIO = EVIDENCE.figure_ratio
FIGURE_WINDOW = EVIDENCE.figure_window


def asked_figure(question: str) -> str | None:
    """What a question asks a figure of: "How many days of annual leave do I get?" -> "days", "How much leave do I
    get?" -> "leave", "how much does it cost?" -> "" (a figure of anything); None when it asks for no figure."""
    match = _FIGURE_QUESTION.search(question)
    if match is None:
        return None
    word = match.group(1).lower()
    return "" if word in STOPWORDS else word


def _singular(word: str) -> str:
    return word[:-1] if len(word) > len("is") + 1 and word.endswith("s") and not word.endswith("ss") else word


def states_figure(text: str, of: str) -> bool:
    """Whether a sentence states a number followed, within FIGURE_WINDOW words, by `of` ("30 working days of paid
    annual leave" states a figure of days and of leave); any number when `of` is ""."""
    tokens = [_singular(t) for t in _TOKEN_RUN.findall(text.lower())]
    numbers = [i for i, t in enumerate(tokens) if _NUMBER.search(t)]
    if not of:
        return bool(numbers)
    wanted = _singular(of)
    return any(wanted in tokens[i + 1 : i + 1 + FIGURE_WINDOW] for i in numbers)


def figure_first(question: str, evidence: Sequence[Evidence], passages: Sequence[Passage]) -> list[Evidence]:
    """The evidence led by the sentence that states the figure a question asks for ("how many days ...": a number of
    days), then the other sentences stating it, then the rest: among the answer sentences that state it and score at
    least FIGURE_RATIO of the best answer sentence, those of the best one's document, the first in the document
    leading (a page states its main figure before the limits and exceptions that qualify it). Unchanged when the
    question asks for no figure or no close sentence states one. The judge, the reader and the cosines all rank "You
    can carry over up to 5 unused days of annual leave" above "Full-time employees receive 30 working days of paid
    annual leave" for "How many days of annual leave do I get?", and a pro-rata rule in hours, which states no figure
    of leave, first for "How much leave do I get?". What the reply says and what its relevance is measured
    against."""
    of = asked_figure(question)
    answers = answer_sentences(evidence)
    if of is None or not answers:
        return list(evidence)
    best = answers[0].strength
    stating = [e for e in answers if e.strength >= FIGURE_RATIO * best and states_figure(said(e.text), of)]
    if not stating:
        return list(evidence)
    document = passages[stating[0].passage - 1]["doc_id"]
    same = [e for e in stating if passages[e.passage - 1]["doc_id"] == document]
    lead = min(same, key=lambda e: (passages[e.passage - 1].get("position", 0), e.order))
    return [lead, *(e for e in stating if e is not lead), *(e for e in evidence if e not in stating)]


def hedge_units(question: str, evidence: Sequence[Evidence], passages: Sequence[Passage]) -> list[Evidence]:
    """The evidence a hedge may quote: a hedge says only that the documents come close, so it never quotes code from a
    page about something else. A unit of a passage whose title and heading path share none of the question's content
    words keeps its sentence without its code block or table (a unit that is only code is left out)."""
    shares = word_overlap(question, [f"{p.get('title', '')} {p.get('section', '')}" for p in passages])
    kept = []
    for unit in evidence:
        prose, structured = split_unit(unit.text)
        if shares[unit.passage - 1] > 0 or not structured:
            kept.append(unit)
        elif prose:
            kept.append(replace(unit, text=prose))
    return kept


_MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_BARE_URL = re.compile(r"https?://\S+|www\.\S+")
MAX_FRAGMENT_WORDS = EVIDENCE.max_fragment_words
MIN_REPLY_CONTENT_WORDS = EVIDENCE.min_reply_content_words


def stands_as_reply(text: str) -> bool:
    """Whether a unit can be a whole reply: not a fragment (a heading or a list item, "Plan the migration": a single
    line of at most MAX_FRAGMENT_WORDS words with no closing punctuation), not lines of headings only, not a code
    block or table with no sentence of its own, and not a pointer whose link is the message ("For more information,
    see [Tags for Block Storage](https://...)": fewer content words outside its links than MIN_REPLY_CONTENT_WORDS or
    than in the links' labels)."""
    prose, structured = split_unit(text)
    stripped = prose.strip()
    if not stripped:
        return False  # a code block or table with no sentence of its own says nothing a user can act on alone
    if "\n" not in stripped and len(stripped.split()) <= MAX_FRAGMENT_WORDS and not _SAYS_END.search(stripped):
        return False
    lines = [line.strip() for line in stripped.split("\n") if line.strip()]
    if len(lines) > 1 and all(len(line.split()) <= MAX_HEADING_WORDS and not _SAYS_END.search(line) for line in lines):
        return False  # headings only ("Sharps Disposal | Madison County, NY" twice: a page's title lines)
    labels = " ".join(_MARKDOWN_LINK.findall(stripped))
    outside = _BARE_URL.sub("", _MARKDOWN_LINK.sub("", stripped))
    said = len(lexical_tokens(outside)) + len(lexical_tokens(structured))  # "Run:" and its command say enough
    return said >= MIN_REPLY_CONTENT_WORDS and said >= len(lexical_tokens(labels))


def answer_sentences(evidence: Sequence[Evidence]) -> list[Evidence]:
    """The evidence that can answer: a sentence that asks (an FAQ's heading, "Should I bag my recyclables?") never
    does, nor a fragment or a bare link (`stands_as_reply`), nor one that ends in a colon with nothing after it in
    its passage (the list it announces was cut off); the sentences around them do."""
    placed = {(e.passage, e.order) for e in evidence}
    return [
        e
        for e in evidence
        if not e.text.rstrip().endswith("?")
        and stands_as_reply(e.text)
        and not (e.text.rstrip().endswith(":") and (e.passage, e.order + 1) not in placed)
    ]


def relevance_parts(answer: str, evidence: Sequence[Evidence], previous_reply: str = "") -> dict[str, float]:
    """The relevance signal and its parts, for the answer's sentence that answers best.

    `anchor`: token F1 of a sentence of the answer against the best evidence sentence (an answer to this question
    restates it); `elsewhere`: that sentence's best token F1 against any other passage sentence (an answer that
    restates another sentence better answers another question: the carry-over rule for "how many days do I get");
    `novel`: 0 if the answer repeats the previous reply (and the best evidence does not). Per sentence,
    max(0, anchor - max(0, elsewhere - anchor)); `relevance` = the best sentence's value x novel (a second sentence
    that adds context costs nothing).
    """
    text = strip_citations(answer)
    evidence = answer_sentences(evidence)
    if not evidence:
        return {"anchor": 0.0, "elsewhere": 0.0, "novel": 1.0, "relevance": 0.0}
    best = (-1.0, 0.0, 0.0)
    # Units compare by their sentences: a reply cuts a long code block to the lines that matter, and the
    # sentence that introduces it is what says which question it answers.
    units = [said(e.text) for e in evidence]
    for part in text_sentences(text) or [text]:
        anchor = token_f1(said(part), units[0])
        elsewhere = max((token_f1(said(part), unit) for unit in units[1:]), default=0.0)
        best = max(best, (max(0.0, anchor - max(0.0, elsewhere - anchor)), anchor, elsewhere))
    # Saying the previous reply again answers nothing new, unless the question asks for it again (`asked_again` kept
    # that sentence as the best evidence).
    novel = 0.0 if repeats(text, previous_reply) and not repeats(evidence[0].text, previous_reply) else 1.0
    score, anchor, elsewhere = best
    return {
        "anchor": round(anchor, 4),
        "elsewhere": round(elsewhere, 4),
        "novel": novel,
        "relevance": round(score * novel, 4),
    }


def said(unit: str) -> str:
    """What a unit says in words: its sentence without the code block or table it introduces (the whole unit when it
    has no sentence)."""
    prose, _ = split_unit(unit)
    return prose or unit
