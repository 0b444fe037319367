"""`eval synth`: dialogues generated with the scripted model over the real HR test store (MiniLM + BM25), every
quality rule rejecting what it should, resume and seeding, and the rank agreement of two answers runs."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from reground.evals.data.datasets import load_cases
from reground.evals.runs.synth import (
    REASONS,
    DialogueMaker,
    Span,
    SynthError,
    SynthSettings,
    collection_documents,
    kendall_tau,
    plan_turns,
    rank_agreement,
    refers_to_history,
    separating_threshold,
    sidecar,
    span_is_verbatim,
    synthesize,
)
from reground.tools.errors import DataError

from reground.testing.fake_chat import ScriptedChatModel

Reply = Callable[[Sequence[BaseMessage]], str]


def passage_of(messages: Sequence[BaseMessage]) -> str:
    match = re.search(r"The passage the next question must be about:\n(.*)\Z", str(messages[0].content), re.DOTALL)
    assert match, "the synth prompt ends with the passage"
    return match.group(1)


def good_question(messages: Sequence[BaseMessage]) -> str:
    """A question naming the passage's words (every question is first written as if it came first)."""
    span = passage_of(messages)
    words = " ".join(span.split()[:6])
    return json.dumps({"question": f"What does the policy say on {words}?", "reply": span})


def next_question(messages: Sequence[BaseMessage]) -> str:
    match = re.search(r"The user's next question: (.*)\Z", str(messages[0].content), re.DOTALL)
    assert match, "the rewrite prompt ends with the question to rewrite"
    return match.group(1).strip()


def refer_back(messages: Sequence[BaseMessage]) -> str:
    """The rewrite a good model makes: the question pointing back with "it"."""
    return json.dumps({"question": "And what about it: " + next_question(messages)})


def model(
    synth: Reply | str = good_question, check: Reply | str = '{"answered": true}', rewrite: Reply | str = refer_back
) -> ScriptedChatModel:
    return ScriptedChatModel(script={"synth": [synth], "synth_check": [check], "synth_followup": [rewrite]})


def run(hr_store: Any, out: Path, chat: ScriptedChatModel, **kwargs: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "dialogues": 3,
        "turns": 2,  # the test documents hold two or three sentences each: a third question would repeat one
        "unanswerable_share": 0.0,
        "underspecified_share": 0.0,
        "topic_shift_share": 0.0,
        "progress": False,
    }
    settings.update(kwargs)
    return synthesize("test-hr", out=out, model=chat, store=hr_store, model_spec="scripted:test", **settings)


def test_generates_dialogues_in_the_case_schema_with_verbatim_spans_and_provenance(
    hr_store: Any, tmp_path: Path
) -> None:
    out = tmp_path / "cases.jsonl"
    summary = run(hr_store, out, model(), dialogues=3, turns=3, topic_shift_share=0.5)
    cases = load_cases(out)  # the reader `eval answers` / `eval retrieval` use
    assert summary["cases"] == len(cases) >= 6
    docs = {
        json.loads(line)["doc_id"]: json.loads(line) for line in sidecar(out, "docs.jsonl").read_text().splitlines()
    }
    by_dialogue: dict[str, list[Any]] = {}
    for case in cases:
        by_dialogue.setdefault(case.dial_id, []).append(case)
        synth = case.extra["synth"]
        assert case.answerable and case.answerability == "ANSWERABLE"
        assert case.gold_span and case.gold_span in docs[case.gold_doc_id]["text"]  # verbatim in the gold document
        assert case.gold_span in case.gold_answer  # the scripted reply is the span
        assert synth["model"] == "scripted:test" and synth["seed"] == 0 and synth["collection"] == "test-hr"
        assert case.gold_doc_id in synth["dialogue_doc_ids"] and synth["chunk_id"]
    assert len(by_dialogue) == 3
    for turns in by_dialogue.values():
        assert turns[0].history == [] and turns[0].question_type == ["first"]
        for before, after in itertools.pairwise(turns):  # each turn's history is the dialogue before it
            assert after.history == [
                *before.history,
                {"role": "user", "text": before.question},
                {"role": "agent", "text": before.gold_answer},
            ]
            assert after.multi_turn == "Follow-up"
    shifts = [c for c in cases if c.question_type == ["topic_shift"]]
    assert shifts, "a 0.5 topic-shift share over 6 later turns shifts at least once with seed 0"
    for case in shifts:
        assert case.gold_doc_id != case.extra["synth"]["dialogue_doc_ids"][0]
    assert summary["by_kind"]["followup"] + summary["by_kind"].get("topic_shift", 0) + 3 == len(cases)
    assert set(summary["rejected"]) == set(REASONS)
    assert json.loads(sidecar(out, "summary.json").read_text())["cases"] == len(cases)


