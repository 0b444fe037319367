"""Train the unit scorer (tools/signals/unit_scorer.py): the reader's cross-encoder body with a head learned on
developer documentation, reading a question and an answer unit together.

    pip install onnx   # the trainer edits the reader's ONNX graph; the package never needs it
    python -m reground.evals.train.unit_scorer pairs --corpora /work/corpora --out DIR   # weak pairs, features

The reader (reground/data/judge/reader-int8.onnx: all-MiniLM-L6-v2 fine-tuned as a cross-encoder on doc2dial) reads
[CLS] question [SEP] text [SEP] and scores the masked mean of its last layer with a linear head. Fine-tuning it takes
a GPU (evals/train/reader_train.py); on 2 CPU cores only the head is refitted: the body's pooled vector of every
(question, unit) pair is read once (int8, one pair a call, as at run time) and cached, and a logistic head over it is
fitted in seconds, per leave-one-corpus-out fold. The shipped scorer is the reader's graph with that head in place of
its own (float, 384 weights), int8 body unchanged.

Pairs:
- **labelled**, from the techdocs sets' turns (evals/train/loco.py collects them): the question against every unit
  of the turn's candidates; a unit holding every `must_contain` string is a positive, the others (mostly the same
  page's) are hard negatives. A fold never reads its held-out collection's pairs.
- **weak**, from other documentation sets (`--corpora`: folders of markdown, /work/corpora/MANIFEST.tsv): a section
  heading as the question for its section's first units (`heading`), a heading that is a question (`faq`), a
  command-line option's name ("what does --frozen do?") for the unit that explains it (`cli`); negatives are units
  of the same page's other sections. Each source's worth is measured by leaving it out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

READER_ONNX = Path("reground/data/judge/reader-int8.onnx")
POOLED = "/Div_output_0"  # the reader's masked mean of its last layer: what its head reads
HEAD_NODES = (  # the reader's quantised head, replaced by the fitted one
    "/Div_output_0_QuantizeLinear",
    "/head/Gemm_MatMul_quant_scales_mul",
    "/head/Gemm_MatMul_quant",
    "/head/Gemm_output_0_MatMul_output_quantized_cast",
    "/head/Gemm_MatMul_quant_output_scale_mul",
    "/head/Gemm_Add",
)
HEAD_OUTPUT = "/head/Gemm_output_0"  # what the graph's last node (Squeeze -> logit) reads
SEED = 20261207
L2 = 1.0
STEPS = 60  # L-BFGS iterations at most (the held-out MRR of weak pairs is flat beyond)
WEAK_NEGATIVES = 3
WEAK_PER_CORPUS = 100  # questions a documentation set gives at most (each pair is then read once, ~5 ms)
WEAK_WEIGHT = 0.5  # a weak pair's weight against a labelled one
SOURCES = ("heading", "faq", "cli")
OPTION = re.compile(r"^`{0,2}(--[a-z][\w-]*)\b")
# Pages whose headings are versions or dates (release notes): no question a user asks.
LOG_PAGE = re.compile(r"change-?log|release|history|news", re.I)
DIGITS = re.compile(r"\d")


@dataclass
class Pair:
    question: str
    text: str
    label: float
    group: str  # pairs of one question (a turn, or a heading of a page)
    source: str  # "labelled" or one of SOURCES
    collection: str  # the labelled pair's collection, the weak pair's documentation set


def body_with_pooled(source: Path, target: Path) -> Path:
    """The reader's graph with its pooled vector as a second output ("pooled"), for reading features."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(source))
    model.graph.node.append(helper.make_node("Identity", [POOLED], ["pooled"], name="pooled_out"))
    model.graph.output.append(helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 384]))
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return target


