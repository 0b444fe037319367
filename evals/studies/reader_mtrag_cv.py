"""Does a reader adapted to MTRAG-UN tell answerable tasks from unanswerable ones? Measured, not shipped.

The shipped reader (reground/data/judge/reader-int8.onnx) was trained on doc2dial; its best logit as one more input
of the answerability head lowered the head's out-of-fold AUC (0.882 -> 0.876). This fine-tunes it on MTRAG-UN dev
under the head's own 5 folds (by task, one task per conversation): for each fold, the reader is trained on the other
four folds' sentences and scores this fold's, so every task's best logit comes from a reader that never saw it. Then
the head is cross-validated with that logit as a sixth input.

The float weights are rebuilt from the int8 ONNX (per-channel scales; the rebuilt model's logits correlate 0.995
with onnxruntime's), since the fine-tuned float weights were not kept. Labels: a sentence of a gold document whose
words (3+ letters) lie at least half in the task's reference answer; every sentence of an UNANSWERABLE task is a
negative. Needs torch, transformers, onnx and a MiniLM folder for the config and tokenizer (as reader_train.py); CI
never runs it. On these 2 cores: about 4 minutes a fold.

    python -m reground.evals.train.judge train --cache CACHE
    python -m reground.evals.studies.reader_mtrag_cv --cache CACHE --model-dir MINILM_DIR \\
        --out evals/results/judge/reader_mtrag_cv.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261127
ANSWER_SHARE = 0.5  # share of a gold-document sentence's words inside the reference answer that makes it a positive
BATCH = 16
WARMUP_SHARE = 0.1
_WORDS = re.compile(r"\w{3,}")

Encoded = tuple[list[int], list[int]]


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORDS.findall(text)]


def collect_tasks(cache: Path) -> list[dict[str, Any]]:
    """MTRAG-UN dev tasks as the judge's cache holds them: the reader's query, the sentences, their labels, the head's
    five inputs and the fold."""
    from reground.evals.train.judge import judged_tasks, load_turns, task_fold, turn_feature_rows
    from reground.tools.signals.reading import reader_query

    judged = judged_tasks(load_turns(cache / "mtrag.npz"))
    tasks = []
    for turn, row in zip(judged, turn_feature_rows(judged), strict=True):
        answer = set(_words(turn.gold_answer))
        answerable = turn.answerability != "UNANSWERABLE"
        labels = []
        for text, doc_id in zip(turn.texts, turn.doc_ids, strict=True):
            words = _words(text)
            inside = sum(w in answer for w in words) / len(words) if words else 0.0
            labels.append(float(answerable and doc_id in turn.gold_doc_ids and inside >= ANSWER_SHARE))
        tasks.append(
            {
                "case_id": turn.case_id,
                "fold": task_fold(turn.case_id),
                "answerable": answerable,
                "query": reader_query(turn.question, turn.dialogue),
                "texts": list(turn.texts),
                "labels": labels,
                "head_inputs": [float(x) for x in row],
            }
        )
    return tasks


def head_auc(inputs: np.ndarray, answerable: np.ndarray, folds: np.ndarray) -> float:
    """The answerability head's AUC out of fold, fitted as evals/train/judge.py fits it."""
    from reground.evals.train.judge import auc, head_out_of_fold

    return auc(list(head_out_of_fold(inputs, answerable, folds)), list(answerable > 0))


def answer_mrr(tasks: Sequence[dict[str, Any]], key: str) -> float:
    ranks = []
    for task in tasks:
        labels = np.asarray(task["labels"])
        if labels.any():
            order = np.argsort(-np.asarray(task[key]), kind="stable")
            ranks.append(1.0 / (int(np.nonzero(labels[order] > 0)[0][0]) + 1))
    return float(np.mean(ranks))


