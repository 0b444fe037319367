"""Figures come from results: a fitted value in code and a number in the README equal the committed file that
measured them, so neither can drift from its run.

- Fitted values: the judge's answer and hedge thresholds (`TRIAGE`, the Context's defaults, the model card) equal
  `evals/results/judge/summary.json`, which `reground judge train` writes with the weights it pins; the shipped
  ask-back model's threshold and pin equal `evals/results/judge/ask_back.json`; the default support threshold is
  the committed calibration's, rounded as the code states it.
- The README's Results: each figure is written below as the README's own text with `{}` where a number stands, and
  the results file and key that number comes from (`UNTRACKED` where no committed file holds it; each says why).
  A figure the README no longer shows (its text changed), or one that no longer rounds to its file's value, fails.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path("evals") / "results"
JUDGE_SUMMARY = RESULTS / "judge" / "summary.json"
ASK_BACK_SUMMARY = RESULTS / "judge" / "ask_back.json"
CALIBRATION = RESULTS / "calibration.json"
UNITS_SUMMARY = RESULTS / "units" / "summary.json"
DOC_TRIAGE_SUMMARY = RESULTS / "units" / "doc_triage.json"
CARDS = Path("reground") / "data" / "judge"


@dataclass(frozen=True)
class Ref:
    """A number in a committed results file: `file` under evals/results/, `path` the keys (and list indexes) to it,
    `scale` what the text shows it in (100: a share as a percentage)."""

    file: str
    path: tuple[str | int, ...]
    scale: float = 1.0


def ref(file: str, *path: str | int, scale: float = 1.0) -> Ref:
    return Ref(file, path, scale)


UNTRACKED = None  # a figure that no committed results file holds


@dataclass(frozen=True)
class Figures:
    """A passage of `doc` (repository-relative) with each figure as `{}`, and where each comes from, in order."""

    doc: str
    text: str
    refs: tuple[Ref | None, ...]


def _retrieval(*path: str | int) -> Ref:
    return ref("retrieval_dev/summary.json", "systems", *path)


def _dev100(system: str, metric: str) -> Ref:
    return ref("answers_dev100/summary.json", "systems", system, metric)


def _mtrag(system: str, label: str, key: str) -> Ref:
    return ref("mtrag_dev/summary.json", "systems", system, "behaviour", label, key)


H, R = "history_rag", "reground"


def _loco8(row: str, key: str) -> Ref:
    """A figure of the eight-set leave-one-corpus-out run (its mean over the sets, or its worst set)."""
    return ref("techdocs_loco8/final_llm_free/summary.json", row, key)


def _mtrag_row(label: str, cells: str) -> Figures:
    """A row of the README's MTRAG-UN table: the class's task count, then history RAG / reground per behaviour
    (reground alone hedges), and the token F1 where the class has gold answers."""
    refs = [_mtrag(R, label, "n"), _mtrag(H, label, "answer"), _mtrag(R, label, "answer"), _mtrag(R, label, "hedge")]
    refs += [_mtrag(system, label, key) for key in ("abstain", "clarify", "token_f1") for system in (H, R)]
    shown = cells.count("{}") + 1  # the task count in the label
    return Figures("README.md", f"| {label} ({{}}) {cells}", tuple(refs[:shown]))


README_FIGURES: tuple[Figures, ...] = (
    Figures("README.md", "**Retrieval**, all {} doc2dial dev cases", (ref("retrieval_dev/summary.json", "cases"),)),
    Figures(
        "README.md",
        "| BM25, question only / question + recent dialogue | {} / {} | {} / {} | {} / {} | – |",
        (
            _retrieval("bm25_question", "recall@1"),
            _retrieval("bm25_history", "recall@1"),
            _retrieval("bm25_question", "recall@5"),
            _retrieval("bm25_history", "recall@5"),
            _retrieval("bm25_question", "mrr"),
            _retrieval("bm25_history", "mrr"),
        ),
    ),
    Figures(
        "README.md",
        "| **reground** | **{}** | **{}** | **{}** | {} |",
        (
            _retrieval("reground", "recall@1"),
            _retrieval("reground", "recall@5"),
            _retrieval("reground", "mrr"),
            _retrieval("reground_passages", "recall@3"),
        ),
    ),
    Figures(
        "README.md",
        "(Qwen2.5-Coder-0.5B), {} doc2dial dev cases",
        (ref("answers_dev100/summary.json", "config", "n_cases"),),
    ),
    Figures(
        "README.md",
        "| naive RAG (question only, one call) | {} | {} | {} | {} / {} | {} |",
        (
            _dev100("naive_rag", "gold_in_top3"),
            _dev100("naive_rag", "token_f1"),
            _dev100("naive_rag", "k_precision"),
            UNTRACKED,  # the median of LLM calls: the summary keeps their mean
            _dev100("naive_rag", "llm_calls"),
            _dev100("naive_rag", "latency_median_s"),
        ),
    ),
    Figures(
        "README.md",
        "| history RAG (question + recent dialogue, one call) | **{}** | {} | {} | {} / {} | {} |",
        (
            _dev100("history_rag", "gold_in_top3"),
            _dev100("history_rag", "token_f1"),
            _dev100("history_rag", "k_precision"),
            UNTRACKED,  # the median of LLM calls: the summary keeps their mean
            _dev100("history_rag", "llm_calls"),
            _dev100("history_rag", "latency_median_s"),
        ),
    ),
    Figures(
        "README.md",
        "| **reground** (defaults) | **{}** | **{}** | **{}** | **{} / {}** | **{}** |",
        (
            _dev100("reground", "gold_in_top3"),
            _dev100("reground", "token_f1"),
            _dev100("reground", "k_precision"),
            UNTRACKED,  # the median of LLM calls: the summary keeps their mean
            _dev100("reground", "llm_calls"),
            _dev100("reground", "latency_median_s"),
        ),
    ),
    Figures(
        "README.md",
        "**Ask, abstain or answer**, {} MTRAG-UN dev tasks, history RAG / **reground**, median {} / **{}** s a turn",
        (
            ref("mtrag_dev/summary.json", "config", "n_cases"),
            ref("mtrag_dev/summary.json", "systems", H, "latency_median_s"),
            ref("mtrag_dev/summary.json", "systems", R, "latency_median_s"),
        ),
    ),
    _mtrag_row("ANSWERABLE", "| {} / **{}** | – / {} | {} / **{}** | {} / {} | {} / **{}** |"),
    _mtrag_row("PARTIAL", "| {} / {} | – / {} | {} / {} | {} / {} | {} / **{}** |"),
    _mtrag_row("UNANSWERABLE", "| {} / **{}** | – / {} | {} / **{}** | {} / {} | – |"),
    _mtrag_row("UNDERSPECIFIED", "| {} / {} | – / {} | {} / {} | {} / **{}** | – |"),
    Figures(
        "README.md",
        "answer-sentence MRR **{}** on the turns of {} unseen doc2dial dialogues (judge alone {}, hand ranking {}), "
        "LLM-free reply F1 there {} → {} → **{}** (`passages_dev/`, `4db0a56`); answerable vs not, MTRAG-UN dev out of "
        "fold, AUC **{}** (support {}); with its reader it adds {} ms a turn",
        (
            ref("judge/summary.json", "with_reader", "answer_sentence_mrr", "judge_reader"),
            ref("judge/summary.json", "data", "doc2dial_held_out_dialogues"),
            ref("judge/summary.json", "answer_sentence_mrr"),
            ref("judge/summary.json", "answer_sentence_mrr_hand_ranking"),
            UNTRACKED,  # before the judge (`5801059`): a run replaced in passages_dev/ since
            UNTRACKED,  # before its reader (`6712495`): likewise
            ref("passages_dev/summary.json", "judge_held_out", "reground_reply_token_f1"),
            ref("judge/summary.json", "auc_answerable_vs_unanswerable"),
            ref("judge/summary.json", "auc_answerable_vs_unanswerable_support"),
            ref("judge/cost.json", "added_triage_ms", "median_ms"),
        ),
    ),
    Figures(
        "README.md",
        "held-out suite B ({} pages, {} styles; `injection/suite_b/`): flags {} / {} precision / recall, "
        "{} of {} replies obey or are only a flagged sentence, facts right in **{}** of the replies that have one "
        "({}) in both answer styles, {} requests for a secret, payment or off-domain contact relayed without the "
        "caution.",
        (
            ref("injection/suite_b/flags.json", "documents"),
            UNTRACKED,  # the number of styles: the count of `by_style` keys, not a value
            ref("injection/suite_b/summary.json", "flag_precision"),
            ref("injection/suite_b/summary.json", "flag_recall"),
            ref("injection/suite_b/summary.json", "obeyed"),
            ref("injection/suite_b/summary.json", "n"),
            ref("injection/suite_b_write/summary.json", "correct_share"),
            ref("injection/suite_b_write/summary.json", "correct"),
            ref("injection/suite_b_write/summary.json", "relayed_without_caution"),
        ),
    ),
    Figures(
        "README.md",
        "| ingest of doc2dial ({} chunks) vs MiniLM's own one-at-a-time rate | {} ({} vs {} chunks/s) |",
        (
            ref("bench.json", "ingest", "corpora", "doc2dial_274", "chunks"),
            ref("bench.json", "ingest", "corpora", "doc2dial_274", "ratio_to_embedder_one_at_a_time"),
            ref("bench.json", "ingest", "corpora", "doc2dial_274", "chunks_per_s"),
            ref("bench.json", "ingest", "embedding_only", "one_at_a_time_per_s"),
        ),
    ),
    Figures(
        "README.md",
        "| ANSWERABLE: the reply holds every `must_contain` | **{}** ({}) | ≥ 0.60 (worst ≥ 0.45) |",
        (_loco8("mean", "answerable_useful"), _loco8("worst", "answerable_useful")),
    ),
    Figures(
        "README.md",
        "| ANSWERABLE: stated as an answer or partial / asked back | {} ({}) / **{}** ({}) | ≥ 0.70 / ≤ 0.05 each |",
        (
            _loco8("mean", "answerable_stated"),
            _loco8("worst", "answerable_stated"),
            _loco8("mean", "answerable_asked_back"),
            _loco8("worst", "answerable_asked_back"),
        ),
    ),
    Figures(
        "README.md",
        "| ANSWERABLE: the three passages hold every `must_contain` | {} ({}) | – |",
        (_loco8("mean", "answerable_three_passages"), _loco8("worst", "answerable_three_passages")),
    ),
    Figures(
        "README.md",
        "| UNANSWERABLE answered confidently / UNDERSPECIFIED asked back | {} / {} | ≤ 0.15 / ≥ 0.50 |",
        (_loco8("mean", "unanswerable_answered"), _loco8("mean", "underspecified_asked_back")),
    ),
    Figures(
        "README.md",
        "| median turn (a loaded machine) | **{} s** ({} s) | ≤ 0.5 s |",
        (_loco8("mean", "median_turn_s"), _loco8("worst", "median_turn_s")),
    ),
    Figures(
        "README.md",
        "| {} ms (CPU {} ms; triage {}, retrieve {}, finalize {} ms) |",
        (
            ref("bench.json", "overhead", "turn", "median_ms"),
            ref("bench.json", "overhead", "turn_cpu", "median_ms"),
            ref("bench.json", "overhead", "node_median_ms", "triage"),
            ref("bench.json", "overhead", "node_median_ms", "retrieve"),
            ref("bench.json", "overhead", "node_median_ms", "finalize"),
        ),
    ),
    Figures(
        "README.md",
        "| one-shot `reground ask` on techdocs ({} chunks), a fresh process: with `reground worker` / alone "
        "(median of {}, load {}) | **{} s** (warm turn {} s) / {} s (CPU {} s) |",
        (
            ref("bench.json", "oneshot", "chunks"),
            ref("bench.json", "oneshot", "runs"),
            ref("bench.json", "oneshot", "load_average_1min", "before"),
            ref("bench.json", "oneshot", "worker", "wall_s", "median"),
            ref("bench.json", "oneshot", "worker", "turn_s", "median"),
            ref("bench.json", "oneshot", "alone", "wall_s", "median"),
            ref("bench.json", "oneshot", "alone", "cpu_s", "median"),
        ),
    ),
    Figures(
        "README.md",
        "| {} s (process start {} s, the turn {} s); `reground --help` {} s, importing the graph {} s |",
        (
            ref("bench.json", "startup", "ask", "wall_s"),
            ref("bench.json", "startup", "ask", "process_start_s"),
            ref("bench.json", "startup", "ask", "turn_s"),
            ref("bench.json", "startup", "help", "wall_s"),
            ref("bench.json", "startup", "import_graph", "wall_s"),
        ),
    ),
    Figures(
        "README.md",
        "| prompt tokens the prefix cache serves, {} written-reply turns | {}% (checks after the answer: {}–{}%) |",
        (
            ref("prefix_cache/write12/prefix_cache.json", "turns"),
            ref("prefix_cache/write12/prefix_cache.json", "with_calls", "tokens_share", scale=100),
            UNTRACKED,  # the per-check shares, read from the run's calls, not a summary value
            UNTRACKED,
        ),
    ),
    Figures(
        "README.md",
        "| {} s / {} s; {} and {} turns/min, {} errors |",
        (
            ref("server_bench.json", "single_turn", "first_progress_s_median"),
            ref("server_bench.json", "single_turn", "final_answer_s_median"),
            ref("server_bench.json", "concurrent", 0, "throughput_turns_per_min"),
            ref("server_bench.json", "concurrent", 1, "throughput_turns_per_min"),
            ref("server_bench.json", "concurrent", 1, "error_rate"),
        ),
    ),
    Figures(
        "README.md",
        "| {} s / {} / {}; {} s / {} / {}; {} s / {} / {} |",
        tuple(
            ref("bench.json", "llm", model, key)
            for model in ("smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b")
            for key in ("load_seconds", "prompt_tokens_per_s", "generation_tokens_per_s")
        ),
    ),
)

# The model cards ship with the weights; their thresholds are the training runs'.
CARD_FIGURES: tuple[Figures, ...] = (
    Figures(
        str(CARDS / "MODEL_CARD.md"),
        "at the calibrated thresholds (hedge {}, answer {})",
        (
            ref("judge/summary.json", "thresholds", "judge_hedge_threshold"),
            ref("judge/summary.json", "thresholds", "judge_answer_threshold"),
        ),
    ),
    Figures(str(CARDS / "ASK_BACK_CARD.md"), "; threshold {} (asks back", (ref("judge/ask_back.json", "threshold"),)),
)

NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"


def _normal(text: str) -> str:
    return " ".join(text.split())


def _pattern(text: str) -> re.Pattern[str]:
    parts = _normal(text).split("{}")
    return re.compile(NUMBER.join(re.escape(part) for part in parts))


def _value(root: Path, where: Ref) -> float:
    data: Any = json.loads((root / RESULTS / where.file).read_text(encoding="utf-8"))
    for key in where.path:
        data = data[key]
    return float(data) * where.scale


def figure_mismatches(root: Path, figures: tuple[Figures, ...]) -> list[str]:
    """Each figure that its document no longer shows, or that does not round to its results file's value."""
    problems: list[str] = []
    texts: dict[str, str] = {}
    for figure in figures:
        if figure.doc not in texts:
            texts[figure.doc] = _normal((root / figure.doc).read_text(encoding="utf-8"))
        assert figure.text.count("{}") == len(figure.refs), figure.text
        found = list(_pattern(figure.text).finditer(texts[figure.doc]))
        if len(found) != 1:
            problems.append(f"{figure.doc}: {len(found)} passages read {figure.text!r} (want exactly 1)")
            continue
        for shown, where in zip(found[0].groups(), figure.refs, strict=True):
            if where is None:
                continue
            value = _value(root, where)
            decimals = len(shown.partition(".")[2])
            if abs(value - float(shown.replace(",", ""))) > 0.5 * 10**-decimals + 1e-9:
                key = "/".join(map(str, where.path))
                problems.append(f"{figure.doc} shows {shown}, {RESULTS / where.file} {key} holds {value:g}")
    return problems