def test_empty_generation_is_rejected_and_a_dialogue_without_a_first_turn_is_dropped(
    hr_store: Any, tmp_path: Path
) -> None:
    chat = model('{"question": "", "reply": ""}')
    summary = run(hr_store, tmp_path / "c.jsonl", chat, dialogues=2)
    assert summary["cases"] == 0
    assert summary["rejected"]["generation_failed"] == 6  # 3 attempts at each first turn
    assert summary["rejected"]["dialogue_without_first_turn"] == 2


def test_a_span_not_in_its_chunk_is_rejected(hr_store: Any) -> None:
    settings = SynthSettings(collection="test-hr", dialogues=1, turns=1, model_check=False)
    maker = DialogueMaker(settings, hr_store, model())
    doc = maker.docs["sick-pay-all"]
    invented = Span("You receive double pay on public holidays in every country.", doc.chunks[0]["chunk_id"])
    assert not span_is_verbatim(invented, doc)
    assert span_is_verbatim(maker.spans["sick-pay-all"][0], doc)
    maker.spans = {d: [invented] for d in maker.spans}
    result = maker.make(0)
    assert result.cases == [] and result.rejected["span_not_verbatim"] == 3


def test_a_question_about_nothing_in_the_collection_is_not_retrievable(hr_store: Any, tmp_path: Path) -> None:
    chat = model(lambda messages: json.dumps({"question": "Qwxz zzyq plorb?", "reply": passage_of(messages)}))
    summary = run(hr_store, tmp_path / "c.jsonl", chat, dialogues=1)
    assert summary["rejected"]["not_retrievable"] == 3 and summary["cases"] == 0


def test_followups_that_do_not_need_the_history_are_rejected(hr_store: Any, tmp_path: Path) -> None:
    """A follow-up that restates its passage finds the gold document alone and has no word pointing back."""

    def restating(messages: Sequence[BaseMessage]) -> str:
        span = passage_of(messages)
        plain = " ".join(w for w in span.split() if not refers_to_history(w))
        return json.dumps({"question": plain, "reply": span})

    def unchanged(messages: Sequence[BaseMessage]) -> str:  # a model that cannot make it refer back
        return json.dumps({"question": next_question(messages)})

    out = tmp_path / "c.jsonl"
    summary = run(hr_store, out, model(restating, rewrite=unchanged), dialogues=4, turns=3)
    assert summary["rejected"]["followup_standalone"] >= 1
    for case in load_cases(out):
        checks = case.extra["synth"]["checks"]
        if case.question_type == ["followup"]:  # what was kept obeys the rule
            assert checks["bare_rank"] != 1 or checks["refers_to_history"]
    assert refers_to_history("And what about part-time staff?") and refers_to_history("Does it expire?")
    assert not refers_to_history("How many days of annual leave do employees in Germany get?")


def test_a_followup_is_written_about_its_passage_alone_then_made_to_refer_back(hr_store: Any, tmp_path: Path) -> None:
    """The question-writing call never sees the dialogue (a small model shown it repeats the first question); a
    question that needs no history is rewritten to refer back, and the case keeps what was first written."""
    seen: list[str] = []

    def recording(messages: Sequence[BaseMessage]) -> str:
        seen.append(str(messages[0].content))
        return good_question(messages)

    out = tmp_path / "c.jsonl"
    summary = run(hr_store, out, model(recording), dialogues=3, turns=2)
    followups = [c for c in load_cases(out) if c.question_type == ["followup"]]
    assert followups and summary["by_kind"]["followup"] == len(followups)
    assert all("Conversation so far:\n(none yet)" in prompt for prompt in seen)
    for case in followups:
        checks = case.extra["synth"]["checks"]
        assert case.question.startswith("And what about it: ") and checks["refers_to_history"]
        assert checks["written_as"] == case.question.removeprefix("And what about it: ")


def test_a_rewrite_that_asks_something_else_is_rejected(hr_store: Any, tmp_path: Path) -> None:
    def restating(messages: Sequence[BaseMessage]) -> str:  # needs no history, so every follow-up is rewritten
        span = passage_of(messages)
        return json.dumps({"question": " ".join(w for w in span.split() if not refers_to_history(w)), "reply": span})

    drifting = json.dumps({"question": "And is it open on Sundays?"})
    summary = run(hr_store, tmp_path / "c.jsonl", model(restating, rewrite=drifting), dialogues=4, turns=3)
    assert summary["rejected"]["rewrite_lost_question"] >= 1
    assert summary["by_kind"].get("followup", 0) == 0


