"""`reground eval retrieval|answers|calibrate|judge-check|report|correlation|synth|rank-agreement|feedback`.

Measure reground on your data (or on synthetic dialogues made from it).
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from reground.commands import add_parser
from reground.commands.settings import add_set_option, parse_overrides


def _limit(text: str) -> int | None:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("--limit must be >= 0 (0 = all cases)")
    return value or None


def _seed(text: str) -> int | None:
    return None if text.strip().lower() == "none" else int(text)


SYNTH_SHARES = ("unanswerable_share", "underspecified_share", "topic_shift_share")


def _default(function: Callable[..., Any], parameter: str) -> Any:
    """A function's default for one parameter: the option that passes it shows and uses that one declaration."""
    return inspect.signature(function).parameters[parameter].default


def add_commands(subparsers: Any) -> None:
    """Add the `eval` group and its sub-commands to the top-level parser."""
    group = add_parser(subparsers, "eval")
    sub = group.add_subparsers(dest="eval_command", metavar="EVAL_COMMAND")
    group.set_defaults(func=lambda args: (group.print_help(), 2)[1])

    p = sub.add_parser("retrieval", help="document recall@k / MRR of the LLM-free stack and BM25 baselines")
    from reground.evals.runs.retrieval import build_parser as retrieval_options  # the same options as the module

    retrieval_options(p)
    p.set_defaults(func=_retrieval)

    from reground.evals.runs.answers import DEFAULT_SYSTEMS, JUDGES, SYSTEMS, run_answers_eval
    from reground.evals.runs.judge_check import LABELLED_ITEMS
    from reground.evals.train.calibrate import SUPPORT_PERCENTILE

    p = sub.add_parser(
        "answers",
        help="answer a seeded sample of cases with each system; metrics, judges, summary.json",
        description=f"Systems: {', '.join(SYSTEMS)}. Judges: {', '.join(JUDGES)}.",
    )
    p.add_argument("--docs", required=True, help="documents .jsonl")
    p.add_argument(
        "--cases",
        required=True,
        help="cases .jsonl (cases with a gold answer; every case when they carry answerability labels)",
    )
    limit = _default(run_answers_eval, "limit")
    p.add_argument("--limit", type=_limit, default=limit, help=f"sample size (default {limit}; 0 = all)")
    p.add_argument(
        "--seed",
        type=_seed,
        default=0,
        help="sampling seed (default 0); 'none' = the first --limit cases in file order",
    )
    p.add_argument("--followups-only", action="store_true", help="only turns that follow earlier dialogue")
    p.add_argument("--collection", default=None, help="only the cases of this collection (the cases' `collection`)")
    p.add_argument(
        "--all-cases",
        action="store_true",
        default=None,
        help="also run cases without a gold answer (default: only when the cases carry answerability labels)",
    )
    p.add_argument(
        "--no-case-scope",
        dest="case_scope",
        action="store_false",
        help="search all documents for every case (default: a case naming a collection searches only it)",
    )
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS), help="comma-separated systems")
    p.add_argument("--out", required=True, help="output directory (resumable: reruns skip finished cases)")
    p.add_argument("--model", default="local:default", help="chat model spec (default local:default)")
    p.add_argument("--judge-model", default=None, help="judge model spec; omit to skip the LLM judges")
    p.add_argument("--judges", default=",".join(JUDGES), help="comma-separated judges to run")
    p.add_argument("--workers", type=int, default=1, help="cases run in parallel (default 1)")
    p.add_argument("--data-dir", default=None, help="store directory (default: $REGROUND_DATA_DIR)")
    add_set_option(p, applies_to="the graph systems")
    p.set_defaults(func=_answers)

    p = sub.add_parser(
        "calibrate", help="set the groundedness and support thresholds from answers runs (ReGround's percentile rule)"
    )
    p.add_argument("--run", required=True, action="append", help="answers run directory (repeat to pool runs)")
    p.add_argument("--system", default="reground", help="system whose groundedness scores to use")
    p.add_argument("--data-dir", default=None, help="where calibration.json goes (default: $REGROUND_DATA_DIR)")
    p.add_argument("--also-repo", action="store_true", help="also write evals/results/calibration.json")
    p.add_argument(
        "--support-percentile",
        type=float,
        default=None,
        help="percentile of the answerable cases' support that becomes the abstention threshold "
        f"(default {SUPPORT_PERCENTILE:g})",
    )
    p.add_argument(
        "--for-collection",
        action="store_true",
        help="write the thresholds for the runs' collection only (a context of that collection prefers them)",
    )
    p.set_defaults(func=_calibrate)

    p = sub.add_parser("judge-check", help="accuracy of the hallucination judge on labelled items from a run")
    p.add_argument("--run", required=True, help="answers run directory (items come from its passages)")
    p.add_argument("--judge-model", required=True, help="judge model spec, as for `eval answers`")
    p.add_argument("--system", default="history_rag", help="system whose cases supply the items")
    p.add_argument("--n", type=int, default=LABELLED_ITEMS, help=f"labelled items (default {LABELLED_ITEMS})")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.set_defaults(func=_judge_check)

    p = sub.add_parser("correlation", help="proxy vs final metric correlation (Spearman/Kendall) of a run")
    p.add_argument("--run", required=True, help="answers run directory")
    p.set_defaults(func=_correlation)

    p = sub.add_parser("report", help="report.md with tables and plots from run directories")
    p.add_argument("--runs", required=True, nargs="+", help="retrieval and/or answers run directories")
    p.add_argument("--out", required=True, help="report directory")
    p.set_defaults(func=_report)

    p = sub.add_parser(
        "synth",
        help="synthetic multi-turn dialogues (cases .jsonl) from a collection's documents, quality-checked",
        description="Writes OUT, OUT's <stem>.summary.json (rejections by reason), <stem>.progress.jsonl "
        "(resume state) and <stem>.docs.jsonl (the documents, for `eval answers --docs`). Rerun with the same "
        "--out to continue.",
    )
    p.add_argument("--collection", required=True, help="collection to sample documents from (`reground collections`)")
    p.add_argument("--dialogues", type=int, required=True, help="number of dialogues")
    p.add_argument("--out", required=True, help="cases .jsonl to write (resumable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the document, span and turn choices (default 0)")
    p.add_argument("--model", default="local:default", help="chat model spec (default local:default)")
    # Omitted: evals/runs/synth.py's SynthSettings decide (read when the command runs: it loads the chat stack).
    p.add_argument("--turns", type=int, help="planned turns per dialogue (default: SynthSettings.turns)")
    for share in SYNTH_SHARES:
        option = "--" + share.replace("_", "-")
        p.add_argument(option, type=float, help=f"share of later turns (default: SynthSettings.{share})")
    p.add_argument("--support-threshold", type=float, default=None, help="cosine a passage needs to support a question")
    p.add_argument("--no-model-check", dest="model_check", action="store_false", help="skip the model's own check")
    p.add_argument("--data-dir", default=None, help="store directory (default: $REGROUND_DATA_DIR)")
    p.set_defaults(func=_synth)

    p = sub.add_parser(
        "rank-agreement", help="Kendall's tau between the system rankings of two answers runs (synthetic vs real)"
    )
    p.add_argument(
        "--synthetic", required=True, nargs="+", help="answers run directory (or several) on the synthetic cases"
    )
    p.add_argument(
        "--real", required=True, nargs="+", help="answers run directory (or several: systems merged) on real cases"
    )
    p.add_argument("--metrics", default="token_f1,k_precision", help="comma-separated summary metrics")
    p.add_argument("--out", default=None, help="write the result as JSON here")
    p.set_defaults(func=_rank_agreement)

    p = sub.add_parser("feedback", help="the chat page's rated replies")
    feedback = p.add_subparsers(dest="feedback_command", metavar="COMMAND", required=True)
    p = feedback.add_parser("export", help="write the rated turns as a case file `reground eval answers` reads")
    p.add_argument("--out", required=True, help="case file (.jsonl) to write")
    p.add_argument("--url", default=None, help="the LangGraph server (default: the one `reground ui` runs)")
    p.add_argument("--data-dir", default=None, help="data dir `reground ui` runs with (to find its server)")
    p.set_defaults(func=_feedback_export)