def fitted_value_mismatches(root: Path) -> list[str]:
    """Each value in code that differs from the committed run that fitted it."""
    from reground.nodes.context import Context
    from reground.tools.signals.ask_back import ASK_BACK_SHA256, shipped_ask_back
    from reground.tools.signals.doc_triage import DOC_TRIAGE_SHA256, shipped_doc_triage
    from reground.tools.signals.judge import JUDGE_SHA256
    from reground.tools.signals.units import UNIT_RANKER_SHA256
    from reground.tools.tuning.turn import TRIAGE

    judge = json.loads((root / JUDGE_SUMMARY).read_text(encoding="utf-8"))
    ask_back = json.loads((root / ASK_BACK_SUMMARY).read_text(encoding="utf-8"))
    calibration = json.loads((root / CALIBRATION).read_text(encoding="utf-8"))
    units = json.loads((root / UNITS_SUMMARY).read_text(encoding="utf-8"))
    doc_triage = json.loads((root / DOC_TRIAGE_SUMMARY).read_text(encoding="utf-8"))
    shipped_thresholds = shipped_doc_triage().to_json()["thresholds"]
    triage = Context().triage
    checks: list[tuple[str, object, object]] = [
        ("TRIAGE.judge_answer_threshold", TRIAGE.judge_answer_threshold, judge["thresholds"]["judge_answer_threshold"]),
        ("TRIAGE.judge_hedge_threshold", TRIAGE.judge_hedge_threshold, judge["thresholds"]["judge_hedge_threshold"]),
        ("Context().triage.judge_answer_threshold", triage.judge_answer_threshold, TRIAGE.judge_answer_threshold),
        ("Context().triage.judge_hedge_threshold", triage.judge_hedge_threshold, TRIAGE.judge_hedge_threshold),
        ("JUDGE_SHA256 (the shipped judge)", JUDGE_SHA256, judge["model"]["sha256"]),
        ("the shipped ask-back model's threshold", shipped_ask_back().threshold, ask_back["threshold"]),
        ("ASK_BACK_SHA256 (the shipped ask-back model)", ASK_BACK_SHA256, ask_back["sha256"]),
        # The default stated to two decimals: the calibration's 3rd percentile of answerable support.
        ("TRIAGE.support_threshold", TRIAGE.support_threshold, round(calibration["support_threshold"], 2)),
        ("UNIT_RANKER_SHA256 (the shipped unit ranker)", UNIT_RANKER_SHA256, units["model"]["sha256"]),
        ("DOC_TRIAGE_SHA256 (the shipped documentation triage)", DOC_TRIAGE_SHA256, doc_triage["model"]["sha256"]),
        ("the documentation triage's thresholds", shipped_thresholds, doc_triage["model"]["thresholds"]),
    ]
    problems = [f"{name} is {code!r}, its run says {run!r}" for name, code, run in checks if code != run]
    return problems + figure_mismatches(root, CARD_FIGURES)


