"""Cheap lexical proxy metrics, shared by the graph's loops and by evals (one implementation).

Tokenisation follows the two conventions the source papers used: SQuAD-style normalisation for
token F1 / exact match / Recall / K-Precision, and rouge-score's default tokeniser (lowercase,
non-alphanumerics to spaces, no stemming) for ROUGE, so the numbers equal those libraries'.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz.distance import LCSseq
from reground.tools.tuning.signals import TEXT_CHECKS

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = str.maketrans("", "", string.punctuation)
_ROUGE_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, squeeze white space."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's default tokenizer without stemming."""
    return _ROUGE_NON_ALNUM.sub(" ", text.lower()).split()


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    fmeasure: float


def _prf(overlap: float, n_candidate: int, n_reference: int) -> PRF:
    precision = overlap / n_candidate if n_candidate else 0.0
    recall = overlap / n_reference if n_reference else 0.0
    f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return PRF(precision, recall, f)


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 (bag of normalised tokens)."""
    pred, ref = squad_tokens(prediction), squad_tokens(reference)
    if not pred or not ref:
        return float(pred == ref)
    overlap = sum((Counter(pred) & Counter(ref)).values())
    return _prf(overlap, len(pred), len(ref)).fmeasure


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def rouge_n(candidate: str, reference: str, n: int = 1) -> PRF:
    """ROUGE-N as rouge-score computes it (clipped n-gram overlap)."""

    def grams(tokens: list[str]) -> Counter[tuple[str, ...]]:
        return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))

    cand, ref = grams(rouge_tokens(candidate)), grams(rouge_tokens(reference))
    overlap = sum((cand & ref).values())
    return _prf(overlap, sum(cand.values()), sum(ref.values()))


def rouge_l(candidate: str, reference: str) -> PRF:
    """ROUGE-L (sentence-level LCS) as rouge-score's `rougeL`; rapidfuzz's LCS is exact and fast."""
    cand, ref = rouge_tokens(candidate), rouge_tokens(reference)
    if not cand or not ref:
        return PRF(0.0, 0.0, 0.0)
    lcs = LCSseq.similarity(cand, ref)
    return _prf(lcs, len(cand), len(ref))


def token_recall(prediction: str, reference: str) -> float:
    """ProMiSe/ReGround 'Recall': share of reference tokens that appear in the response."""
    ref = squad_tokens(reference)
    if not ref:
        return 0.0
    pred = set(squad_tokens(prediction))
    return sum(token in pred for token in ref) / len(ref)


def k_precision(prediction: str, knowledge: str | Sequence[str]) -> float:
    """K-Precision: share of response tokens that appear in the grounding knowledge."""
    pred = squad_tokens(prediction)
    if not pred:
        return 0.0
    text = knowledge if isinstance(knowledge, str) else "\n".join(knowledge)
    known = set(squad_tokens(text))
    return sum(token in known for token in pred) / len(pred)


def principle_scores(answer: str, passages: Sequence[str], query: str) -> dict[str, float]:
    """ProMiSe's proxy metric per principle: specificity, faithfulness, relevance."""
    knowledge = "\n".join(passages)
    return {
        "specificity": rouge_n(answer, knowledge, 1).recall,
        "faithfulness": rouge_l(answer, knowledge).fmeasure,
        "relevance": rouge_l(answer, query).fmeasure,
    }


def majority_best(candidates: Sequence[dict[str, float]]) -> int:
    """Index of the candidate that is best on the most metrics (ties: the earlier candidate)."""
    if not candidates:
        raise ValueError("majority_best needs at least one candidate")
    wins = [0] * len(candidates)
    for metric in candidates[0]:
        best = max(range(len(candidates)), key=lambda i: (candidates[i][metric], -i))
        wins[best] += 1
    return max(range(len(candidates)), key=lambda i: (wins[i], -i))


def weighted_improvement(new: dict[str, float], old: dict[str, float], weights: dict[str, float]) -> float:
    """ProMiSe's sum_t w_t * 1[m_t(new) >= m_t(old)]."""
    return sum(weights.get(metric, 1.0) * float(new[metric] >= old[metric]) for metric in new)


ECHO_WORDS = TEXT_CHECKS.echo_words  # a run of this many prompt words in a reply is the prompt echoed
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


@functools.lru_cache(maxsize=TEXT_CHECKS.prompt_sets_cached)
def _prompt_runs(templates: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    """Every run of ECHO_WORDS words of the prompts' own text with two content words (built once per prompt set:
    the prompts are the same for every check of a run)."""
    from reground.tools.text.lexical import STOPWORDS

    runs: set[tuple[str, ...]] = set()
    for template in templates:
        for part in _PLACEHOLDER.split(template):
            w = _words(part)
            runs.update(tuple(w[i : i + ECHO_WORDS]) for i in range(len(w) - ECHO_WORDS + 1))
    return frozenset(run for run in runs if sum(word not in STOPWORDS for word in run) >= 2)


def prompt_echo(reply: str, templates: Sequence[str]) -> str:
    """The first run of ECHO_WORDS words that the reply copies from the prompts' own text (their placeholders
    left out), or "": a weak model sometimes answers with the scaffolding ("The user's last message: ... The passage
    sentences closest ..."), which is grounded in nothing the documents say."""
    runs = _prompt_runs(tuple(templates))
    said = _words(reply)
    for i in range(len(said) - ECHO_WORDS + 1):
        if tuple(said[i : i + ECHO_WORDS]) in runs:
            return " ".join(said[i : i + ECHO_WORDS])
    return ""