def with_head(source: Path, target: Path, weights: np.ndarray, bias: float) -> str:
    """The reader's graph with the fitted head (float MatMul + Add over the pooled vector) in place of its own;
    returns the file's sha256."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    kept = [n for n in graph.node if n.name not in HEAD_NODES]
    if len(kept) != len(graph.node) - len(HEAD_NODES):
        raise ValueError(f"{source} does not hold the reader's head nodes {HEAD_NODES}")
    used = {name for n in kept for name in n.input}
    del graph.node[:]
    graph.node.extend(kept)
    for init in [i for i in graph.initializer if i.name not in used]:
        graph.initializer.remove(init)
    graph.initializer.extend(
        [
            numpy_helper.from_array(weights.astype(np.float32).reshape(-1, 1), "scorer.weight"),
            numpy_helper.from_array(np.asarray([bias], dtype=np.float32), "scorer.bias"),
        ]
    )
    graph.node.extend(
        [
            helper.make_node("MatMul", [POOLED, "scorer.weight"], ["scorer_matmul"], name="scorer/MatMul"),
            helper.make_node("Add", ["scorer_matmul", "scorer.bias"], [HEAD_OUTPUT], name="scorer/Add"),
        ]
    )
    order = _topological(graph)
    del graph.node[:]
    graph.node.extend(order)
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return hashlib.sha256(target.read_bytes()).hexdigest()


def _topological(graph: Any) -> list[Any]:
    """The graph's nodes in an order where every input is made before it is read."""
    ready = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, out = list(graph.node), []
    while pending:
        progress = [n for n in pending if all(name in ready for name in n.input)]
        if not progress:
            raise ValueError("the edited graph has a node whose input nothing makes")
        for node in progress:
            out.append(node)
            ready.update(node.output)
        pending = [n for n in pending if n not in progress]
    return out


class PooledReader:
    """The reader's body over (question, text) pairs: its pooled vector per pair, one pair a call (int8 dynamic
    quantisation scales per call, so this is what the shipped scorer's head reads at run time)."""

    def __init__(self, body: Path) -> None:
        from reground.tools.adapters.cross_encoder import CrossEncoderReader
        from reground.tools.adapters.embeddings import MINILM_TOKENIZER, packaged_file

        self.reader = CrossEncoderReader(body, packaged_file(*MINILM_TOKENIZER))
        self.session = self.reader._sessions[0]

    def pooled(self, question: str, texts: Sequence[str]) -> np.ndarray:
        from reground.tools.tuning.models import READER

        tokenizer = self.reader._tokenizer
        query = tokenizer.encode(question or " ", add_special_tokens=False).ids[: READER.question_tokens]
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            ids, types = self.reader._pair(query, tokenizer.encode(text or " ", add_special_tokens=False).ids)
            feeds = {
                "input_ids": np.asarray([ids], dtype=np.int64),
                "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.asarray([types], dtype=np.int64),
            }
            (pooled,) = self.session.run(["pooled"], feeds)
            out[row] = pooled[0]
        return out


def labelled_pairs(turns: Iterable[Any]) -> list[Pair]:
    """Each answerable turn with a holding unit among those the scorer reads (signals/units.scorer_reads): its
    question against each of them."""
    from reground.tools.signals.units import scorer_reads

    out: list[Pair] = []
    for turn in turns:
        read = scorer_reads(turn.rows)
        if turn.answerability not in ("ANSWERABLE", "PARTIAL") or not turn.labels[read].any():
            continue
        group = f"{turn.collection}:{turn.case_id}:{turn.question}"
        for i in read:
            out.append(Pair(turn.question, turn.texts[i], float(turn.labels[i]), group, "labelled", turn.collection))
    return out


def _heading(section: str) -> str:
    return section.rsplit(" > ", 1)[-1].strip().strip("#").strip()


def weak_pairs(corpus: Path, rng: random.Random, name: str) -> list[Pair]:
    """A documentation set's weak pairs: per page, a section's heading (a question heading: `faq`) against the
    section's first two units, and an option's name against the unit that starts with it (`cli`); three units of
    the page's other sections as negatives for each."""
    from reground.tools.text.chunking import chunk_document
    from reground.tools.text.loaders import load_paths
    from reground.tools.text.sentences import text_sentences, without_list_marker

    documents, _ = load_paths([corpus])
    candidates: list[tuple[str, str, list[str], list[str]]] = []  # (source, question, positives, page's others)
    for doc in documents:
        if LOG_PAGE.search(doc.doc_id):
            continue
        sections: dict[str, list[str]] = {}
        for chunk in chunk_document(doc, max_tokens=160):
            sections.setdefault(str(chunk.get("section") or ""), []).extend(text_sentences(chunk["text"]))
        for section, units in sections.items():
            others = [u for s, us in sections.items() if s != section for u in us]
            heading = _heading(section)
            if not units or not others:
                continue
            if len(heading.split()) >= 2 and len(DIGITS.findall(heading)) * 4 < len(heading):
                source = "faq" if heading.endswith("?") else "heading"
                candidates.append((source, heading, units[:2], others))
            for unit in units:
                match = OPTION.match(without_list_marker(unit.strip()))
                if match:
                    candidates.append(("cli", f"what does {match.group(1)} do?", [unit], others))
    rng.shuffle(candidates)
    out: list[Pair] = []
    for k, (source, question, positives, others) in enumerate(candidates[:WEAK_PER_CORPUS]):
        group = f"{name}:{k}"
        out += [Pair(question, text, 1.0, group, source, name) for text in positives]
        negatives = rng.sample(others, min(WEAK_NEGATIVES, len(others)))
        out += [Pair(question, text, 0.0, group, source, name) for text in negatives if text not in positives]
    return out