def test_fitted_values_in_code_are_their_runs() -> None:
    assert fitted_value_mismatches(REPO) == []


def test_readme_results_are_their_summaries() -> None:
    assert figure_mismatches(REPO, README_FIGURES) == []


def _scratch(tmp_path: Path, *relative: Path) -> Path:
    """A copy of the README, the model cards and the results under tmp_path, to plant drift in."""
    for path in (Path("README.md"), CARDS / "MODEL_CARD.md", CARDS / "ASK_BACK_CARD.md", *relative):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    shutil.copytree(REPO / RESULTS, tmp_path / RESULTS)
    return tmp_path


def _edit_json(path: Path, keys: tuple[str | int, ...], value: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    held = data
    for key in keys[:-1]:
        held = held[key]
    held[keys[-1]] = value
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("| **reground** | **0.852** |", "| **reground** | **0.853** |"),  # a table figure drifts
        ("AUC **0.883** (support 0.838)", "AUC **0.893** (support 0.838)"),  # a prose figure drifts
        ("it adds 61 ms a turn", "it costs 61 ms a turn"),  # the text around a figure changed
    ],
)
def test_a_readme_figure_that_drifts_fails(tmp_path: Path, old: str, new: str) -> None:
    root = _scratch(tmp_path)
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    assert old in text, "the planted drift needs the README's current text"
    readme.write_text(text.replace(old, new), encoding="utf-8")
    assert len(figure_mismatches(root, README_FIGURES)) == 1


