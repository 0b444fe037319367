"""Synthetic multi-turn dialogues from any collection, in the case schema `eval answers` / `eval retrieval` read.

    reground eval synth --collection my-docs --dialogues 100 --out runs/synth/cases.jsonl [--seed 0]

A team with its own documents and no labelled dialogues gets test cases for them. Per dialogue (seeded by
`seed` and its index, so a resumed run makes the same dialogues): a document is sampled from the store, then
turns are planned — a first question, follow-ups that need the history, at most one topic shift to another
document, and the stated shares of unanswerable and underspecified turns (MTRAG-UN's classes). For every
answerable turn the gold span is picked first (a sentence of a stored chunk, verbatim) and the model is asked
only for the question it answers and the reference reply, so spans stay verbatim by construction. A follow-up's
question is written about its passage alone, without the dialogue (a small model shown the dialogue repeats its
first question), and, when it needs no history (the `followup_standalone` test below), a second call rewrites it to
refer back to the dialogue's latest question; the case keeps the first wording as `checks.written_as`.

Quality control, each rule counted by reason in `<out stem>.summary.json`:
- `span_not_verbatim`: the span is not in its chunk or document (cannot happen by construction; checked);
- `generation_failed`: the model's reply did not validate, or the question has under three words;
- `not_retrievable`: BM25 with question + history does not find the gold document in its top 20 (the
  question is not about the document);
- `repeats_question`: the question repeats an earlier user question of the dialogue (token F1 >= 0.8);
- `followup_standalone`: a follow-up whose bare question already ranks the gold document first with BM25 AND
  that has no word referring to the history (it does not need the dialogue), even after the rewrite;
- `rewrite_lost_question`: the rewrite kept under 0.3 token F1 of the question first written (it asks another);
- `unanswerable_supported`: an unanswerable question with a passage in the collection whose cosine to the
  question reaches the support threshold (calibrated on MTRAG-UN, see SUPPORT_THRESHOLD);
- `underspecified_names_one`: an underspecified question naming a word of only one of its two documents' titles;
- `model_says_unanswered` / `model_says_answered`: the model's own check (the gold span does not answer an
  answerable question; the closest passage answers an unanswerable one); off with `model_check=False`.

A reference reply with under half its words in the gold span (K-Precision < 0.5: the small model invents) is
replaced by the span itself, verbatim; the case records `reply_source` and the summary counts `replies_from_span`.

Files beside `out`: `<stem>.progress.jsonl` (one line per finished dialogue: resume state and rejections),
`<stem>.summary.json`, `<stem>.docs.jsonl` (the collection's documents, for `eval answers --docs`).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from reground.evals.data.datasets import Case, Turn
from reground.prompts import synth as prompts
from reground.tools.adapters.chat import CallStats, LLMReplyError
from reground.tools.adapters.structured import call_json
from reground.tools.errors import DataError, InputError
from reground.tools.retrieval.search import content_terms
from reground.tools.signals.scoring import k_precision, token_f1

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from reground.tools.retrieval.search import SearchStore
    from reground.tools.types import Chunk

GENERATOR = "reground-synth/1"
RANK_DEPTH = 20  # documents per BM25 ranking (the eval retrieval baselines' depth)
HISTORY_WORDS = 100  # the BM25 history baseline's window
# Cosine (MiniLM, bare question vs stored chunk) at which a passage "supports" a question. Calibrated on
# MTRAG-UN dev (123 ANSWERABLE vs 40 UNANSWERABLE tasks over the 1,152 reference passages chunked at 160 tokens):
# the cut with the best balanced accuracy, 0.783 (means 0.580 vs 0.416). Recompute with
# `python -m reground.evals.runs.synth calibrate-support` (evals/README.md, "Synthetic dialogues").
SUPPORT_THRESHOLD = 0.5071
GEN_MAX_TOKENS = 160
SPAN_WORDS = (8, 60)
Kind = Literal["first", "followup", "topic_shift", "unanswerable", "underspecified"]
REASONS = (
    "generation_failed",
    "span_not_verbatim",
    "not_retrievable",
    "followup_standalone",
    "rewrite_lost_question",
    "repeats_question",
    "unanswerable_supported",
    "underspecified_names_one",
    "model_says_unanswered",
    "model_says_answered",
    "dialogue_without_first_turn",
)
# Words by which a question points back into the conversation (pronouns, demonstratives, ellipsis openers).
HISTORY_WORDS_RE = re.compile(
    r"\b(it|its|it's|that|this|these|those|they|them|their|theirs|there|he|she|his|her|one|ones|same|also|"
    r"else|other|another|too|then|such|above|mentioned|what about|how about|and if|and for|and what)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
REPEAT_F1 = 0.8  # token F1 at which a question repeats an earlier one
REWRITE_KEEPS = 0.3  # token F1 a follow-up's rewrite keeps with the question first written (else it asks another)
MIN_QUESTION_WORDS = 3  # a shorter question was cut off (seen: the opener alone, "Can I")
REPLY_GROUNDING = 0.5  # K-Precision of the reference reply against its gold span, at least


class SynthError(InputError, ValueError):
    """A synth run cannot start (bad shares, an --out holding another run's dialogues); says what to change."""


class QuestionReply(BaseModel):
    question: str = Field(description="the user's question")
    reply: str = Field(description="the agent's reply, from the passage only")


class Question(BaseModel):
    question: str = Field(description="the user's question")


class Verdict(BaseModel):
    answered: bool = Field(description="true only if the passage states the answer")


@dataclass(frozen=True)
class SynthSettings:
    """What a run is made of; a resumed run must have the same (written first in the progress file)."""

    collection: str
    dialogues: int
    seed: int = 0
    model: str = "local:default"
    turns: int = 4
    unanswerable_share: float = 0.15
    underspecified_share: float = 0.1
    topic_shift_share: float = 0.2
    support_threshold: float = SUPPORT_THRESHOLD
    model_check: bool = True

    def validate(self) -> None:
        shares = (self.unanswerable_share, self.underspecified_share, self.topic_shift_share)
        if self.dialogues < 1 or self.turns < 1:
            raise SynthError(f"--dialogues and turns must be >= 1, got {self.dialogues} and {self.turns}")
        if any(not 0.0 <= s <= 1.0 for s in shares) or sum(shares) > 1.0:
            raise SynthError(f"the shares must each be in [0, 1] and sum to at most 1, got {shares}")


@dataclass
class Document:
    doc_id: str
    title: str
    chunks: list[Chunk]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(c["text"] for c in self.chunks)


@dataclass
class Span:
    text: str
    chunk_id: str


# --- documents and spans -------------------------------------------------------------------------


def collection_documents(store: SearchStore) -> dict[str, Document]:
    """The store's documents, rebuilt from their chunks in position order (the text every check reads)."""
    docs: dict[str, Document] = {}
    for chunk in sorted(store.all_chunks(), key=lambda c: (c["doc_id"], c["position"])):
        doc = docs.setdefault(chunk["doc_id"], Document(chunk["doc_id"], chunk["title"], [], dict(chunk["metadata"])))
        doc.chunks.append(chunk)
    if not docs:
        raise DataError("the collection holds no documents: ingest some with `reground ingest PATH --collection NAME`")
    return docs


def candidate_spans(doc: Document, words: tuple[int, int] = SPAN_WORDS) -> list[Span]:
    """Sentences of the document's chunks, as substrings of the chunk text (verbatim by construction)."""
    out: list[Span] = []
    for chunk in doc.chunks:
        for match in _SENTENCE.finditer(chunk["text"]):
            text = match.group(0).strip()
            # a sentence (ends in . ! ?), not a heading or a list label
            if words[0] <= len(text.split()) <= words[1] and text[-1] in ".!?" and not text.startswith("#"):
                out.append(Span(text, chunk["chunk_id"]))
    return out


def span_is_verbatim(span: Span, doc: Document) -> bool:
    chunk = next((c for c in doc.chunks if c["chunk_id"] == span.chunk_id), None)
    return bool(span.text) and chunk is not None and span.text in chunk["text"] and span.text in doc.text


# --- retrieval checks ----------------------------------------------------------------------------


def _last_words(history: Sequence[Turn], n: int) -> str:
    words = " ".join(t["text"] for t in history).split()
    return " ".join(words[-n:]) if n > 0 else ""


def bm25_rank(store: SearchStore, query: str, doc_id: str, depth: int = RANK_DEPTH) -> int | None:
    """1-based rank of the document in a BM25 document ranking (a document scores its best chunk); None: not found."""
    ranked: list[str] = []
    for chunk, _ in store.lexical_search(query, 10 * depth):
        if chunk["doc_id"] not in ranked:
            ranked.append(chunk["doc_id"])
            if len(ranked) == depth:
                break
    return ranked.index(doc_id) + 1 if doc_id in ranked else None


def refers_to_history(question: str) -> bool:
    """Whether the question has a word that points back into the conversation (pronoun, ellipsis)."""
    return bool(HISTORY_WORDS_RE.search(question))


def needs_no_history(question: str, bare_rank: int | None) -> bool:
    """The follow-up rule: the bare question already finds its document first and points back at nothing."""
    return bare_rank == 1 and not refers_to_history(question)


def closest_chunk(store: SearchStore, question: str, k: int = 5) -> tuple[float, Chunk | None]:
    """The best cosine of the bare question to a stored chunk, and that chunk (the closest supporting passage)."""
    hits = store.dense_search(store.embedder.embed_query(question), k)
    return (float(hits[0][1]), hits[0][0]) if hits else (0.0, None)


def separating_threshold(positives: Sequence[float], negatives: Sequence[float]) -> dict[str, float]:
    """The cut (midway between neighbouring scores) with the best balanced accuracy for `score >= cut` = positive."""
    if not positives or not negatives:
        raise DataError("calibration needs both answerable and unanswerable scores")
    values = sorted(set(positives) | set(negatives))
    cuts = [values[0] - 1e-6] + [(a + b) / 2 for a, b in itertools.pairwise(values)] + [values[-1] + 1e-6]
    pos, neg = np.asarray(positives), np.asarray(negatives)
    best = max(cuts, key=lambda c: ((pos >= c).mean() + (neg < c).mean(), -c))
    return {
        "threshold": round(float(best), 4),
        "balanced_accuracy": round(float(((pos >= best).mean() + (neg < best).mean()) / 2), 4),
        "n_positive": float(len(pos)),
        "n_negative": float(len(neg)),
    }


def calibrate_support_threshold(store: SearchStore, cases: Iterable[Case]) -> dict[str, float]:
    """SUPPORT_THRESHOLD from labelled cases (MTRAG-UN's answerability): answerable vs unanswerable supports."""
    positives: list[float] = []
    negatives: list[float] = []
    for case in cases:
        label = (case.answerability or "").upper()
        if label in ("ANSWERABLE", "UNANSWERABLE"):
            (positives if label == "ANSWERABLE" else negatives).append(closest_chunk(store, case.question)[0])
    return separating_threshold(positives, negatives)


# --- one dialogue --------------------------------------------------------------------------------


def plan_turns(rng: random.Random, settings: SynthSettings) -> list[Kind]:
    """The turn kinds of a dialogue: a first question, then per later turn an unanswerable, underspecified
    (it ends the dialogue: the next user turn would answer the clarification), topic-shift (at most one) or
    follow-up turn, with the settings' shares of the turns after the first."""
    kinds: list[Kind] = ["first"]
    shifted = False
    for _ in range(settings.turns - 1):
        roll = rng.random()
        u, s, t = settings.unanswerable_share, settings.underspecified_share, settings.topic_shift_share
        if roll < u:
            kinds.append("unanswerable")
        elif roll < u + s:
            kinds.append("underspecified")
            break
        elif roll < u + s + t and not shifted:
            kinds.append("topic_shift")
            shifted = True
        else:
            kinds.append("followup")
    return kinds


def shown_title(title: str) -> str:
    """The title as the model sees it: without a trailing part number ("Social Security Administration#2")."""
    return re.sub(r"#[\d_]+$", "", title).strip() or title


def repeats_question(question: str, history: Sequence[Turn]) -> bool:
    return any(t["role"] == "user" and token_f1(question, t["text"]) >= REPEAT_F1 for t in history)


def conversation_text(history: Sequence[Turn]) -> str:
    return "\n".join(f"{t['role']}: {t['text']}" for t in history) or "(none yet)"


def _messages(system: str, task: str) -> list[Any]:
    from langchain_core.messages import HumanMessage, SystemMessage

    return [SystemMessage(system), HumanMessage(task)]


@dataclass
class DialogueResult:
    cases: list[Case]
    rejected: Counter[str]
    generated: int
    stats: CallStats


class DialogueMaker:
    """Makes dialogue `index` of a run: seeded by (seed, index), checked turn by turn."""

    def __init__(self, settings: SynthSettings, store: SearchStore, model: BaseChatModel) -> None:
        self.settings, self.store, self.model = settings, store, model
        self.docs = collection_documents(store)
        self.spans = {d: candidate_spans(doc) for d, doc in self.docs.items()}
        self.usable = sorted(d for d, spans in self.spans.items() if spans)
        if not self.usable:
            raise DataError(f"no document of {settings.collection!r} has a sentence of {SPAN_WORDS} words to ask about")

    # the model -------------------------------------------------------------------------------
    @staticmethod
    def _system(doc: Document, passage: str, history: Sequence[Turn]) -> str:
        title = shown_title(doc.title)
        return prompts.SYSTEM.format(title=title, span=passage, conversation=conversation_text(history))

    def _ask(self, schema: type[Any], system: str, task: str, stats: CallStats, tag: str, cap: int) -> Any:
        reply, _ = call_json(self.model, _messages(system, task), schema, stats, tags=["synth", tag], max_tokens=cap)
        return reply

    def _check(self, passage: str, history: Sequence[Turn], question: str, stats: CallStats) -> bool | None:
        if not self.settings.model_check:
            return None
        system = prompts.CHECK_SYSTEM.format(passage=passage, conversation=conversation_text(history))
        try:
            verdict = self._ask(Verdict, system, prompts.CHECK_TASK.format(question=question), stats, "synth_check", 24)
        except LLMReplyError:
            return None
        return bool(verdict.answered)

    # choices ---------------------------------------------------------------------------------
    def _other_doc(self, rng: random.Random, doc: Document, similar: bool) -> Document:
        """Another document: the closest by BM25 on this one's title (similar), else a random one."""
        if similar:
            for chunk, _ in self.store.lexical_search(doc.title, 10 * RANK_DEPTH):
                if chunk["doc_id"] != doc.doc_id and chunk["doc_id"] in self.spans:
                    return self.docs[chunk["doc_id"]]
        others = [d for d in self.usable if d != doc.doc_id]
        return self.docs[rng.choice(others)] if others else doc

    def make(self, index: int) -> DialogueResult:
        s = self.settings
        rng = random.Random(f"{s.seed}:{index}")
        stats = CallStats()
        rejected: Counter[str] = Counter()
        generated = 0
        doc = self.docs[rng.choice(self.usable)]
        used: set[str] = set()
        history: list[Turn] = []
        cases: list[Case] = []
        doc_ids: list[str] = [doc.doc_id]
        kinds = plan_turns(rng, s)
        attempts = {0: 3}  # the first turn gets retries with other spans: a dialogue needs it
        position = 0
        while position < len(kinds):
            kind = kinds[position]
            if kind == "topic_shift":
                doc = self._other_doc(rng, doc, similar=False)
                doc_ids.append(doc.doc_id)
            generated += 1
            case, reason = self._turn(rng, kind, doc, history, used, stats)
            if reason:
                rejected[reason] += 1
                if position == 0 and attempts[0] > 1:
                    attempts[0] -= 1
                    continue
                if position == 0:
                    rejected["dialogue_without_first_turn"] += 1
                    break
                position += 1
                continue
            assert case is not None
            case.case_id = f"{self._dial_id(index)}_{len(cases) + 1}"
            case.dial_id = self._dial_id(index)
            case.extra["synth"].update(
                {"dialogue": index, "model": s.model, "seed": s.seed, "collection": s.collection}
            )
            if kind == "underspecified":
                doc_ids.extend(d for d in case.gold_doc_ids if d not in doc_ids)
            cases.append(case)
            history = [*history, Turn(role="user", text=case.question), Turn(role="agent", text=case.gold_answer or "")]
            position += 1
        for case in cases:
            case.extra["synth"]["dialogue_doc_ids"] = list(doc_ids)
        return DialogueResult(cases, rejected, generated, stats)

    def _dial_id(self, index: int) -> str:
        return f"synth-s{self.settings.seed}-{index:05d}"

    # one turn --------------------------------------------------------------------------------
    def _turn(
        self, rng: random.Random, kind: Kind, doc: Document, history: list[Turn], used: set[str], stats: CallStats
    ) -> tuple[Case | None, str | None]:
        if kind == "unanswerable":
            return self._unanswerable(rng, doc, history, stats)
        if kind == "underspecified":
            return self._underspecified(rng, doc, history, stats)
        return self._answerable(rng, kind, doc, history, used, stats)

    def _answerable(
        self, rng: random.Random, kind: Kind, doc: Document, history: list[Turn], used: set[str], stats: CallStats
    ) -> tuple[Case | None, str | None]:
        spans = [sp for sp in self.spans[doc.doc_id] if sp.text not in used] or self.spans[doc.doc_id]
        span = rng.choice(spans)
        used.add(span.text)
        # A follow-up's question is first written about its passage alone (see prompts.FOLLOWUP_REWRITE_SYSTEM).
        system = self._system(doc, span.text, [] if kind == "followup" else history)
        try:
            task = prompts.FIRST_TASK.format(opener=rng.choice(prompts.QUESTION_OPENERS))
            made = self._ask(QuestionReply, system, task, stats, "synth_question", GEN_MAX_TOKENS)
        except LLMReplyError:
            return None, "generation_failed"
        question, reply = " ".join(made.question.split()), " ".join(made.reply.split())
        if len(question.split()) < MIN_QUESTION_WORDS or not reply:
            return None, "generation_failed"
        if not span_is_verbatim(span, doc):
            return None, "span_not_verbatim"
        if repeats_question(question, history):
            return None, "repeats_question"
        reply_source = "model"
        if k_precision(reply, span.text) < REPLY_GROUNDING:
            reply, reply_source = span.text, "span"
        checks: dict[str, Any] = {"refers_to_history": None, "reply_source": reply_source}
        bare = bm25_rank(self.store, question, doc.doc_id)
        if kind == "followup" and needs_no_history(question, bare):
            rewritten = self._refer_back(question, history, stats)
            checks["written_as"] = question
            if rewritten is None or repeats_question(rewritten, history):
                return None, "followup_standalone"
            if token_f1(rewritten, question) < REWRITE_KEEPS:
                return None, "rewrite_lost_question"
            question, bare = rewritten, bm25_rank(self.store, rewritten, doc.doc_id)
        with_history = bm25_rank(self.store, f"{question} {_last_words(history, HISTORY_WORDS)}", doc.doc_id)
        checks.update(bare_rank=bare, history_rank=with_history)
        if with_history is None:
            return None, "not_retrievable"
        if kind == "followup":
            checks["refers_to_history"] = refers_to_history(question)
            if needs_no_history(question, bare):
                return None, "followup_standalone"
        checks["model_check"] = self._check(span.text, history, question, stats)
        if checks["model_check"] is False:
            return None, "model_says_unanswered"
        checks["support"] = round(closest_chunk(self.store, question)[0], 4)
        return self._case(kind, doc, history, question, reply, [doc.doc_id], span, True, checks), None

    def _refer_back(self, question: str, history: Sequence[Turn], stats: CallStats) -> str | None:
        """The question rewritten to refer back to the dialogue's latest user question (None: the model failed)."""
        previous = next((t["text"] for t in reversed(history) if t["role"] == "user"), "")
        system = prompts.FOLLOWUP_REWRITE_SYSTEM.format(previous=previous, question=question)
        try:
            made = self._ask(Question, system, prompts.FOLLOWUP_REWRITE_TASK, stats, "synth_followup", GEN_MAX_TOKENS)
        except LLMReplyError:
            return None
        return " ".join(made.question.split()) or None

    def _unanswerable(
        self, rng: random.Random, doc: Document, history: list[Turn], stats: CallStats
    ) -> tuple[Case | None, str | None]:
        chunk = rng.choice(doc.chunks)
        system = self._system(doc, chunk["text"], history)
        try:
            made = self._ask(Question, system, prompts.UNANSWERABLE_TASK, stats, "synth_question", GEN_MAX_TOKENS)
        except LLMReplyError:
            return None, "generation_failed"
        question = " ".join(made.question.split())
        if not question:
            return None, "generation_failed"
        if repeats_question(question, history):
            return None, "repeats_question"
        score, closest = closest_chunk(self.store, question)
        checks: dict[str, Any] = {"support": round(score, 4), "closest_chunk_id": closest and closest["chunk_id"]}
        if score >= self.settings.support_threshold:
            return None, "unanswerable_supported"
        checks["model_check"] = self._check(closest["text"] if closest else "", history, question, stats)
        if checks["model_check"] is True:
            return None, "model_says_answered"
        reply = prompts.UNANSWERABLE_REPLY.format(escalation=prompts.ESCALATION)
        return self._case("unanswerable", doc, history, question, reply, [], None, False, checks), None

    def _underspecified(
        self, rng: random.Random, doc: Document, history: list[Turn], stats: CallStats
    ) -> tuple[Case | None, str | None]:
        other = self._other_doc(rng, doc, similar=True)
        span = rng.choice(self.spans[doc.doc_id])
        system = self._system(doc, span.text, history)
        task = prompts.UNDERSPECIFIED_TASK.format(title=shown_title(doc.title), other_title=shown_title(other.title))
        try:
            made = self._ask(Question, system, task, stats, "synth_question", GEN_MAX_TOKENS)
        except LLMReplyError:
            return None, "generation_failed"
        question = " ".join(made.question.split())
        if not question:
            return None, "generation_failed"
        own, theirs = set(content_terms(doc.title)), set(content_terms(other.title))
        if set(content_terms(question)) & (own ^ theirs):
            return None, "underspecified_names_one"
        reply = prompts.CLARIFY_REPLY.format(title=shown_title(doc.title), other_title=shown_title(other.title))
        checks = {"other_doc_id": other.doc_id}
        return self._case(
            "underspecified", doc, history, question, reply, [doc.doc_id, other.doc_id], None, False, checks
        ), None

    def _case(
        self,
        kind: Kind,
        doc: Document,
        history: list[Turn],
        question: str,
        reply: str,
        gold_docs: list[str],
        span: Span | None,
        answerable: bool,
        checks: dict[str, Any],
    ) -> Case:
        label = {"unanswerable": "UNANSWERABLE", "underspecified": "UNDERSPECIFIED"}.get(kind, "ANSWERABLE")
        return Case(
            case_id="",
            dial_id="",
            domain=str(doc.metadata.get("domain") or self.settings.collection),
            history=list(history),
            question=question,
            gold_answer=reply,
            gold_doc_id=gold_docs[0] if gold_docs else "",
            gold_doc_ids=list(gold_docs),
            gold_span=span.text if span else "",
            answerable=answerable,
            split="synthetic",
            source=GENERATOR,
            answerability=label,
            multi_turn="N/A" if not history else ("Clarification" if kind == "underspecified" else "Follow-up"),
            question_type=[kind],
            extra={
                "synth": {
                    "kind": kind,
                    "doc_id": doc.doc_id,
                    "chunk_id": span.chunk_id if span else None,
                    "checks": checks,
                }
            },
        )


# --- the run -------------------------------------------------------------------------------------


def sidecar(out: Path, suffix: str) -> Path:
    """`cases.jsonl` → `cases.<suffix>` beside it."""
    return out.with_name(f"{out.stem}.{suffix}")


def _read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line torn by a killed run: its dialogue is not in the progress file, so it is redone
    return rows


def _resume_state(out: Path, settings: SynthSettings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(finished dialogues' progress rows, their case rows); the cases file is rewritten to hold only those."""
    progress_path = sidecar(out, "progress.jsonl")
    rows = _read_rows(progress_path)
    if not rows:
        return [], []
    config = rows[0].get("config")
    mine = {k: v for k, v in asdict(settings).items() if k != "dialogues"}
    if config is None or {k: config.get(k) for k in mine} != mine:
        raise SynthError(
            f"{out} holds dialogues made with other settings ({progress_path}): use another --out or the same settings"
        )
    finished = [r for r in rows[1:] if "dialogue" in r]
    done = {r["dialogue"] for r in finished}
    cases = [c for c in _read_rows(out) if (c.get("synth") or {}).get("dialogue") in done]
    with out.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    return finished, cases


def write_docs(docs: Mapping[str, Document], path: Path) -> None:
    """The collection's documents as a .jsonl `eval answers --docs` ingests (text = the chunks joined)."""
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs.values():
            row = {**doc.metadata, "doc_id": doc.doc_id, "title": doc.title, "text": doc.text}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def summarize(
    settings: SynthSettings, progress_rows: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Counts by kind and rejection reason, and the measured checks (follow-up retrieval with/without history)."""
    rejected: Counter[str] = Counter()
    for row in progress_rows:
        rejected.update(row.get("rejected") or {})
    kinds = Counter(str((c.get("synth") or {}).get("kind")) for c in cases)
    follow = [c["synth"]["checks"] for c in cases if c["synth"]["kind"] == "followup"]

    def recall(key: str, k: int) -> float | None:
        return (
            round(sum(1 for ch in follow if ch.get(key) is not None and ch[key] <= k) / len(follow), 4)
            if follow
            else None
        )

    supports = {
        name: [
            c["synth"]["checks"]["support"]
            for c in cases
            if c["synth"]["kind"] in kinds_ and "support" in c["synth"]["checks"]
        ]
        for name, kinds_ in (("answerable", ("first", "followup", "topic_shift")), ("unanswerable", ("unanswerable",)))
    }
    generated = sum(int(r.get("generated", 0)) for r in progress_rows)
    return {
        "settings": asdict(settings),
        "generator": GENERATOR,
        "dialogues_done": len(progress_rows),
        "dialogues_with_cases": len({c["dial_id"] for c in cases}),
        "cases": len(cases),
        "by_kind": dict(sorted(kinds.items())),
        "turns_generated": generated,
        "turns_rejected": sum(v for k, v in rejected.items() if k != "dialogue_without_first_turn"),
        "rejected": {r: rejected.get(r, 0) for r in REASONS},
        "followups": {
            "n": len(follow),
            "bare_recall@1": recall("bare_rank", 1),
            "history_recall@1": recall("history_rank", 1),
            "bare_recall@5": recall("bare_rank", 5),
            "history_recall@5": recall("history_rank", 5),
            "refer_to_history": round(sum(bool(ch.get("refers_to_history")) for ch in follow) / len(follow), 4)
            if follow
            else None,
        },
        "support": {
            "threshold": settings.support_threshold,
            **{f"{k}_mean": round(float(np.mean(v)), 4) if v else None for k, v in supports.items()},
        },
        "replies_from_span": sum(1 for c in cases if c["synth"]["checks"].get("reply_source") == "span"),
        "llm_calls": sum(int(r.get("llm_calls", 0)) for r in progress_rows),
        "llm_seconds": round(sum(float(r.get("seconds", 0.0)) for r in progress_rows), 1),
    }


def synthesize(
    collection: str,
    *,
    dialogues: int,
    out: str | Path,
    model: BaseChatModel | None = None,
    model_spec: str = "local:default",
    seed: int = 0,
    turns: int = SynthSettings.turns,
    unanswerable_share: float = SynthSettings.unanswerable_share,
    underspecified_share: float = SynthSettings.underspecified_share,
    topic_shift_share: float = SynthSettings.topic_shift_share,
    support_threshold: float = SUPPORT_THRESHOLD,
    model_check: bool = True,
    store: SearchStore | None = None,
    data_dir: str | Path | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write `dialogues` synthetic dialogues of `collection` to `out` (resumable) and return the summary.

    `model` overrides `model_spec` (a test's scripted model); the spec is what the cases record as provenance.
    """
    settings = SynthSettings(
        collection=collection,
        dialogues=dialogues,
        seed=seed,
        model=model_spec,
        turns=turns,
        unanswerable_share=unanswerable_share,
        underspecified_share=underspecified_share,
        topic_shift_share=topic_shift_share,
        support_threshold=support_threshold,
        model_check=model_check,
    )
    settings.validate()
    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    finished, cases = _resume_state(out_path, settings)
    done = {int(r["dialogue"]) for r in finished}
    todo = [i for i in range(dialogues) if i not in done]
    if store is None:
        from reground.tools.stores.store import PassageStore

        store = PassageStore.open(collection, data_dir=str(data_dir) if data_dir else None)
    if model is None and todo:
        from reground.evals.runs.answers import load_eval_model

        model = load_eval_model(model_spec, max_tokens=GEN_MAX_TOKENS)
    progress_path = sidecar(out_path, "progress.jsonl")
    if not progress_path.is_file() or not progress_path.read_text(encoding="utf-8").strip():
        progress_path.write_text(json.dumps({"config": asdict(settings)}) + "\n", encoding="utf-8")
    if todo:
        assert model is not None
        maker = DialogueMaker(settings, store, model)
        docs_path = sidecar(out_path, "docs.jsonl")
        if not docs_path.is_file():
            write_docs(maker.docs, docs_path)
        from tqdm import tqdm

        bar = tqdm(total=dialogues, initial=len(done), desc="synth", unit="dialogue", disable=not progress)
        try:
            for index in todo:
                started = time.perf_counter()
                result = maker.make(index)
                rows = [c.to_dict() for c in result.cases]
                with out_path.open("a", encoding="utf-8") as fh:
                    fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
                record = {
                    "dialogue": index,
                    "kept": len(rows),
                    "generated": result.generated,
                    "rejected": dict(result.rejected),
                    "llm_calls": result.stats.llm_calls,
                    "seconds": round(time.perf_counter() - started, 2),
                }
                with progress_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
                finished.append(record)
                cases.extend(rows)
                bar.update(1)
                bar.set_postfix(cases=len(cases), rejected=sum(sum(r["rejected"].values()) for r in finished))
        finally:
            bar.close()
    finished = [r for r in finished if int(r["dialogue"]) < dialogues]
    summary = summarize(settings, finished, [c for c in cases if c["synth"]["dialogue"] < dialogues])
    sidecar(out_path, "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


# --- validity: do two case sets rank systems alike? ----------------------------------------------


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two paired score lists (ties counted as neither concordant nor discordant)."""
    if len(a) != len(b) or len(a) < 2:
        raise DataError("Kendall's tau needs two paired lists of at least two systems")
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif da == db:
                concordant += 1
            else:
                discordant += 1
    denominator = np.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return float((concordant - discordant) / denominator) if denominator else 0.0


RunPaths = str | Path | Sequence[str | Path]


def _run_list(runs: RunPaths) -> list[Path]:
    return [Path(runs)] if isinstance(runs, str | Path) else [Path(r) for r in runs]


def _system_metrics(runs: RunPaths) -> dict[str, dict[str, Any]]:
    """The systems of one answers run, or of several runs on the same cases (e.g. the baselines in one run and
    ablations in another); a system in two of them is ambiguous and refused."""
    merged: dict[str, dict[str, Any]] = {}
    for path in _run_list(runs):
        file = path / "summary.json" if path.is_dir() else path
        try:
            systems = dict(json.loads(file.read_text(encoding="utf-8"))["systems"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(
                f"{file}: not an answers run summary (run `reground eval answers --out DIR` first)"
            ) from exc
        twice = sorted(set(systems) & set(merged))
        if twice:
            raise DataError(f"{file}: {', '.join(twice)} already came from another run: give each system once")
        merged.update(systems)
    return merged


def rank_agreement(
    synthetic: RunPaths, real: RunPaths, metrics: Sequence[str] = ("token_f1", "k_precision")
) -> dict[str, Any]:
    """Kendall's tau between the system rankings of two answers runs (their summary.json), per metric, over the
    systems both ran with a value for it: does the synthetic set rank systems as the real cases do? Each side may
    be several runs on the same cases, whose systems are merged."""
    a, b = _system_metrics(synthetic), _system_metrics(real)
    out: dict[str, Any] = {
        "synthetic": [str(p) for p in _run_list(synthetic)],
        "real": [str(p) for p in _run_list(real)],
        "metrics": {},
    }
    for metric in metrics:
        names = sorted(
            n
            for n in set(a) & set(b)
            if isinstance(a[n].get(metric), int | float) and isinstance(b[n].get(metric), int | float)
        )
        if len(names) < 2:
            raise DataError(f"fewer than two systems have {metric!r} in both runs: run the same --systems on both sets")
        xs, ys = [float(a[n][metric]) for n in names], [float(b[n][metric]) for n in names]
        out["metrics"][metric] = {
            "kendall_tau": round(kendall_tau(xs, ys), 4),
            "systems": names,
            "synthetic": dict(zip(names, xs, strict=True)),
            "real": dict(zip(names, ys, strict=True)),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m reground.evals.runs.synth calibrate-support --docs D --cases C`: SUPPORT_THRESHOLD from labels."""
    import argparse

    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.retrieval import open_eval_store

    parser = argparse.ArgumentParser(prog="python -m reground.evals.runs.synth")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("calibrate-support", help="the support threshold from answerability-labelled cases")
    p.add_argument("--docs", default="../shared/data/mtrag/docs.jsonl")
    p.add_argument("--cases", default="../shared/data/mtrag/cases_dev.jsonl")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=None, help="write the result as JSON here")
    args = parser.parse_args(argv)
    store = open_eval_store(Path(args.docs), data_dir=args.data_dir, max_tokens=160)
    result = {**calibrate_support_threshold(store, load_cases(args.cases)), "docs": args.docs, "cases": args.cases}
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