def read_features(pairs: Sequence[Pair], reader: PooledReader, cache: Path) -> np.ndarray:
    """Every pair's pooled vector, read once and kept in `cache` (an .npz keyed by the pair's sha1)."""
    keys = [hashlib.sha1(f"{p.question}\x00{p.text}".encode()).hexdigest() for p in pairs]
    known: dict[str, np.ndarray] = {}
    if cache.is_file():
        with np.load(cache) as stored:
            known = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))
    todo: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if key not in known:
            todo.setdefault(key, []).append(i)
    by_question: dict[str, list[int]] = {}
    for rows in todo.values():
        by_question.setdefault(pairs[rows[0]].question, []).append(rows[0])
    for n, (question, rows) in enumerate(by_question.items()):
        vectors = reader.pooled(question, [pairs[i].text for i in rows])
        for i, vector in zip(rows, vectors, strict=True):
            known[keys[i]] = vector
        if n % 200 == 0:
            print(f"read {n} of {len(by_question)} questions", file=sys.stderr)
    if todo:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, keys=np.asarray(list(known)), vectors=np.stack(list(known.values())))
    return np.stack([known[k] for k in keys]) if keys else np.zeros((0, 384), dtype=np.float32)


def fit_head(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, float]:
    """A weighted, L2-regularised logistic head over standardised pooled vectors (L-BFGS), folded back to the raw
    vector: (weights, bias) so that logit = x @ weights + bias."""
    from scipy.optimize import minimize

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = (x - mean) / scale
    share = weight / weight.sum()

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        logits = z @ w + b
        p = 1.0 / (1.0 + np.exp(-logits))
        value = float(share @ (np.logaddexp(0.0, logits) - y * logits)) + 0.5 * L2 * float(w @ w) / len(y)
        error = share * (p - y)
        return value, np.append(z.T @ error + L2 * w / len(y), error.sum())

    theta = minimize(loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B", options={"maxiter": STEPS}).x
    raw = theta[:-1] / scale
    return raw.astype(np.float32), float(theta[-1] - raw @ mean)


def fit_pairs(pairs: Sequence[Pair], features: np.ndarray, keep: Any) -> tuple[np.ndarray, float]:
    """The head fitted on the pairs `keep(pair)` accepts."""
    rows = [i for i, p in enumerate(pairs) if keep(p)]
    y = np.asarray([pairs[i].label for i in rows], dtype=np.float64)
    weight = np.asarray([1.0 if pairs[i].source == "labelled" else WEAK_WEIGHT for i in rows])
    return fit_head(features[rows].astype(np.float64), y, weight)


def weak_corpora(corpora: Path) -> list[tuple[str, Path]]:
    """(repository, docs folder) of each documentation set the manifest names."""
    manifest = corpora / "MANIFEST.tsv"
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest} is missing: --corpora takes the folder the documentation sets are in")
    rows = [line.split("\t") for line in manifest.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    return [(row[0], corpora / row[2]) for row in rows if (corpora / row[2]).is_dir()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reground.evals.train.unit_scorer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pairs", help="the weak pairs of every documentation set and their features")
    p.add_argument("--corpora", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rng = random.Random(SEED)
    pairs = [pair for name, folder in weak_corpora(args.corpora) for pair in weak_pairs(folder, rng, name)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "weak_pairs.jsonl").write_text(
        "".join(json.dumps(p.__dict__, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8"
    )
    counts = {s: sum(p.source == s for p in pairs) for s in SOURCES}
    print(f"{len(pairs)} weak pairs {counts}", file=sys.stderr)
    reader = PooledReader(body_with_pooled(READER_ONNX, args.out / "body.onnx"))
    read_features(pairs, reader, args.out / "features.npz")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
