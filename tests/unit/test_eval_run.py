"""A tiny end-to-end eval: baselines (and the graph when importable) on a handful of real-format
cases with a scripted chat model and an in-memory store, then judges, calibration, correlation,
a report, and the CLI handlers."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reground.evals.records import read_jsonl
from reground.evals.runs.answers import EvalRunError, parse_systems, run_answers_eval
from reground.evals.runs.correlation import correlation_report
from reground.evals.runs.report import ReportError, write_report
from reground.evals.train.calibrate import (
    CalibrationError,
    calibrate_run,
    calibrated_threshold,
    read_calibrated_threshold,
)
from reground.nodes.context import setting_names
from reground.tools.adapters.paths import read_calibrated_value
from reground.tools.tuning.stores import INGEST

from reground.testing.fake_chat import ScriptedChatModel

DOCS = [
    {
        "doc_id": "leave",
        "title": "Annual leave",
        "text": "Full-time employees get 30 days of paid annual "
        "leave per year. You can carry over up to 5 unused days to the next year.",
    },
    {
        "doc_id": "sick",
        "title": "Sick leave",
        "text": "Tell your manager before 10:00 on the first day of "
        "illness. From the fourth day you need a doctor's certificate.",
    },
    {
        "doc_id": "travel",
        "title": "Business travel",
        "text": "Book trains in second class through the "
        "travel portal. Submit receipts in the expense portal within 30 days of the trip.",
    },
    {
        "doc_id": "pension",
        "title": "Company pension",
        "text": "The company adds 3 percent of your salary "
        "to the pension plan once you have worked here for six months.",
    },
]


def _case(cid: str, doc: str, history: list[tuple[str, str]], question: str, answer: str | None) -> dict[str, Any]:
    return {
        "case_id": cid,
        "dial_id": cid.split("_")[0],
        "domain": "hr",
        "history": [{"role": r, "text": t} for r, t in history],
        "question": question,
        "gold_answer": answer,
        "gold_doc_id": doc,
        "gold_doc_ids": [doc],
        "gold_span_ids": [],
        "gold_span": "",
        "answerable": True,
        "gold_doc_in_corpus": True,
    }


CASES = [
    _case(
        "d1_1",
        "leave",
        [],
        "How many days of annual leave do I get?",
        "You get 30 days of paid annual leave.",
    ),
    _case(
        "d1_3",
        "leave",
        [("user", "How many days of annual leave do I get?"), ("agent", "30 days per year.")],
        "Can I carry unused days over?",
        "Yes, up to 5 unused days.",
    ),
    _case(
        "d2_1",
        "sick",
        [],
        "When do I need a doctor's certificate when I am ill?",
        "From the fourth day of illness.",
    ),
    _case(
        "d3_1",
        "travel",
        [],
        "How do I book trains for business travel?",
        "Book second class in the travel portal.",
    ),
    _case(
        "d4_1",
        "pension",
        [],
        "How much does the company add to my pension?",
        "3 percent of your salary.",
    ),
    _case("d4_3", "pension", [("user", "pension?"), ("agent", "3 percent.")], "bye", None),  # no gold: skipped
]


# --- a real store (MiniLM + Chroma + BM25) over the tiny corpus, in a temp dir ---------------------


@pytest.fixture(scope="module")
def docs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("eval-docs") / "docs.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, docs_file: Path) -> Any:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    opened = PassageStore.open("eval-test", data_dir=tmp_path_factory.mktemp("eval-store"), create=True)
    summary = ingest([docs_file], opened, progress=False, max_tokens=INGEST.chunk_tokens)
    assert not summary.errors
    return opened


def _answer_from_prompt(messages: list[Any]) -> str:
    """Quote the first passage of the prompt (or admit not knowing without passages)."""
    text = "\n".join(str(m.content) for m in messages)
    match = re.search(r"\[1\][^\n]*\n([^\n]+)", text)
    return f"{match.group(1).strip()} [1]" if match else "I do not know."


def _judge_reply(messages: list[Any]) -> dict[str, float]:
    """The judge's first-token probabilities (the judges read logprobs, evals/runs/judges.py)."""
    text = str(messages[-1].content)
    if "(HALLUCINATED:" in text:
        return {"0": 0.9, "1": 0.1}  # faithful
    if "Score 5:" in text:
        return {"4": 1.0}  # the rubric
    if "[Answer 1]" in text:
        return {"1": 0.8, "2": 0.2}  # a position-biased judge: the answer shown first
    return {"4": 1.0} if "Relevance" not in text else {"I": 0.9, "4": 0.1}  # relevance: unreadable


