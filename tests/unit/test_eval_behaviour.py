"""Answer, abstain or ask and the answer-relevance report: the classification
rule, the behaviour table per answerability class, per-case collection scoping on a tiny real store
with two collections, labels kept in every row, the correlation block, the report, and the runs
that score nothing (an error, never a table of zeros)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from reground.evals.data.datasets import Case
from reground.evals.records import read_jsonl
from reground.evals.runs import answers as answers_mod
from reground.evals.runs.answers import EvalRunError, run_answers_eval
from reground.evals.runs.behaviour import behaviour_of, behaviour_table, classify_reply
from reground.evals.runs.correlation import old_relevance_proxy
from reground.evals.runs.report import write_report
from reground.tools.signals.scoring import rouge_l
from reground.tools.tuning.stores import INGEST
from scipy import stats

from reground.testing.fake_chat import ScriptedChatModel

MTRAG_CASES = Path(__file__).resolve().parents[3] / "shared" / "data" / "mtrag" / "cases_dev.jsonl"

# --- the rule ---------------------------------------------------------------------------------------

# Reference replies of MTRAG-UN dev tasks (verbatim, Apache-2.0) and replies a small model writes.
REPLIES: list[tuple[str, str]] = [
    ("Sorry, but I do not have that information.", "abstain"),
    ("Sorry, but I can not advise you about that.", "abstain"),
    ("I do not have specific information about children's games available for the IBM i virtual machine.", "abstain"),
    ("The passages do not contain information about hard candy brands. [1]", "abstain"),
    ("I'm sorry, I couldn't find that in the documents. Please contact support.", "abstain"),
    ("", "abstain"),
    (
        "There are many burgers in the fast food industry, like the Big Boy hamburger. "
        "Which one are you talking about?",
        "clarify",
    ),
    (
        "There are several oceans, like the Atlantic Ocean, which plays a crucial role in global climate "
        "regulation through currents such as the North Atlantic Subpolar Gyre. Which ocean are you referring to?",
        "clarify",
    ),
    ("Do you mean the Prime Minister of the United Kingdom or of Canada?", "clarify"),
    ("Could you clarify which account type you have?", "clarify"),
    (
        "I do not have much information on what you should do in case you lose your job, but you should have "
        "an emergency fund established to cover your expenses for at least six months.",
        "answer",
    ),
    ("Full-time employees get 30 days of paid annual leave per year [1].", "answer"),
    ("You can renew online with form DS-82 [1]. Is there anything else I can help with?", "answer"),
    ("The renewal is not mentioned as free, but it takes six weeks and you can pay by card or by check.", "answer"),
]


@pytest.mark.parametrize(("reply", "expected"), REPLIES)
def test_classify_reply_rule(reply: str, expected: str) -> None:
    assert classify_reply(reply) == expected


@pytest.mark.skipif(not MTRAG_CASES.is_file(), reason="shared/data/mtrag is not on this machine")
def test_rule_agrees_with_the_reference_replies_of_each_class() -> None:
    """On the 206 dev tasks' reference replies the rule finds the behaviour each class expects
    (one UNANSWERABLE reference refuses and then answers anyway: a partial answer by the rule)."""
    expected = {"ANSWERABLE": "answer", "PARTIAL": "answer", "UNANSWERABLE": "abstain", "UNDERSPECIFIED": "clarify"}
    rows = [json.loads(line) for line in MTRAG_CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    wrong = [r for r in rows if classify_reply(r["gold_answer"]) != expected[r["answerability"]]]
    assert len(rows) == 206 and len(wrong) <= 1, [(r["answerability"], r["gold_answer"][:80]) for r in wrong]


def test_graph_kind_wins_over_the_rule() -> None:
    assert behaviour_of({"kind": "clarify", "answer": "30 days."}) == ("clarify", "graph")
    assert behaviour_of({"kind": "not_found", "answer": "30 days."}) == ("abstain", "graph")
    assert behaviour_of({"kind": "abstain", "answer": ""}) == ("abstain", "graph")
    assert behaviour_of({"answer": "Which one do you mean?"}) == ("clarify", "rule")  # an older run
    assert behaviour_of({"kind": "mystery", "answer": "30 days."}) == ("answer", "rule")


def test_behaviour_table_fractions_and_answered_metrics() -> None:
    def row(label: str, kind: str, f1: float | None, gold: bool | None, error: str | None = None) -> dict[str, Any]:
        return {
            "answerability": label,
            "behaviour": kind,
            "metrics": {"token_f1": f1},
            "gold_in_top3": gold,
            "error": error,
        }

    rows = [
        row("ANSWERABLE", "answer", 0.5, True),
        row("ANSWERABLE", "answer", 0.3, False),
        row("ANSWERABLE", "abstain", 0.1, True),
        row("ANSWERABLE", "answer", None, None, error="boom"),  # failed: not counted
        row("UNANSWERABLE", "abstain", 0.9, None),
        row("UNANSWERABLE", "answer", 0.0, None),
        row("UNDERSPECIFIED", "clarify", 0.2, True),
        {"answerability": None, "behaviour": "answer", "metrics": {}, "gold_in_top3": True},  # unlabelled
    ]
    table = behaviour_table(rows)
    assert list(table) == ["ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED"]
    assert table["ANSWERABLE"]["n"] == 3
    assert table["ANSWERABLE"]["answer"] == pytest.approx(2 / 3) and table["ANSWERABLE"]["clarify"] == 0.0
    assert table["ANSWERABLE"]["token_f1"] == pytest.approx(0.3)
    assert table["ANSWERABLE"]["gold_in_passages"] == pytest.approx(2 / 3)
    assert table["UNANSWERABLE"] == {"n": 2, "answer": 0.5, "hedge": 0.0, "abstain": 0.5, "clarify": 0.0}  # no F1 there
    assert table["UNDERSPECIFIED"]["clarify"] == 1.0
    assert behaviour_table([rows[-1]]) == {}


# --- a tiny MTRAG-like corpus: three collections, real store ---------------------------------------

DOCS = [
    ("g-passport", "govt", "Passport renewal", "Renew your passport online with form DS-82. Renewal takes six weeks."),
    ("g-tax", "govt", "Federal taxes", "File your federal tax return by April 15. An extension lasts six months."),
    ("f-gains", "fiqa", "", "Investors report capital gains on Schedule D of the tax return, due April 15."),
    ("f-card", "fiqa", "", "Pay your credit card balance in full each month to avoid paying interest."),
    ("c-bigboy", "clapnq", "Big Boy", "The Big Boy hamburger is a double-decker burger sold by Frisch's."),
    ("c-whopper", "clapnq", "Whopper", "The Whopper is a burger sold by Burger King since 1957."),
]


def _case(
    cid: str,
    label: str,
    collection: str,
    question: str,
    gold: str,
    docs: list[str],
    history: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    return {
        "case_id": cid,
        "task_id": f"{cid}<::>1",
        "dial_id": cid,
        "domain": collection,
        "history": [{"role": r, "text": t} for r, t in history or []],
        "question": question,
        "gold_answer": gold,
        "gold_doc_id": docs[0] if docs else None,
        "gold_doc_ids": docs,
        "gold_span": None,
        "answerable": label in ("ANSWERABLE", "PARTIAL"),
        "gold_doc_in_corpus": bool(docs),
        "answerability": label,
        "collection": collection,
        "multi_turn": "Follow-up" if history else "N/A",
        "question_type": ["Factoid"],
    }


CASES = [
    _case("a1", "ANSWERABLE", "govt", "How do I renew my passport?", "Online with form DS-82.", ["g-passport"]),
    _case(
        "a2",
        "ANSWERABLE",
        "fiqa",
        "When do I report capital gains on my tax return?",
        "On Schedule D, due April 15.",
        ["f-gains"],
    ),
    _case(
        "p1",
        "PARTIAL",
        "govt",
        "How long does it take and what does it cost?",
        "It takes six weeks; the documents do not say what it costs.",
        ["g-passport"],
        [("user", "How do I renew my passport?"), ("agent", "Online with form DS-82.")],
    ),
    _case(
        "u1",
        "UNANSWERABLE",
        "govt",
        "Which brand of hard candy is the best choice?",
        "Sorry, but I do not have that information.",
        [],
    ),
    _case(
        "s1",
        "UNDERSPECIFIED",
        "clapnq",
        "What is the secret behind this burger?",
        "There are many burgers, like the Big Boy. Which one do you mean?",
        ["c-bigboy"],
    ),
]


def _question(messages: list[Any]) -> str:
    text = "\n".join(str(m.content) for m in messages)
    return text.rsplit("user:", 1)[-1].lower() if "user:" in text else text.lower()


def _reply(messages: list[Any]) -> str:
    """A scripted model with three behaviours: refuse on candy, ask on 'this burger', else quote [1]."""
    text = "\n".join(str(m.content) for m in messages)
    if "hard candy" in text:
        return "The passages do not contain information about hard candy."
    if "this burger" in text:
        return "The passages describe several burgers. Which one do you mean?"
    match = re.search(r"\[1\][^\n]*\n([^\n]+)", text)
    return f"{match.group(1).strip()} [1]" if match else "I do not know."


@pytest.fixture(scope="module")
def docs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mtrag-docs") / "docs.jsonl"
    rows = [{"doc_id": d, "title": t, "text": x, "collection": c} for d, c, t, x in DOCS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, docs_file: Path) -> Any:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    opened = PassageStore.open("mtrag-test", data_dir=tmp_path_factory.mktemp("mtrag-store"), create=True)
    assert not ingest([docs_file], opened, progress=False, max_tokens=INGEST.chunk_tokens).errors
    return opened


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CASES))
    return path


COLLECTION = {d: c for d, c, _, _ in DOCS}


def _run(docs: Path, cases: Path, out: Path, store: Any, systems: str, **kw: Any) -> dict[str, Any]:
    return run_answers_eval(
        docs,
        cases,
        systems=systems,
        limit=None,
        seed=None,
        out_dir=out,
        chat_model=ScriptedChatModel(script={"answer": [_reply], "other": [_reply]}),
        store=store,
        progress=False,
        **kw,
    )


def test_baselines_behaviour_per_class_scoped_by_collection(
    docs_file: Path, cases_file: Path, tmp_path: Path, store: Any
) -> None:
    out = tmp_path / "run"
    summary = _run(docs_file, cases_file, out, store, "naive_rag,history_rag")
    assert summary["config"]["case_scope"] == "collection" and summary["config"]["only_with_answer"] is False
    for name in ("naive_rag", "history_rag"):
        s = summary["systems"][name]
        assert s["n_cases"] == 5 and s["n_errors"] == 0 and s["n_scored"] == 5
        behaviour = s["behaviour"]
        assert list(behaviour) == ["ANSWERABLE", "UNANSWERABLE", "UNDERSPECIFIED", "PARTIAL"]
        assert behaviour["ANSWERABLE"] == {
            "n": 2,
            "answer": 1.0,
            "hedge": 0.0,
            "abstain": 0.0,
            "clarify": 0.0,
            "token_f1": pytest.approx(behaviour["ANSWERABLE"]["token_f1"]),
            "gold_in_passages": 1.0,
        }
        assert behaviour["ANSWERABLE"]["token_f1"] > 0.2
        assert behaviour["UNANSWERABLE"] == {"n": 1, "answer": 0.0, "hedge": 0.0, "abstain": 1.0, "clarify": 0.0}
        assert behaviour["UNDERSPECIFIED"] == {"n": 1, "answer": 0.0, "hedge": 0.0, "abstain": 0.0, "clarify": 1.0}
        assert behaviour["PARTIAL"]["n"] == 1 and behaviour["PARTIAL"]["answer"] == 1.0
        assert s["behaviour_source"] == {"graph": 0, "rule": 5}
        # The graph's relevance signal, scored on the baseline's own answers (no loop acted on them).
        assert all(r["relevance"] is not None for r in read_jsonl(out / name / "cases.jsonl"))
        assert "correlations" in s
        rows = {r["case_id"]: r for r in read_jsonl(out / name / "cases.jsonl")}
        for case in CASES:
            row = rows[case["case_id"]]
            # The case's labels travel with its row; every passage comes from the case's own collection.
            assert {k: row[k] for k in ("answerability", "collection", "multi_turn", "question_type")} == {
                k: case[k] for k in ("answerability", "collection", "multi_turn", "question_type")
            }
            assert row["passages"] and {COLLECTION[p["doc_id"]] for p in row["passages"]} == {case["collection"]}
        assert rows["u1"]["gold_in_top3"] is None and rows["u1"]["gold_doc_id"] == ""
        # gold in top 3 is a mean over the 4 cases with gold passages only
        assert s["gold_in_top3"] == pytest.approx(sum(rows[c]["gold_in_top3"] for c in ("a1", "a2", "p1", "s1")) / 4)

    # Unscoped, the fiqa question also gets govt passages: the filter is what keeps a case in its collection.
    loose = _run(docs_file, cases_file, tmp_path / "loose", store, "naive_rag", case_scope=False)
    assert loose["config"]["case_scope"] is None
    rows = read_jsonl(tmp_path / "loose" / "naive_rag" / "cases.jsonl")
    assert any({COLLECTION[p["doc_id"]] for p in r["passages"]} - {r["collection"]} for r in rows)

    report = write_report([out], tmp_path / "report").read_text()
    assert "## Answer, abstain or ask" in report
    assert "| naive_rag | UNANSWERABLE (abstain) | 1 | 0.00 | 0.00 | 1.00 | 0.00 | – | – |" in report
    assert "| history_rag | UNDERSPECIFIED (clarify) | 1 | 0.00 | 0.00 | 0.00 | 1.00 | – | – |" in report
    png = tmp_path / "report" / "behaviour.png"
    assert "![behaviour](behaviour.png)" in report and png.read_bytes()[:4] == b"\x89PNG"
    assert png.stat().st_size > 10_000
    assert "## Answer relevance" in report  # the signal, scored on the baselines' answers


def _stub_graph(kinds: dict[str, str], relevance: dict[str, float]) -> Callable[..., Any]:
    """A graph stand-in that reports its own kind and relevance, as the lead's graph will."""

    def make(system: str, **_: Any) -> Callable[[Case], dict[str, Any]]:
        def run(case: Case) -> dict[str, Any]:
            answer = {"a1": "Renew your passport online with form DS-82.", "a2": "Report gains on Schedule D."}
            return {
                "answer": answer.get(case.case_id, "Something else entirely."),
                "kind": kinds[case.case_id],
                "relevance": relevance[case.case_id],
                "passages": [],
                "principle_scores": {"relevance": {"a1": 0.2, "a2": 0.1, "p1": 0.4}.get(case.case_id, 0.0)},
                "llm_calls": 2,
            }

        return run

    return make


