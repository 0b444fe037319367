"""The graph's route functions on hand-built states: every branch, and the counters that bound each loop.

tests/unit/test_graph_routes.py runs the same routes end to end over a real store; here each decision is one call,
so a changed condition names itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.runtime import Runtime
from reground.nodes.context import Context
from reground.nodes.routes import FLAGGED_ONLY, route_after_check, route_after_refine, route_after_triage, route_start
from reground.nodes.state import Draft, State

THRESHOLD = 0.5  # the groundedness threshold these contexts set explicitly (no calibration file is read)


@pytest.fixture
def make_runtime(tmp_path: Path) -> Any:
    def make(**fields: Any) -> Runtime[Context]:
        groups: dict[str, Any] = {"groundedness": {"threshold": THRESHOLD, **fields.pop("groundedness", {})}}
        return Runtime(context=Context(collection="route-tests", data_dir=str(tmp_path), **groups, **fields))

    return make


def draft(kind: str = "answer", groundedness: float = 0.9, **extra: Any) -> Draft:
    scores = extra.pop("principle_scores", {"specificity": 1.0, "faithfulness": 1.0, "relevance": 1.0})
    return Draft(
        text="Full-time employees get 30 days of annual leave.",
        principle_scores=scores,
        groundedness=groundedness,
        groundedness_parts=extra.pop("groundedness_parts", {}),
        unsupported_claims=[],
        kind=kind,
        relevance=extra.pop("relevance", 1.0),
        relevance_parts={},
    )


def state(**fields: Any) -> State:
    base: dict[str, Any] = {"question": "How many days of annual leave do I get?", "decision": "answer"}
    return State(**{**base, **fields})  # type: ignore[typeddict-item]


# --- route_start -----------------------------------------------------------------------------------


def test_start_goes_on_with_a_question_and_finalizes_without_one() -> None:
    assert route_start(state()) == "refine_question"
    assert route_start(state(question="")) == "finalize"
    assert route_start(State()) == "finalize"  # type: ignore[typeddict-item]


# --- route_after_triage ------------------------------------------------------------------------------


@pytest.mark.parametrize(("decision", "expected"), [("answer", "answer"), ("hedge", "answer"), ("clarify", "clarify")])
def test_triage_answers_hedges_through_the_answer_node_and_asks_back(
    make_runtime: Any, decision: str, expected: str
) -> None:
    assert route_after_triage(state(decision=decision), make_runtime()) == expected


def test_triage_without_a_decision_answers(make_runtime: Any) -> None:
    assert route_after_triage(State(question="q?"), make_runtime()) == "answer"  # type: ignore[typeddict-item]


def test_an_abstaining_follow_up_is_searched_again_until_the_abstain_counter_is_spent(make_runtime: Any) -> None:
    runtime = make_runtime(triage={"abstain_reground_attempts": 2}, groundedness={"max_reground_attempts": 3})
    history = [{"role": "user", "content": "Tell me about leave."}]
    for attempts in (0, 1):
        assert route_after_triage(state(decision="abstain", history=history, reground_attempts=attempts), runtime) == (
            "re_ground"
        )
    assert route_after_triage(state(decision="abstain", history=history, reground_attempts=2), runtime) == "finalize"


def test_the_abstain_loop_is_also_bounded_by_the_groundedness_counter(make_runtime: Any) -> None:
    runtime = make_runtime(triage={"abstain_reground_attempts": 5}, groundedness={"max_reground_attempts": 1})
    history = [{"role": "user", "content": "Tell me about leave."}]
    assert route_after_triage(state(decision="abstain", history=history, reground_attempts=0), runtime) == "re_ground"
    assert route_after_triage(state(decision="abstain", history=history, reground_attempts=1), runtime) == "finalize"


def test_an_abstaining_opening_question_or_a_disabled_loop_finalizes(make_runtime: Any) -> None:
    history = [{"role": "user", "content": "Tell me about leave."}]
    assert route_after_triage(state(decision="abstain"), make_runtime()) == "finalize"
    assert route_after_triage(state(decision="abstain", history=[]), make_runtime()) == "finalize"
    off = make_runtime(use_reground=False)
    assert route_after_triage(state(decision="abstain", history=history), off) == "finalize"


# --- route_after_check -------------------------------------------------------------------------------


def test_no_draft_finalizes(make_runtime: Any) -> None:
    assert route_after_check(state(), make_runtime()) == "finalize"


def test_a_grounded_extracted_answer_finalizes(make_runtime: Any) -> None:
    assert route_after_check(state(draft=draft()), make_runtime()) == "finalize"


@pytest.mark.parametrize(
    "ungrounded", [draft(groundedness=THRESHOLD - 0.01), draft(kind="not_found", groundedness=1.0)]
)
def test_an_ungrounded_draft_re_grounds_until_the_counter_is_spent(make_runtime: Any, ungrounded: Draft) -> None:
    runtime = make_runtime(groundedness={"max_reground_attempts": 2})
    assert route_after_check(state(draft=ungrounded, reground_attempts=0), runtime) == "re_ground"
    assert route_after_check(state(draft=ungrounded, reground_attempts=1), runtime) == "re_ground"
    assert route_after_check(state(draft=ungrounded, reground_attempts=2), runtime) == "finalize"


def test_a_draft_at_the_threshold_is_grounded(make_runtime: Any) -> None:
    assert route_after_check(state(draft=draft(groundedness=THRESHOLD)), make_runtime()) == "finalize"


def test_a_partial_reply_is_not_re_grounded(make_runtime: Any) -> None:
    assert route_after_check(state(draft=draft(kind="partial", groundedness=0.0)), make_runtime()) == "finalize"


def test_a_reply_that_only_restated_an_injection_is_not_re_grounded(make_runtime: Any) -> None:
    obeyed = draft(groundedness=0.0, groundedness_parts={FLAGGED_ONLY: 1.0})
    assert route_after_check(state(draft=obeyed), make_runtime()) == "finalize"
    # Written, it is replaced by the passages' own sentences.
    assert route_after_check(state(draft=obeyed), make_runtime(answer_style="write")) == "quote"


def test_with_the_loop_off_an_ungrounded_draft_finalizes(make_runtime: Any) -> None:
    runtime = make_runtime(use_reground=False)
    assert route_after_check(state(draft=draft(groundedness=0.0)), runtime) == "finalize"


def test_a_written_reply_under_a_principle_threshold_is_refined_until_the_counter_is_spent(make_runtime: Any) -> None:
    runtime = make_runtime(answer_style="write", refinement={"max_refine_iterations": 2})
    weak = draft(principle_scores={"specificity": 0.0, "faithfulness": 1.0, "relevance": 1.0})
    assert route_after_check(state(draft=weak, refine_iterations=0), runtime) == "refine"
    assert route_after_check(state(draft=weak, refine_iterations=1), runtime) == "refine"
    # Spent: the draft passes its groundedness and relevance checks, so it is said.
    assert route_after_check(state(draft=weak, refine_iterations=2), runtime) == "finalize"


def test_refinement_is_for_written_unquoted_replies_with_the_loop_on(make_runtime: Any) -> None:
    weak = draft(principle_scores={"specificity": 0.0, "faithfulness": 1.0, "relevance": 1.0})
    assert route_after_check(state(draft=weak), make_runtime(answer_style="extract")) == "finalize"
    assert route_after_check(state(draft=weak, quoted=True), make_runtime(answer_style="write")) == "finalize"
    off = make_runtime(answer_style="write", use_principle_refinement=False)
    assert route_after_check(state(draft=weak), off) == "finalize"
    assert route_after_check(state(draft=draft()), make_runtime(answer_style="write")) == "finalize"


def test_a_written_reply_still_failing_when_the_loops_are_spent_is_quoted_once(make_runtime: Any) -> None:
    runtime = make_runtime(answer_style="write", groundedness={"max_reground_attempts": 1})
    failing = draft(groundedness=0.1)
    assert route_after_check(state(draft=failing, reground_attempts=0), runtime) == "re_ground"
    assert route_after_check(state(draft=failing, reground_attempts=1), runtime) == "quote"
    assert route_after_check(state(draft=failing, reground_attempts=1, quoted=True), runtime) == "finalize"
    # A written "not in the passages" where triage found an answer is quoted too; a hedge or a clarification is not.
    not_found = draft(kind="not_found", groundedness=0.0)
    assert route_after_check(state(draft=not_found, reground_attempts=1), runtime) == "quote"
    assert route_after_check(state(draft=failing, reground_attempts=1, decision="hedge"), runtime) == "finalize"
    assert route_after_check(state(draft=draft(kind="clarify", groundedness=0.1)), runtime) == "finalize"


def test_an_irrelevant_written_reply_is_quoted(make_runtime: Any) -> None:
    runtime = make_runtime(answer_style="write", use_principle_refinement=False)
    off_topic = draft(relevance=0.0)
    assert route_after_check(state(draft=off_topic), runtime) == "quote"
    unquoted = make_runtime(
        answer_style="write", use_principle_refinement=False, refinement={"quote_when_unchecked": False}
    )
    assert route_after_check(state(draft=off_topic), unquoted) == "finalize"


@pytest.mark.parametrize(
    ("mode", "grounded", "expected"),
    [("off", True, "finalize"), ("off", False, "finalize"), ("all", True, "review"), ("failed", True, "finalize")],
)
def test_review_mode_decides_review_or_finalize(make_runtime: Any, mode: str, grounded: bool, expected: str) -> None:
    runtime = make_runtime(review_mode=mode, use_reground=False)
    checked = draft(groundedness=0.9 if grounded else 0.0)
    assert route_after_check(state(draft=checked), runtime) == expected


def test_review_mode_failed_reviews_a_failing_draft(make_runtime: Any) -> None:
    runtime = make_runtime(review_mode="failed", use_reground=False)
    assert route_after_check(state(draft=draft(groundedness=0.0)), runtime) == "review"


# --- route_after_refine ------------------------------------------------------------------------------


def test_an_unchecked_refinement_is_checked_first(make_runtime: Any) -> None:
    assert route_after_refine(state(draft=draft(), draft_checked=False), make_runtime()) == "check_groundedness"
    assert route_after_refine(state(draft=draft()), make_runtime()) == "check_groundedness"


def test_a_checked_refinement_routes_as_after_the_check(make_runtime: Any) -> None:
    runtime = make_runtime(answer_style="write", refinement={"max_refine_iterations": 2})
    weak = draft(principle_scores={"specificity": 0.0, "faithfulness": 1.0, "relevance": 1.0})
    assert route_after_refine(state(draft=weak, draft_checked=True, refine_iterations=1), runtime) == "refine"
    assert route_after_refine(state(draft=weak, draft_checked=True, refine_iterations=2), runtime) == "finalize"
    assert route_after_refine(state(draft=draft(), draft_checked=True), runtime) == "finalize"