@pytest.fixture
def files(tmp_path: Path, docs_file: Path) -> tuple[Path, Path]:
    docs = docs_file
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    return docs, cases


def _graph_available() -> bool:
    try:
        import reground.graph.builder  # noqa: F401
    except ImportError:
        return False
    return True


def test_answers_run_judges_calibration_correlation_and_report(
    files: tuple[Path, Path], tmp_path: Path, store: Any
) -> None:
    docs, cases = files
    out = tmp_path / "run"
    model = ScriptedChatModel(script={"other": [_answer_from_prompt], "answer": [_answer_from_prompt]})
    judge = ScriptedChatModel(script={"other": [_judge_reply]})
    graph = ["reground", "reground-llm_self_check"] if _graph_available() else []
    systems = ["no_retrieval", "naive_rag", "history_rag", *graph]
    kwargs: dict[str, Any] = {
        "systems": systems,
        "limit": 10,
        "seed": 3,
        "out_dir": out,
        "chat_model": model,
        "judge_model": judge,
        "store": store,
        "progress": False,
    }
    summary = run_answers_eval(docs, cases, **kwargs)

    assert list(summary["systems"]) == systems
    for name in systems:
        s = summary["systems"][name]
        assert s["n_cases"] == 5 and s["n_errors"] == 0  # the case without a gold answer is left out
        rows = read_jsonl(out / name / "cases.jsonl")
        assert {r["case_id"] for r in rows} == {"d1_1", "d1_3", "d2_1", "d3_1", "d4_1"}
        # The graph's default extracts its reply (no answer call); every other system asks the model.
        if name != "reground":
            assert all(r["prompt_tokens"] > 0 and r["llm_calls"] >= 1 for r in rows)
        assert s["hallucination_rate"] == 0.0 and s["hallucination_unparseable"] == 0
        assert s["geval_relevance"] is None and s["geval_relevance_unparseable"] == 5
        assert s["geval_truthfulness"] == 4.0 and s["rubric"] == 4.0
    for name in ("no_retrieval", "naive_rag", "history_rag"):
        assert summary["systems"][name]["llm_calls"] == 1.0
    assert summary["systems"]["no_retrieval"]["gold_in_top3"] == 0.0
    history = summary["systems"]["history_rag"]
    assert history["gold_in_top3"] == 1.0 and history["k_precision"] > 0.8
    assert history["token_f1"] > summary["systems"]["no_retrieval"]["token_f1"]
    # The per-case metric equals the evaluate module's mean.
    rows = read_jsonl(out / "history_rag" / "cases.jsonl")
    assert history["token_f1"] == pytest.approx(np.mean([r["metrics"]["token_f1"] for r in rows]))
    # A position-biased judge: every pair disagrees across orders, so nothing counts as a win.
    pair = summary["pairwise"]["history_rag vs naive_rag"]
    assert pair == {
        "a": "history_rag",
        "b": "naive_rag",
        "A": 0,
        "B": 0,
        "tie": 5,
        "unparseable": 0,
        "order_disagreements": 5,
    }

    # Resumable: a rerun asks the models nothing and duplicates nothing.
    calls = len(model.calls), len(judge.calls)
    again = run_answers_eval(docs, cases, **kwargs)
    assert (len(model.calls), len(judge.calls)) == calls
    assert len(read_jsonl(out / "naive_rag" / "cases.jsonl")) == 5
    assert again["systems"]["history_rag"]["token_f1"] == history["token_f1"]
    with pytest.raises(EvalRunError, match="seed"):
        run_answers_eval(docs, cases, **{**kwargs, "seed": 4})

    # Proxy vs final correlation and the report.
    corr = correlation_report(out)
    assert "faithfulness" in corr["all"] and "k_precision" in corr["all"]["faithfulness"]
    retrieval = tmp_path / "retrieval"
    retrieval.mkdir()
    (retrieval / "summary.json").write_text(
        json.dumps(
            {
                "systems": {
                    "reground": {
                        "recall@1": 0.8,
                        "recall@3": 0.9,
                        "recall@5": 0.95,
                        "recall@10": 0.98,
                        "mrr": 0.86,
                        "ms_per_case": 12.5,
                    },
                    "bm25_history": {
                        "recall@1": 0.7,
                        "recall@3": 0.85,
                        "recall@5": 0.9,
                        "recall@10": 0.95,
                        "mrr": 0.78,
                    },
                },
                "followups": {"reground": {"recall@1": 0.6, "recall@3": 0.8, "mrr": 0.7}},
                "cases": 100,
            }
        )
    )
    report = write_report([retrieval, out], tmp_path / "report")
    text = report.read_text()
    for heading in (
        "## Retrieval",
        "## Answers",
        "### LLM judges",
        "### Pairwise",
        "## Loops",
        "## Proxy",
    ):
        assert heading in text
    assert "| reground | 0.800 | 0.900 | 0.950 | 0.980 | 0.860 | 12.5 |" in text
    assert "Follow-up turns only" in text and "| reground | 0.600 | 0.800 | 0.700 |" in text
    assert "| bm25_history | 0.700 |" in text and "| history_rag | 5 | 1.000 |" in text
    # judges: hallucination rate 0 (0 unparseable), relevance all unparseable, readability 4
    assert "| naive_rag | 0.00 (0) | – (5) | 4.00 (0) |" in text
    for png in re.findall(r"\]\(([^)]+\.png)\)", text):
        path = report.parent / png
        assert path.stat().st_size > 5_000 and path.read_bytes()[:4] == b"\x89PNG"
    assert len(re.findall(r"\.png\)", text)) == 5

    if graph:
        # The default extracts its reply with the LLM-free self-check; the model's self-check is one written answer.
        full, ablated = (summary["systems"][n]["llm_calls"] for n in graph)
        assert ablated == full + 1
        rows = read_jsonl(out / "reground" / "cases.jsonl")
        assert all(r["groundedness"] is not None for r in rows)
        # The default's extracted answers calibrate only the support threshold; written ones the groundedness too.
        extracted = calibrate_run(out, data_dir=tmp_path / "data")
        assert "groundedness_threshold" not in extracted and extracted["n_answerable"] == 5
        calibration = tmp_path / "data" / "calibration.json"
        assert read_calibrated_value("support_threshold", calibration, high=3.0) == extracted["support_threshold"]
        written = calibrate_run(out, system="reground-llm_self_check", data_dir=tmp_path / "data")
        assert read_calibrated_threshold(calibration) == written["groundedness_threshold"]
        assert read_calibrated_value("support_threshold", calibration, high=3.0) == written["support_threshold"]