def _fail(problem: str | Exception) -> NoReturn:
    """Raise the problem as the RegroundError the CLI prints on one line with its exit code.

    An error that already is one keeps its class (a model that is down exits 4, a bad dataset 3);
    a missing or unreadable file is a DataError; anything else here is bad input.
    """
    from reground.tools.errors import DataError, InputError, ModelError, RegroundError

    if not isinstance(problem, Exception):
        raise InputError(problem)
    cause = problem.__cause__
    if isinstance(cause, RegroundError) and cause.exit_code != getattr(problem, "exit_code", None):
        # e.g. an eval run stopped by a model that is down: exit with the model's code, keep the run's message
        families: tuple[type[RegroundError], ...] = (InputError, DataError, ModelError)
        family = next(c for c in families if isinstance(cause, c))
        raise family(str(problem)) from problem
    if isinstance(problem, RegroundError):
        raise problem
    if isinstance(problem, OSError):
        raise DataError(f"{problem}: check the path") from problem
    raise InputError(str(problem)) from problem


def _retrieval(args: argparse.Namespace) -> int:
    from reground.evals.runs.retrieval import format_summary, run_from_args

    try:
        summary = run_from_args(args)
    except (OSError, ValueError) as exc:
        _fail(exc)
    print(format_summary(summary))
    print(f"wrote {Path(args.out) / 'summary.json'}")
    return 0