def test_a_cut_off_question_is_a_failed_generation(hr_store: Any, tmp_path: Path) -> None:
    chat = model(lambda messages: json.dumps({"question": "Can I", "reply": passage_of(messages)}))
    summary = run(hr_store, tmp_path / "c.jsonl", chat, dialogues=1)
    assert summary["rejected"]["generation_failed"] == 3 and summary["cases"] == 0


def test_questions_start_with_a_seeded_opener(hr_store: Any, tmp_path: Path) -> None:
    """A small model asks "What is the purpose of ...?" of everything: each question is asked to start otherwise."""
    from reground.prompts.synth import QUESTION_OPENERS

    tasks: list[str] = []

    def recording(messages: Sequence[BaseMessage]) -> str:
        tasks.append(str(messages[-1].content))
        return good_question(messages)

    run(hr_store, tmp_path / "c.jsonl", model(recording), dialogues=3, turns=2)
    openers = {re.search(r'starting with "([^"]+)"', task).group(1) for task in tasks}  # type: ignore[union-attr]
    assert openers <= set(QUESTION_OPENERS) and len(openers) >= 2


def test_the_models_check_rejects_questions_their_span_does_not_answer(hr_store: Any, tmp_path: Path) -> None:
    summary = run(hr_store, tmp_path / "c.jsonl", model(check='{"answered": false}'), dialogues=1)
    assert summary["rejected"]["model_says_unanswered"] == 3 and summary["cases"] == 0
    summary = run(hr_store, tmp_path / "d.jsonl", model(check='{"answered": false}'), dialogues=1, model_check=False)
    assert summary["rejected"]["model_says_unanswered"] == 0 and summary["cases"] == 2


def test_unanswerable_turns_need_a_question_no_passage_supports(hr_store: Any, tmp_path: Path) -> None:
    off_topic = "Can I bring my dog to the office cafeteria on Fridays?"

    def unanswerable(messages: Sequence[BaseMessage]) -> str:
        if "do NOT answer" in str(messages[-1].content):
            return json.dumps({"question": off_topic})
        return good_question(messages)

    def supported(messages: Sequence[BaseMessage]) -> str:  # the "unanswerable" question restates a stored passage
        if "do NOT answer" in str(messages[-1].content):
            return json.dumps({"question": passage_of(messages)})
        return good_question(messages)

    def only_answerable(verdict_for_unanswerable: bool) -> Reply:
        """The check: the generated unanswerable questions get the verdict given, the answerable ones `true`."""

        def check(messages: Sequence[BaseMessage]) -> str:
            asked = str(messages[-1].content)
            is_unanswerable = off_topic in asked
            return json.dumps({"answered": verdict_for_unanswerable if is_unanswerable else True})

        return check

    kept = run(hr_store, tmp_path / "a.jsonl", model(unanswerable, only_answerable(False)), unanswerable_share=1.0)
    cases = load_cases(tmp_path / "a.jsonl")
    later = [c for c in cases if c.history]
    assert kept["by_kind"]["unanswerable"] == len(later) == 3
    for case in later:
        assert case.answerability == "UNANSWERABLE" and not case.answerable and case.gold_doc_ids == []
        assert case.extra["synth"]["checks"]["support"] < kept["support"]["threshold"]
    assert kept["support"]["unanswerable_mean"] < kept["support"]["answerable_mean"]

    rejected = run(hr_store, tmp_path / "b.jsonl", model(supported, only_answerable(False)), unanswerable_share=1.0)
    assert rejected["rejected"]["unanswerable_supported"] == 3 and rejected["by_kind"] == {"first": 3}

    judged = run(hr_store, tmp_path / "c.jsonl", model(unanswerable, only_answerable(True)), unanswerable_share=1.0)
    assert judged["rejected"]["model_says_answered"] == 3