def test_failed_cases_are_recorded_and_retried(files: tuple[Path, Path], tmp_path: Path, store: Any) -> None:
    docs, cases = files

    def flaky(messages: list[Any]) -> str:
        if "add to my pension" in str(messages[-1].content):
            raise ValueError("model returned garbage")
        return _answer_from_prompt(messages)

    kwargs: dict[str, Any] = {
        "systems": "naive_rag",
        "limit": None,
        "seed": None,
        "out_dir": tmp_path / "r",
        "store": store,
        "progress": False,
    }
    summary = run_answers_eval(docs, cases, chat_model=ScriptedChatModel(script={"answer": [flaky]}), **kwargs)
    assert summary["systems"]["naive_rag"]["n_errors"] == 1
    model = ScriptedChatModel(script={"answer": [_answer_from_prompt]})
    summary = run_answers_eval(docs, cases, chat_model=model, workers=2, **kwargs)
    assert summary["systems"]["naive_rag"]["n_errors"] == 0 and len(model.calls) == 1


def test_calibration_is_the_5th_percentile_of_correct_retrievals(tmp_path: Path) -> None:
    rows = [{"groundedness": g / 100, "gold_in_top3": True} for g in range(1, 101)]
    rows += [
        {"groundedness": 0.0, "gold_in_top3": False},
        {"groundedness": None, "gold_in_top3": True},
    ]
    result = calibrated_threshold(rows)
    assert result["groundedness_threshold"] == pytest.approx(0.0595, abs=1e-4)
    assert result["n_correct_retrieval"] == 100 and result["wrong_below_threshold"] == 1.0
    with pytest.raises(ValueError, match="eval answers"):
        calibrated_threshold([{"groundedness": None, "gold_in_top3": True}])
    assert read_calibrated_threshold(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text('{"groundedness_threshold": 7}')
    assert read_calibrated_threshold(tmp_path / "bad.json") is None


def test_bad_inputs_name_the_way_out(files: tuple[Path, Path], tmp_path: Path) -> None:
    docs, _ = files
    with pytest.raises(EvalRunError, match="naive_rag"):
        parse_systems("naive_rag,best_system")
    with pytest.raises(EvalRunError, match="cases file not found"):
        run_answers_eval(docs, tmp_path / "nope.jsonl", out_dir=tmp_path / "x", chat_model=ScriptedChatModel())
    with pytest.raises(ReportError, match=r"summary\.json"):
        write_report([tmp_path], tmp_path / "rep")


def test_cli_handlers(files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], store: Any) -> None:
    from reground.commands.eval import add_commands

    parser = argparse.ArgumentParser(prog="reground")
    add_commands(parser.add_subparsers(dest="command"))
    docs, cases = files
    run = tmp_path / "run"
    for system in ("naive_rag", "no_retrieval"):  # systems run one at a time into one out dir
        summary = run_answers_eval(
            docs,
            cases,
            systems=system,
            limit=2,
            seed=0,
            out_dir=run,
            chat_model=ScriptedChatModel(script={"answer": [_answer_from_prompt]}),
            store=store,
            progress=False,
        )
    assert list(summary["systems"]) == ["naive_rag", "no_retrieval"]
    assert summary["systems"]["naive_rag"]["n_cases"] == 2

    def main(*argv: str) -> int:
        """As `reground` runs a handler: a RegroundError becomes one line on stderr and its exit code."""
        from reground.tools.errors import RegroundError

        from reground.cli import report_error

        args = parser.parse_args(list(argv))
        try:
            return int(args.func(args))
        except RegroundError as exc:
            return report_error(exc)

    retrieval = tmp_path / "retrieval"
    data = tmp_path / "data"
    args = ("--docs", str(docs), "--cases", str(cases), "--out", str(retrieval), "--data-dir", str(data))
    assert main("eval", "retrieval", *args) == 0
    assert main("eval", "report", "--runs", str(retrieval), str(run), "--out", str(tmp_path / "rep")) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Retrieval (document level)" in text and "| bm25_history |" in text and "## Answers" in text
    assert main("eval", "correlation", "--run", str(run)) == 0
    assert main("eval", "calibrate", "--run", str(run), "--system", "reground") == 3  # the run lacks the data
    assert "reground/cases.jsonl not found" in capsys.readouterr().err
    assert (
        main(
            "eval",
            "answers",
            "--docs",
            str(docs),
            "--cases",
            str(cases),
            "--out",
            str(tmp_path / "o"),
            "--systems",
            "nope",
        )
        == 2  # bad input
    )
    assert "choose from" in capsys.readouterr().err
    args = parser.parse_args(
        ["eval", "answers", "--docs", "d", "--cases", "c", "--out", "o", "--seed", "none", "--followups-only"]
    )
    assert args.seed is None and args.followups_only and args.limit == 100