def _answers(args: argparse.Namespace) -> int:
    from reground.evals.data.datasets import DatasetError
    from reground.evals.runs.answers import EvalRunError, run_answers_eval

    if args.workers < 1:
        _fail("--workers must be >= 1")
    try:
        overrides = parse_overrides(args.set)
    except ValueError as exc:
        _fail(exc)
    try:
        summary = run_answers_eval(
            args.docs,
            args.cases,
            systems=args.systems,
            limit=args.limit,
            seed=args.seed,
            only_followups=args.followups_only,
            collection=args.collection,
            all_cases=args.all_cases,
            case_scope=args.case_scope,
            out_dir=args.out,
            chat_model_spec=args.model,
            judge_model_spec=args.judge_model,
            judges=[j.strip() for j in args.judges.split(",") if j.strip()],
            workers=args.workers,
            data_dir=args.data_dir,
            context_overrides=overrides,
        )
    except (EvalRunError, DatasetError, OSError) as exc:
        _fail(exc)
    keys = (
        "n_cases",
        "gold_in_top3",
        "token_f1",
        "k_precision",
        "rougeL",
        "llm_calls",
        "latency_median_s",
    )
    for name, metrics in summary["systems"].items():
        shown = ", ".join(f"{k}={metrics[k]:.3f}" for k in keys if isinstance(metrics.get(k), int | float))
        print(f"{name}: {shown}")
        for label, row in (metrics.get("behaviour") or {}).items():
            shares = ", ".join(f"{k}={row[k]:.2f}" for k in ("answer", "hedge", "abstain", "clarify"))
            print(f"  {label} (n={row['n']}): {shares}")
        from reground.evals.runs.usefulness import useful_shares

        for collection, label, share, n in useful_shares(metrics.get("usefulness") or {}):
            print(f"  useful, {collection} {label} (n={n}): {share:.3f}")
    print(f"wrote {Path(args.out) / 'summary.json'}")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from reground.evals.train.calibrate import CalibrationError, calibrate_run

    try:
        result = calibrate_run(
            args.run,
            system=args.system,
            data_dir=args.data_dir,
            also_repo=args.also_repo,
            for_collection=args.for_collection,
            **({} if args.support_percentile is None else {"support_percentile": args.support_percentile}),
        )
    except CalibrationError as exc:
        _fail(exc)
    if "groundedness_threshold" in result:
        print(
            f"groundedness threshold {result['groundedness_threshold']:.4f} "
            f"(5th percentile over {result['n_correct_retrieval']} written answers with the gold document retrieved)"
        )
    if "support_threshold" in result:
        caught = result["unanswerable_below"]
        print(
            f"support threshold {result['support_threshold']:.4f} (percentile {result['support_percentile']:g} over "
            f"{result['n_answerable']} "
            f"answerable cases: {result['answerable_below']:.1%} of them abstain"
            + (f"; {caught:.1%} of {result['n_unanswerable']} unanswerable ones too)" if caught is not None else ")")
        )
    for path in result["written"]:
        print(f"wrote {path}" + (f" (for collection {result['collection']})" if result.get("collection") else ""))
    return 0