def test_graph_kind_and_relevance_correlations(
    docs_file: Path, cases_file: Path, tmp_path: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds = {"a1": "answer", "a2": "answer", "p1": "answer", "u1": "abstain", "s1": "abstain"}
    relevance = {"a1": 0.9, "a2": 0.6, "p1": 0.2, "u1": 0.1, "s1": 0.05}
    monkeypatch.setattr(answers_mod, "graph_runner", _stub_graph(kinds, relevance))
    out = tmp_path / "graph"
    summary = _run(
        docs_file, cases_file, out, store, "reground", context_overrides={"refinement.relevance_threshold": 0.5}
    )
    s = summary["systems"]["reground"]
    assert s["behaviour_source"] == {"graph": 5, "rule": 0}
    # The graph said "abstain" on the underspecified case, though the rule would not have said so.
    assert s["behaviour"]["UNDERSPECIFIED"] == {"n": 1, "answer": 0.0, "hedge": 0.0, "abstain": 1.0, "clarify": 0.0}

    corr = s["correlations"]
    rows = {r["case_id"]: r for r in read_jsonl(out / "reground" / "cases.jsonl")}
    answered = ["a1", "a2", "p1"]  # labelled run: only ANSWERABLE / PARTIAL cases count
    assert corr["cases"] == "ANSWERABLE+PARTIAL" and corr["n"] == 3
    f1 = [rows[c]["metrics"]["token_f1"] for c in answered]
    expected = stats.spearmanr([relevance[c] for c in answered], f1).statistic
    assert corr["relevance"]["token_f1"]["spearman"] == pytest.approx(expected)
    assert corr["relevance"]["token_f1"]["n"] == 3
    # The old proxy is recomputed from each row (ROUGE-L of the answer vs the question and last two turns).
    old = [old_relevance_proxy(rows[c]) for c in answered]
    assert old == [rouge_l(rows[c]["answer"], f"{rows[c]['question']} ").fmeasure for c in answered]
    proxy = stats.spearmanr(old, f1).statistic
    assert corr["relevance_proxy"]["token_f1"]["spearman"] == pytest.approx(proxy, nan_ok=True)
    # No passages: K-Precision is 0 everywhere, a constant, so no correlation (never a made-up 0).
    assert corr["relevance"]["k_precision"]["spearman"] is None
    t = corr["threshold"]
    assert t["value"] == 0.5 and t["source"] == "context override"
    assert (t["n_below"], t["n_at_or_above"]) == (1, 2)
    assert t["f1_below"] == pytest.approx(rows["p1"]["metrics"]["token_f1"])
    assert t["f1_at_or_above"] == pytest.approx((f1[0] + f1[1]) / 2)
    assert t["f1_gap"] == pytest.approx(t["f1_at_or_above"] - t["f1_below"])

    report = write_report([out], tmp_path / "report").read_text()
    assert "## Answer relevance" in report
    assert f"| reground | ANSWERABLE+PARTIAL | `result.relevance` | {expected:.2f} (n=3) | – (n=3) |" in report
    assert "| reground | 0.5 (context override) | 1 |" in report
    assert "reground: 5 from the graph's `kind`, 0 by the rule" in report


def test_relevance_threshold_is_the_one_the_graph_ran_with(
    docs_file: Path, cases_file: Path, tmp_path: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reground.nodes.context import Context

    default = Context().refinement.relevance_threshold
    kinds = dict.fromkeys(("a1", "a2", "p1", "u1", "s1"), "answer")
    relevance = {"a1": default, "a2": default - 0.01, "p1": default + 0.2, "u1": 0.0, "s1": 0.0}
    monkeypatch.setattr(answers_mod, "graph_runner", _stub_graph(kinds, relevance))
    summary = _run(docs_file, cases_file, tmp_path / "g", store, "reground")
    assert summary["config"]["context_relevance_threshold"] == default
    t = summary["systems"]["reground"]["correlations"]["threshold"]
    assert t["value"] == default and t["source"] == "context default"
    assert (t["n_below"], t["n_at_or_above"]) == (1, 2)  # the threshold itself counts as "at or above"
    # A run config that names no threshold (an older run) falls back to 0.5.
    assert answers_mod.relevance_threshold_of({"context_overrides": {}}) == (0.5, "default")
    assert answers_mod.relevance_threshold_of(
        {"context_overrides": {"refinement.relevance_threshold": 0.3}, "context_relevance_threshold": 0.2}
    ) == (0.3, "context override")
    # Runs written before the Context's groups named the field flat.
    assert answers_mod.relevance_threshold_of({"context_overrides": {"relevance_threshold": 0.4}}) == (
        0.4,
        "context override",
    )


def test_real_graph_retrieves_within_the_case_collection(
    docs_file: Path, cases_file: Path, tmp_path: Path, store: Any
) -> None:
    """The graph's own retrieval, with the case's collection added to its metadata_filter."""
    pytest.importorskip("reground.graph.builder")
    summary = _run(
        docs_file,
        cases_file,
        tmp_path / "g",
        store,
        "reground",
        context_overrides={"refinement.max_refine_iterations": 0},
    )
    assert summary["systems"]["reground"]["n_errors"] == 0
    for row in read_jsonl(tmp_path / "g" / "reground" / "cases.jsonl"):
        assert {COLLECTION[p["doc_id"]] for p in row["passages"]} <= {row["collection"]}, row["case_id"]
        assert row["behaviour"] in ("answer", "abstain", "clarify") and row["kind_source"] in ("graph", "rule")
    assert set(summary["systems"]["reground"]["behaviour"]) == {
        "ANSWERABLE",
        "UNANSWERABLE",
        "UNDERSPECIFIED",
        "PARTIAL",
    }
    assert "correlations" in summary["systems"]["reground"]


# --- runs that score nothing --------------------------------------------------------------------------


def test_zero_cases_is_an_error(docs_file: Path, cases_file: Path, tmp_path: Path, store: Any) -> None:
    no_followups = tmp_path / "first_turns.jsonl"
    no_followups.write_text("".join(json.dumps(c) + "\n" for c in CASES if not c["history"]))
    with pytest.raises(EvalRunError, match="no cases to run"):
        _run(docs_file, no_followups, tmp_path / "a", store, "naive_rag", only_followups=True)

    def broken(messages: list[Any]) -> str:
        raise ValueError("model returned garbage")

    with pytest.raises(EvalRunError, match=r"'naive_rag' scored 0 of 5 cases \(first error: ValueError"):
        run_answers_eval(
            docs_file,
            cases_file,
            systems="naive_rag",
            limit=None,
            seed=None,
            out_dir=tmp_path / "b",
            chat_model=ScriptedChatModel(script={"answer": [broken]}),
            store=store,
            progress=False,
        )


def test_cases_with_collections_need_documents_that_carry_them(cases_file: Path, tmp_path: Path, store: Any) -> None:
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({"doc_id": d, "title": t, "text": x}) + "\n" for d, _, t, x in DOCS))
    with pytest.raises(EvalRunError, match="--no-case-scope"):
        _run(bare, cases_file, tmp_path / "c", store, "naive_rag")