def test_ablations_are_valid_context_overrides() -> None:
    from reground.evals.runs.answers import GRAPH_SYSTEMS
    from reground.nodes.context import Context

    from reground.commands.eval import parse_overrides

    base = Context()
    for name, overrides in GRAPH_SYSTEMS.items():
        ablated = base.with_(**overrides)  # validates
        changed = {key for key in setting_names() if _setting(ablated, key) != _setting(base, key)}
        assert changed == set(overrides) | {key.partition(".")[0] for key in overrides}, name
    assert parse_overrides(
        ["refinement.max_refine_iterations=0", "rerank_method=llm", 'triage={"reading_ratio": 0.7}']
    ) == {
        "refinement.max_refine_iterations": 0,
        "rerank_method": "llm",
        "triage": {"reading_ratio": 0.7},
    }
    for unknown in ("no_such_field=1", "max_refine_iterations=0", "triage.no_such_field=1"):  # no flat aliases
        with pytest.raises(ValueError, match=r"Context field or GROUP\.FIELD"):
            parse_overrides([unknown])


def _setting(context: Any, key: str) -> Any:
    value = context
    for part in key.split("."):
        value = getattr(value, part)
    return value


def test_systems_run_case_by_case_in_rotating_order_and_resume(tmp_path: Path) -> None:
    """Every case goes through every system before the next case, the order rotating, so a machine's changing
    load falls on all systems alike; a rerun only runs what is missing."""
    from reground.evals.data.datasets import Case
    from reground.evals.runs.answers import run_systems

    def case(cid: str) -> Case:
        return Case(cid, "d", "dmv", [], f"question {cid}?", "an answer", "doc", ["doc"], "span", True)

    calls: list[tuple[str, str]] = []
    failures = [("c2", "b")]  # fails once

    def runner(name: str) -> Any:
        def run(c: Case) -> dict[str, Any]:
            calls.append((c.case_id, name))
            if (c.case_id, name) in failures:
                failures.clear()
                raise ValueError("a one-off failure")
            return {"answer": f"{name} says an answer", "passages": [], "llm_calls": 1}

        return run

    cases = [case("c0"), case("c1"), case("c2")]
    rows = run_systems({"a": runner("a"), "b": runner("b")}, cases, tmp_path, progress=False)
    assert calls == [("c0", "a"), ("c0", "b"), ("c1", "b"), ("c1", "a"), ("c2", "a"), ("c2", "b")]
    assert [r.get("error") is None for r in rows["b"]] == [True, True, False]
    calls.clear()
    rows = run_systems({"a": runner("a"), "b": runner("b")}, cases, tmp_path, progress=False)
    assert calls == [("c2", "b")], "only the failed case is run again"
    assert all(r.get("error") is None for r in rows["b"]) and len(rows["a"]) == 3


