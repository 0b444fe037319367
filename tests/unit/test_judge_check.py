"""The judge check: labelled items from a run, a constant judge is never trusted, and the judge's verdicts and
probabilities come from the token log-probabilities it returns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage
from reground.evals.runs.answers import summarize_run
from reground.evals.runs.judge_check import check_hallucination_judge, roc_auc, score_verdicts, validation_items
from reground.evals.runs.report import write_report

from reground.testing.fake_chat import ScriptedChatModel

PASSAGES = [
    "Employees in Germany get thirty days of paid leave every calendar year from their first month.",
    "Requests for leave go through the HR portal and need the approval of your line manager first.",
    "Travel receipts are submitted in the expense portal within thirty days after the trip ends.",
    "Parental leave can be split into three blocks that you announce seven weeks in advance.",
]


def _rows(n: int = 6) -> list[dict[str, object]]:
    return [
        {
            "case_id": f"c{i}",
            "question": f"question {i}?",
            "history": [{"role": "user", "text": "hello"}],
            "passages": [{"text": PASSAGES[i % len(PASSAGES)]}],
            "answer": "You get thirty days.",
            "gold_answer": "thirty days of paid leave",
            "gold_in_top3": True,
            "metrics": {"words": 4, "token_f1": 0.5, "k_precision": 0.9, "recall": 0.4, "rouge_l": 0.3},
            "llm_calls": 1,
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "seconds": 1.5,
            "reground_attempts": 0,
            "refine_iterations": 0,
        }
        for i in range(n)
    ]


def test_items_have_the_three_kinds_with_labels_that_match_their_passages() -> None:
    items = validation_items(_rows(), n=6, seed=1)
    assert [i["kind"] for i in items] == ["faithful", "unsupported", "honest"] * 2
    for item in items:
        in_passages = any(item["answer"] in p for p in item["passages"])
        assert item["hallucinated"] is (item["kind"] == "unsupported")
        assert in_passages is (item["kind"] == "faithful")
    assert items == validation_items(_rows(), n=6, seed=1)  # seeded


def test_too_few_rows_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        validation_items(_rows(1), n=3)


def test_a_constant_judge_scores_half_whatever_the_label_mix() -> None:
    items = validation_items(_rows(), n=6)
    always = score_verdicts(items, [True] * 6)
    never = score_verdicts(items, [False] * 6)
    assert always["balanced_accuracy"] == never["balanced_accuracy"] == 0.5
    assert never["accuracy"] == pytest.approx(4 / 6)  # plain accuracy would flatter it
    assert not always["trusted"] and not never["trusted"]
    unparsed = score_verdicts(items, [None] * 6)
    assert unparsed["unparseable"] == 6 and unparsed["balanced_accuracy"] == 0.0


def _oracle(messages: Sequence[BaseMessage]) -> dict[str, float]:
    """A judge that reads the prompt: faithful iff the judged answer is in the passages or declines; it puts 0.8 of
    its first token on the right number (1 = hallucinated, 0 = faithful)."""
    text = str(messages[0].content)
    answer = text.rsplit("Answer:", 1)[1].split("\n")[0].strip()
    grounded = answer in text.split("Examples:")[0] or "could not find" in answer
    return {"0": 0.8, "1": 0.2} if grounded else {"1": 0.8, "0": 0.2}


def _ranker(messages: Sequence[BaseMessage]) -> dict[str, float]:
    """A biased judge: always more sure of 'hallucinated', but more so for the answers that are."""
    return {"1": 0.6, "0": 0.4} if _oracle(messages)["0"] == 0.8 else {"1": 0.9, "0": 0.1}


def test_auc_is_one_for_a_perfect_ranking_half_for_none_and_needs_both_classes() -> None:
    assert roc_auc([True, False, True, False], [0.9, 0.1, 0.8, 0.2]) == 1.0
    assert roc_auc([True, False], [0.5, 0.5]) == 0.5
    assert roc_auc([True, True], [0.9, 0.1]) is None


def test_check_on_a_run_writes_the_file_the_summary_and_report_pick_up(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "history_rag").mkdir(parents=True)
    rows = _rows(6)
    for row in rows:
        row["system"] = "history_rag"
    (run / "history_rag" / "cases.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (run / "config.json").write_text(json.dumps({"systems": ["history_rag"]}))

    oracle = ScriptedChatModel(script={"other": [_oracle] * 6})
    result = check_hallucination_judge(run, oracle, judge_model_spec="scripted", n=6)
    assert result["balanced_accuracy"] == 1.0 and result["trusted"] and result["auc"] == 1.0
    assert result["sources"] == {"logprobs": 6} and result["mean_coverage"] == 1.0
    assert result["examples"][0]["raw"] == "logprobs coverage=1.000 0=0.800 1=0.200"
    assert len(result["examples"]) == 6 and result["examples"][1]["p_hallucinated"] == 0.8  # every item, in order
    # Always "hallucinated", yet its probabilities rank the items: balanced accuracy 0.5, AUC 1.
    ranker = ScriptedChatModel(script={"other": [_ranker]})
    result = check_hallucination_judge(run, ranker, judge_model_spec="ranker", n=6)
    assert result["balanced_accuracy"] == 0.5 and result["auc"] == 1.0 and not result["trusted"]
    # A judge whose first token is mostly not a number: every verdict unreadable, counted, not guessed.
    mumbling = ScriptedChatModel(script={"other": [{"The": 0.7, "1": 0.3}]})
    result = check_hallucination_judge(run, mumbling, judge_model_spec="mumbling", n=6)
    assert result["unparseable"] == 6 and result["balanced_accuracy"] == 0.0 and result["auc"] is None
    constant = ScriptedChatModel(script={"other": [{"1": 1.0}]})
    result = check_hallucination_judge(run, constant, judge_model_spec="constant", n=6)
    assert result["balanced_accuracy"] == 0.5 and not result["trusted"] and result["auc"] == 0.5

    summary = summarize_run(run, [str(r["case_id"]) for r in rows])
    assert summary["judge_check"]["judge_model"] == "constant" and "examples" not in summary["judge_check"]
    report = write_report([run], tmp_path / "report").read_text()
    assert "balanced accuracy 0.50" in report and "NOT trusted" in report


def test_missing_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no finished cases"):
        check_hallucination_judge(tmp_path, ScriptedChatModel(), judge_model_spec="x")