def _judge_check(args: argparse.Namespace) -> int:
    from reground.evals.runs.answers import JUDGE_MAX_TOKENS, load_eval_model
    from reground.evals.runs.judge_check import check_hallucination_judge
    from reground.tools.errors import RegroundError

    try:
        model = load_eval_model(args.judge_model, max_tokens=JUDGE_MAX_TOKENS)
        result = check_hallucination_judge(
            args.run, model, judge_model_spec=args.judge_model, system=args.system, n=args.n, seed=args.seed
        )
    except (OSError, ValueError, RegroundError) as exc:
        _fail(exc)
    balanced = result["balanced_accuracy"]
    print(json.dumps({k: result[k] for k in ("n", "accuracy", "balanced_accuracy", "unparseable", "per_kind")}))
    print(
        f"balanced accuracy {balanced if balanced is None else round(balanced, 3)}: the judge is "
        + ("trusted" if result["trusted"] else f"NOT trusted (threshold {result['trust_threshold']})")
    )
    print(f"wrote {Path(args.run) / 'judge_check.json'}")
    return 0


def _correlation(args: argparse.Namespace) -> int:
    from reground.evals.runs.correlation import correlation_report

    try:
        report = correlation_report(args.run)
    except OSError as exc:
        _fail(exc)
    print(json.dumps(report["all"], indent=2))
    print(f"wrote {Path(args.run) / 'correlation.json'}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from reground.evals.runs.report import ReportError, write_report

    try:
        path = write_report(args.runs, args.out)
    except ReportError as exc:
        _fail(exc)
    print(f"wrote {path}")
    return 0


def _synth(args: argparse.Namespace) -> int:
    from reground.evals.runs.synth import SUPPORT_THRESHOLD, sidecar, synthesize

    given = {name: getattr(args, name) for name in ("turns", *SYNTH_SHARES) if getattr(args, name) is not None}
    try:
        summary = synthesize(
            args.collection,
            dialogues=args.dialogues,
            out=args.out,
            model_spec=args.model,
            seed=args.seed,
            **given,
            support_threshold=SUPPORT_THRESHOLD if args.support_threshold is None else args.support_threshold,
            model_check=args.model_check,
            data_dir=args.data_dir,
        )
    except (OSError, ValueError) as exc:
        _fail(exc)
    print(json.dumps({k: summary[k] for k in ("cases", "by_kind", "turns_generated", "rejected", "followups")}))
    print(f"wrote {args.out} and {sidecar(Path(args.out), 'summary.json')}")
    return 0


def _rank_agreement(args: argparse.Namespace) -> int:
    from reground.evals.runs.synth import rank_agreement

    try:
        result = rank_agreement(args.synthetic, args.real, [m.strip() for m in args.metrics.split(",") if m.strip()])
    except (OSError, ValueError) as exc:
        _fail(exc)
    for metric, row in result["metrics"].items():
        print(f"{metric}: Kendall tau {row['kendall_tau']:+.3f} over {len(row['systems'])} systems")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def _feedback_export(args: argparse.Namespace) -> int:
    from reground.commands.ui import running_page_url
    from reground.evals.data.feedback import fetch_feedback, write_cases

    url = args.url or running_page_url(args.data_dir)
    counts = write_cases(fetch_feedback(url), args.out)
    rated = f"{counts['cases']} rated turns ({counts['helpful']} helpful, {counts['not_helpful']} not)"
    print(f"wrote {rated} to {args.out}")
    print(f"evaluate them: reground eval answers --docs <your documents .jsonl> --cases {args.out} --out <dir>")
    return 0