def test_underspecified_turns_ask_which_document_and_must_not_name_one(hr_store: Any, tmp_path: Path) -> None:
    def vague(messages: Sequence[BaseMessage]) -> str:
        if "could be about either" in str(messages[-1].content):
            return json.dumps({"question": "How many days do I get?"})
        return good_question(messages)

    def naming(messages: Sequence[BaseMessage]) -> str:
        if "could be about either" in str(messages[-1].content):
            return json.dumps({"question": "How many days do I get in Germany and the United States?"})
        return good_question(messages)

    out = tmp_path / "a.jsonl"
    summary = run(hr_store, out, model(vague), dialogues=2, underspecified_share=1.0)
    under = [c for c in load_cases(out) if c.question_type == ["underspecified"]]
    assert summary["by_kind"]["underspecified"] == len(under) == 2  # it ends its dialogue
    for case in under:
        assert case.answerability == "UNDERSPECIFIED" and not case.answerable and len(set(case.gold_doc_ids)) == 2
        assert case.gold_answer.startswith("Do you mean") and case.multi_turn == "Clarification"
    summary = run(hr_store, tmp_path / "b.jsonl", model(naming), dialogues=2, underspecified_share=1.0)
    assert summary["rejected"]["underspecified_names_one"] == 2


def test_a_rerun_continues_where_the_run_stopped(hr_store: Any, tmp_path: Path) -> None:
    out = tmp_path / "cases.jsonl"
    first = model()
    run(hr_store, out, first, dialogues=2)
    before = out.read_text()
    calls_first = len(first.calls)
    # a killed run: half a dialogue written, no progress line for it
    with out.open("a") as fh:
        fh.write(json.dumps({**json.loads(before.splitlines()[0]), "synth": {"dialogue": 2}}) + "\n{torn")
    second = model()
    summary = run(hr_store, out, second, dialogues=3)
    assert out.read_text().startswith(before)  # finished dialogues kept as they were
    calls = {
        r["dialogue"]: r["llm_calls"]
        for r in map(json.loads, sidecar(out, "progress.jsonl").read_text().splitlines()[1:])
    }
    assert calls_first == calls[0] + calls[1] and len(second.calls) == calls[2]  # only dialogue 2 was made
    assert summary["dialogues_done"] == 3 and len({c.dial_id for c in load_cases(out)}) == 3
    assert len(load_cases(out)) == summary["cases"]  # the torn partial dialogue is gone
    idle = model()
    assert run(hr_store, out, idle, dialogues=3)["cases"] == summary["cases"] and not idle.calls
    with pytest.raises(SynthError, match="other settings"):
        run(hr_store, out, model(), dialogues=3, seed=1)


def test_the_seed_decides_the_dialogues(hr_store: Any, tmp_path: Path) -> None:
    a = run(hr_store, tmp_path / "a.jsonl", model(), dialogues=5, seed=3)
    b = run(hr_store, tmp_path / "b.jsonl", model(), dialogues=5, seed=3)
    run(hr_store, tmp_path / "c.jsonl", model(), dialogues=5, seed=4)
    rows = [[(c.question, c.gold_doc_id) for c in load_cases(tmp_path / f"{n}.jsonl")] for n in "abc"]
    assert a["cases"] == b["cases"] and rows[0] == rows[1]
    assert rows[0] != rows[2]


def test_turn_plans_follow_the_shares() -> None:
    settings = SynthSettings(
        collection="x", dialogues=1, turns=4, unanswerable_share=0.2, underspecified_share=0.1, topic_shift_share=0.2
    )
    rng = random.Random(0)
    plans = [plan_turns(rng, settings) for _ in range(3000)]
    later = [k for plan in plans for k in plan[1:]]
    assert all(plan[0] == "first" for plan in plans)
    assert all(plan.count("topic_shift") <= 1 for plan in plans)
    assert all("underspecified" not in plan[:-1] for plan in plans)  # it ends a dialogue
    assert later.count("unanswerable") / len(later) == pytest.approx(0.2, abs=0.02)
    assert later.count("underspecified") / len(later) == pytest.approx(0.1, abs=0.02)
    with pytest.raises(SynthError):
        SynthSettings(collection="x", dialogues=1, unanswerable_share=0.7, underspecified_share=0.5).validate()


def test_the_collection_documents_are_rebuilt_from_the_store(hr_store: Any) -> None:
    docs = collection_documents(hr_store)
    assert set(docs) == {"annual-leave-de", "annual-leave-us", "sick-pay-all", "travel-all"}
    assert "carry over up to 5 unused days" in docs["annual-leave-de"].text