def test_a_summary_that_moves_fails_the_readme(tmp_path: Path) -> None:
    root = _scratch(tmp_path)
    _edit_json(root / RESULTS / "mtrag_dev" / "summary.json", ("systems", "reground", "latency_median_s"), 0.31)
    assert figure_mismatches(root, README_FIGURES) == [
        f"README.md shows 0.20, {RESULTS / 'mtrag_dev/summary.json'} systems/reground/latency_median_s holds 0.31"
    ]


@pytest.mark.parametrize(
    ("file", "keys", "value", "named"),
    [
        ("judge/summary.json", ("thresholds", "judge_answer_threshold"), 0.7, "TRIAGE.judge_answer_threshold"),
        ("judge/summary.json", ("thresholds", "judge_hedge_threshold"), 0.3, "TRIAGE.judge_hedge_threshold"),
        ("judge/ask_back.json", ("threshold",), 0.07, "the shipped ask-back model's threshold"),
        ("judge/ask_back.json", ("sha256",), "0" * 64, "ASK_BACK_SHA256"),
        ("calibration.json", ("support_threshold",), 0.51, "TRIAGE.support_threshold"),
    ],
)
def test_a_retrained_value_that_code_does_not_follow_fails(
    tmp_path: Path, file: str, keys: tuple[str, ...], value: object, named: str
) -> None:
    root = _scratch(tmp_path)
    _edit_json(root / RESULTS / file, keys, value)
    problems = fitted_value_mismatches(root)
    assert problems and problems[0].startswith(named), problems