def test_the_support_percentile_sets_how_many_answerable_cases_may_abstain(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "reground").mkdir(parents=True)
    rows = [
        {"case_id": f"a{i}", "answerability": "ANSWERABLE", "signals": {"support": 0.5 + i / 100}} for i in range(50)
    ] + [{"case_id": f"u{i}", "answerability": "UNANSWERABLE", "signals": {"support": 0.4 + i / 50}} for i in range(10)]
    (run / "reground" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    default = calibrate_run(run, data_dir=tmp_path / "data")
    stricter = calibrate_run(run, data_dir=tmp_path / "data", support_percentile=1.0)
    assert default["support_percentile"] == 3.0 and stricter["support_percentile"] == 1.0
    assert stricter["support_threshold"] < default["support_threshold"]
    assert stricter["answerable_below"] < default["answerable_below"]
    from reground.commands.eval import add_commands

    parser = argparse.ArgumentParser(prog="reground")
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["eval", "calibrate", "--run", str(run), "--data-dir", str(tmp_path / "cli"), "--support-percentile", "1"]
    )
    assert args.func(args) == 0
    written = json.loads((tmp_path / "cli" / "calibration.json").read_text(encoding="utf-8"))
    assert written["support_threshold"] == stricter["support_threshold"]


def _support_run(run: Path, collection: str | None, supports: dict[str, float]) -> Path:
    """An answers run directory as `eval answers` writes it: config.json and the reground rows' support signals."""
    (run / "reground").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"collection": collection} if collection else {}), encoding="utf-8")
    rows = [
        {"case_id": f"c{i}", "answerability": label, "signals": {"support": value}}
        for i, (label, value) in enumerate(((k.split(":")[0], v) for k, v in supports.items()))
    ]
    (run / "reground" / "cases.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return run


def test_a_collection_keeps_its_own_support_threshold(tmp_path: Path) -> None:
    from reground.nodes.context import Context

    answerable = {f"ANSWERABLE:{i}": 0.6 + i / 100 for i in range(20)}
    mtrag = _support_run(tmp_path / "mtrag", "eval-mtrag", {**answerable, "UNANSWERABLE:0": 0.5})
    data = tmp_path / "data"
    global_value = calibrate_run(_support_run(tmp_path / "all", None, {"ANSWERABLE:0": 0.3}), data_dir=data)
    scoped = calibrate_run(mtrag, data_dir=data, support_percentile=0, for_collection=True)
    calibration = data / "calibration.json"
    assert scoped["collection"] == "eval-mtrag" and scoped["support_threshold"] == 0.6
    assert scoped["unanswerable_below"] == 1.0
    assert read_calibrated_value("support_threshold", calibration, high=3.0) == global_value["support_threshold"] == 0.3
    assert read_calibrated_value("support_threshold", calibration, high=3.0, collection="eval-mtrag") == 0.6
    assert read_calibrated_value("support_threshold", calibration, high=3.0, collection="other") == 0.3
    # The graph's context reads the value of its own collection, else the file's.
    assert Context(collection="eval-mtrag", data_dir=str(data)).resolved_support_threshold() == 0.6
    assert Context(collection="hr-policies", data_dir=str(data)).resolved_support_threshold() == 0.3
    # A run that names no collection cannot be calibrated for one; nor can runs from two collections.
    with pytest.raises(CalibrationError, match="names no collection"):
        calibrate_run(tmp_path / "all", data_dir=data, for_collection=True)
    other = _support_run(tmp_path / "other", "eval-other", answerable)
    with pytest.raises(CalibrationError, match="2 collections"):
        calibrate_run([mtrag, other], data_dir=data, for_collection=True)


def test_an_invalid_collection_value_falls_back_to_the_file_s(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"support_threshold": 0.4, "collections": {"a": {"support_threshold": "high"}}}))
    assert read_calibrated_value("support_threshold", path, high=3.0, collection="a") == 0.4
    path.write_text(json.dumps({"collections": {"a": {"support_threshold": 0.7}}}))
    assert read_calibrated_value("support_threshold", path, high=3.0) is None
    assert read_calibrated_value("support_threshold", path, high=3.0, collection="a") == 0.7