def test_separating_threshold_and_kendall_tau() -> None:
    cut = separating_threshold([0.7, 0.8, 0.9, 0.55], [0.3, 0.5, 0.6])
    assert cut["threshold"] == pytest.approx(0.65) and cut["balanced_accuracy"] == pytest.approx((0.75 + 1.0) / 2)
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    scipy_stats = pytest.importorskip("scipy.stats")
    a, b = [0.21, 0.25, 0.23, 0.25, 0.19], [0.3, 0.28, 0.33, 0.31, 0.2]
    assert kendall_tau(a, b) == pytest.approx(scipy_stats.kendalltau(a, b).statistic)


def test_rank_agreement_of_two_answers_runs(tmp_path: Path) -> None:
    def summary(path: Path, f1: dict[str, float], kp: dict[str, float]) -> Path:
        path.mkdir()
        systems = {n: {"token_f1": f1[n], "k_precision": kp[n]} for n in f1}
        (path / "summary.json").write_text(json.dumps({"systems": systems}))
        return path

    names = ["naive_rag", "history_rag", "reground"]
    synthetic = summary(
        tmp_path / "s", dict(zip(names, [0.1, 0.2, 0.3], strict=False)), dict(zip(names, [0.5, 0.9, 0.7], strict=False))
    )
    real = summary(
        tmp_path / "r",
        dict(zip(names, [0.15, 0.22, 0.25], strict=False)),
        dict(zip(names, [0.6, 0.7, 0.8], strict=False)),
    )
    result = rank_agreement(synthetic, real)
    assert result["metrics"]["token_f1"]["kendall_tau"] == pytest.approx(1.0)
    assert result["metrics"]["k_precision"]["kendall_tau"] == pytest.approx(1 / 3, abs=1e-4)
    assert result["metrics"]["token_f1"]["systems"] == sorted(names)


def test_rank_agreement_merges_several_runs_on_one_side(tmp_path: Path) -> None:
    def summary(path: Path, systems: dict[str, float]) -> Path:
        path.mkdir()
        rows = {n: {"token_f1": v, "k_precision": v} for n, v in systems.items()}
        (path / "summary.json").write_text(json.dumps({"systems": rows}))
        return path

    synthetic = summary(tmp_path / "s", {"naive_rag": 0.1, "history_rag": 0.2, "reground": 0.3, "reground-x": 0.25})
    baselines = summary(tmp_path / "b", {"naive_rag": 0.2, "history_rag": 0.25, "reground": 0.4})
    ablation = summary(tmp_path / "a", {"reground-x": 0.3})
    result = rank_agreement(synthetic, [baselines, ablation])
    assert result["metrics"]["token_f1"]["systems"] == ["history_rag", "naive_rag", "reground", "reground-x"]
    assert result["metrics"]["token_f1"]["kendall_tau"] == pytest.approx(1.0)
    assert result["real"] == [str(baselines), str(ablation)]
    with pytest.raises(DataError, match="already came from another run"):
        rank_agreement(synthetic, [baselines, baselines])


def test_cli_rejects_bad_shares_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reground.cli import main

    code = main(
        [
            "eval",
            "synth",
            "--collection",
            "x-docs",
            "--dialogues",
            "1",
            "--out",
            str(tmp_path / "c.jsonl"),
            "--unanswerable-share",
            "0.8",
            "--underspecified-share",
            "0.5",
            "--data-dir",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "shares" in capsys.readouterr().err


def test_repeated_questions_are_rejected(hr_store: Any, tmp_path: Path) -> None:
    same = model(lambda messages: json.dumps({"question": "How many days of leave?", "reply": passage_of(messages)}))
    summary = run(hr_store, tmp_path / "a.jsonl", same, dialogues=2, turns=3)
    assert summary["rejected"]["repeats_question"] == 4 and summary["by_kind"] == {"first": 2}
    [kept] = load_cases(tmp_path / "a.jsonl")[:1]
    assert kept.extra["synth"]["checks"]["reply_source"] == "model"  # a reply in the span's words stays


def test_a_reference_reply_not_grounded_in_its_span_is_replaced_by_the_span(hr_store: Any, tmp_path: Path) -> None:
    def invented(messages: Sequence[BaseMessage]) -> str:
        words = " ".join(passage_of(messages).split()[:6])
        return json.dumps({"question": f"What does the policy say on {words}?", "reply": "Dental care and gym fees."})

    out = tmp_path / "b.jsonl"
    summary = run(hr_store, out, model(invented), dialogues=1, turns=1)
    [case] = load_cases(out)
    assert case.gold_answer == case.gold_span and case.extra["synth"]["checks"]["reply_source"] == "span"
    assert summary["replies_from_span"] == 1