def main(argv: Sequence[str] | None = None) -> int:
    import onnx
    import torch
    from onnx import numpy_helper
    from reground.evals.train.judge import FOLDS, auc
    from reground.tools.adapters.cross_encoder import READER_FILE
    from reground.tools.tuning.models import READER
    from torch import nn
    from transformers import AutoTokenizer, BertModel

    parser = argparse.ArgumentParser(prog="python -m reground.evals.studies.reader_mtrag_cv", description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="the folder `reground judge train --cache` wrote")
    parser.add_argument("--model-dir", type=Path, required=True, help="all-MiniLM-L6-v2 (config and tokenizer)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-5)
    args = parser.parse_args(argv)
    started = time.time()
    torch.set_num_threads(2)
    onnx_path = Path(str(resources.files("reground") / "data" / "judge" / READER_FILE))
    graph = onnx.load(str(onnx_path)).graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def dequantized(name: str) -> Any:
        q, scale, zero = (weights[f"{name}_{part}"].astype(np.float32) for part in ("quantized", "scale", "zero_point"))
        return torch.tensor((q - zero) * scale)

    # The 37 int8 matrices in graph order: per layer query, key, value, attention output, intermediate, output; then
    # the head. ONNX stores them as (in, out); torch's Linear as (out, in).
    matrices = [n.input[1].removesuffix("_quantized") for n in graph.node if n.op_type == "MatMulInteger"]
    linear = (
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    )

    class Reader(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(str(args.model_dir), add_pooling_layer=False).float()
            self.head = nn.Linear(self.bert.config.hidden_size, 1)
            state = {k: torch.tensor(weights[k]) for k in self.state_dict() if k in weights}
            for table in ("word", "token_type", "position"):
                state[f"bert.embeddings.{table}_embeddings.weight"] = dequantized(
                    f"bert.embeddings.{table}_embeddings.weight"
                )
            for layer in range(self.bert.config.num_hidden_layers):
                for offset, part in enumerate(linear):
                    matrix = matrices[layer * len(linear) + offset]
                    state[f"bert.encoder.layer.{layer}.{part}.weight"] = dequantized(matrix).T.contiguous()
            state["head.weight"] = dequantized(matrices[-1]).T.contiguous()
            self.load_state_dict(state)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-6)).squeeze(-1)

    tokenizer = AutoTokenizer.from_pretrained(str(args.model_dir))

    def encode(query: str, sentence: str) -> Encoded:
        q = tokenizer(query, add_special_tokens=False)["input_ids"][: READER.question_tokens]
        s = tokenizer(sentence, add_special_tokens=False)["input_ids"][: READER.pair_tokens - 3 - len(q)]
        return [tokenizer.cls_token_id, *q, tokenizer.sep_token_id, *s, tokenizer.sep_token_id], [0] * (len(q) + 2) + [
            1
        ] * (len(s) + 1)

    def batch_of(items: Sequence[Encoded]) -> tuple[Any, Any, Any]:
        width = max(len(ids) for ids, _ in items)
        ids_t = torch.zeros(len(items), width, dtype=torch.long)
        types_t, mask_t = torch.zeros_like(ids_t), torch.zeros_like(ids_t)
        for k, (ids, types) in enumerate(items):
            ids_t[k, : len(ids)], types_t[k, : len(types)], mask_t[k, : len(ids)] = (
                torch.tensor(ids),
                torch.tensor(types),
                1,
            )
        return ids_t, mask_t, types_t

    def score(model: Any, items: Sequence[Encoded]) -> list[float]:
        model.eval()
        with torch.no_grad():
            return [float(x) for x in model(*batch_of(items))] if items else []

    tasks = collect_tasks(args.cache)
    for task in tasks:
        task["encoded"] = [encode(task["query"], s) for s in task["texts"]]
    shipped = Reader()
    for task in tasks:
        task["shipped"] = score(shipped, task["encoded"])
    loss_fn = nn.BCEWithLogitsLoss()
    for k in range(FOLDS):
        random.seed(SEED + k)
        torch.manual_seed(SEED + k)
        model = Reader()
        train = [(e, y) for t in tasks if t["fold"] != k for e, y in zip(t["encoded"], t["labels"], strict=True)]
        optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        total = math.ceil(len(train) / BATCH) * args.epochs
        warm = max(1, int(WARMUP_SHARE * total))
        step = 0
        for _ in range(args.epochs):
            model.train()
            random.shuffle(train)
            for i in range(0, len(train), BATCH):
                chunk = train[i : i + BATCH]
                for group in optimiser.param_groups:
                    group["lr"] = args.lr * min((step + 1) / warm, (total - step) / (total - warm))
                loss = loss_fn(model(*batch_of([e for e, _ in chunk])), torch.tensor([y for _, y in chunk]))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                step += 1
        for task in tasks:
            if task["fold"] == k:
                task["adapted"] = score(model, task["encoded"])
        print(f"fold {k}: {len(train)} training pairs, {time.time() - started:.0f} s", flush=True)

    answerable = np.asarray([t["answerable"] for t in tasks], dtype=np.float64)
    folds = np.asarray([t["fold"] for t in tasks])
    inputs = np.asarray([t["head_inputs"] for t in tasks], dtype=np.float32)
    result: dict[str, Any] = {
        "what": "the reader fine-tuned on MTRAG-UN dev under the answerability head's 5 folds, out of fold",
        "tasks": len(tasks),
        "positives": int(sum(sum(t["labels"]) for t in tasks)),
        "epochs": args.epochs,
        "learning_rate": args.lr,
        "seconds": round(time.time() - started),
        "head_auc": round(head_auc(inputs, answerable, folds), 4),
    }
    for key in ("shipped", "adapted"):
        best = np.asarray([[max(t[key]) if t[key] else -10.0] for t in tasks], dtype=np.float32)
        result[key] = {
            "best_logit_auc": round(auc(list(best[:, 0]), list(answerable > 0)), 4),
            "head_with_best_logit_auc": round(head_auc(np.hstack([inputs, best]), answerable, folds), 4),
            "answer_sentence_mrr": round(answer_mrr(tasks, key), 4),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
