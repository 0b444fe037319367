"""`reground ask`, `reground chat` and `reground demo`: conversations from the terminal."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from reground.commands import add_parser
from reground.commands.settings import add_set_option, parse_overrides
from reground.demo import DEMO_COLLECTION, DEMO_ESCALATION, DEMO_SCOPE, DEMO_TURNS, demo_corpus_path, demo_next_step


def _context(args: argparse.Namespace, **overrides: Any) -> Any:
    """The run's Context: `--set` values, then the named flags (--collection, --filter, ...) over them."""
    from reground.nodes.context import Context

    values: dict[str, Any] = parse_overrides(getattr(args, "set", None) or [])
    if getattr(args, "collection", None):
        values["collection"] = args.collection
    if getattr(args, "data_dir", None):
        values["data_dir"] = args.data_dir
    if getattr(args, "store", None):
        values["store"] = args.store
    if getattr(args, "model", None):
        values["chat_model"] = args.model
    if getattr(args, "filter", None):
        values["metadata_filter"] = parse_filter(args.filter)
    if getattr(args, "review", None):
        values["review_mode"] = args.review
    values.update(overrides)
    return Context(**values)


def parse_filter(raw: str) -> dict[str, Any]:
    """--filter as a JSON object; anything else is an InputError saying what was given."""
    from reground.tools.errors import InputError

    example = '\'{"country": "DE"}\''
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"--filter is not valid JSON ({exc.msg}, column {exc.colno}): pass an object, e.g. {example}"
        ) from exc
    if not isinstance(value, dict):
        raise InputError(f"--filter must be a JSON object, e.g. {example}; got a JSON {type(value).__name__}: {raw}")
    return value


def check_question(question: str, context: Any) -> None:
    """Refuse, before any model runs, a question the graph would refuse anyway (empty, no letters or digits)."""
    from reground.tools.errors import InputError
    from reground.tools.text.questions import question_problem

    problem = question_problem(question)
    if problem:
        raise InputError(f"{problem}: ask about the documents in '{context.collection}' in words")


@contextmanager
def _sqlite_graph(context: Any) -> Iterator[Any]:
    """The graph with conversations kept per thread in <data_dir>/threads.sqlite."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from reground.graph.builder import build_graph
    from reground.tools.adapters.paths import data_dir

    path = data_dir(context.data_dir or None) / "threads.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        yield build_graph(checkpointer=saver)


def print_result(result: dict[str, Any], *, out: Any = None) -> None:
    """The reply, its citations and scores; document text is printed without control characters or escape
    sequences (a stored document must not clear the screen, retitle the window or plant a link)."""
    from reground.tools.text.code_blocks import indent_code_blocks
    from reground.tools.text.terminal import terminal_safe as safe

    out = out or sys.stdout  # resolved per call: sys.stdout may have been replaced since import
    for notice in result.get("notices", []):
        print(f"notice: {safe(notice)}", file=sys.stderr)
    print(f"\n{safe(indent_code_blocks(result['answer']))}\n", file=out)  # code as code: indented, no fences
    for c in result.get("citations", []):
        url = f" <{safe(c['url'])}>" if c.get("url") else ""
        quote = " ".join(safe(c["quote"]).split())  # on one line, as the reply is
        print(f"  [{c['number']}] {safe(str(c['title']))}{url}\n      \u201c{quote}\u201d", file=out)
    scores = f"groundedness {result['groundedness']:.2f}, relevance {result.get('relevance', 0.0):.2f}"
    if result.get("refine_iterations"):
        # ProMiSe's lexical proxies matter to a reader only where they drove a refinement; on a quoted reply they
        # read low (a sentence against whole passages) while saying nothing about its faithfulness.
        proxies = result.get("principle_scores", {})
        scores += ", " + ", ".join(f"{k} {v:.2f}" for k, v in proxies.items() if k != "relevance")
    status = "passed" if result["passed"] else f"fallback: {result['fallback_reason']}"
    print(
        f"  {result.get('kind', 'answer')} | {scores} | {status} | "
        f"{result['llm_calls']} LLM calls, {result['seconds']:.1f} s, "
        f"re-ground {result['reground_attempts']}, refine {result['refine_iterations']}",
        file=out,
    )


def print_progress(text: str) -> None:
    """A progress line on stderr, as the turn streams it."""
    from reground.tools.text.terminal import terminal_safe

    print(f"  \u00b7 {terminal_safe(text)}", file=sys.stderr)


def run_turn(
    graph: Any,
    context: Any,
    thread_id: str,
    question: str,
    *,
    show_progress: bool = True,
    progress: Callable[[str], None] = print_progress,
) -> dict[str, Any]:
    """One turn with its progress events handed to `progress` as they arrive; returns the turn's result."""
    from reground.graph.builder import run_config

    config = run_config(context, configurable={"thread_id": thread_id})
    result: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"messages": [{"role": "user", "content": question}]},
        config=config,
        context=context,
        stream_mode=["custom", "values"],
    ):
        if mode == "custom" and show_progress:
            progress(str(chunk.get("message", "")))
        elif mode == "values" and "result" in chunk:
            result = chunk["result"]
    state = graph.get_state(config)
    if state.interrupts:
        pending = state.interrupts[0].value
        from reground.tools.text.terminal import terminal_safe

        print(f"\n[review] proposed answer: {terminal_safe(str(pending['proposed_answer']))}", file=sys.stderr)
        decision = _ask_reviewer()
        from langgraph.types import Command

        for _ in graph.stream(Command(resume=decision), config=config, context=context, stream_mode="values"):
            pass
        result = graph.get_state(config).values["result"]
    return result


def _ask_reviewer() -> dict[str, str]:
    action = input("approve / edit / reject? ").strip().lower() or "approve"
    if action == "edit":
        return {"action": "edit", "answer": input("edited answer: ")}
    return {"action": action if action in ("approve", "reject") else "approve"}


def cmd_ask(args: argparse.Namespace) -> int:
    """The turn runs in the data dir's warm worker when one serves this run (`reground worker start`), else here."""
    from reground.commands.ask_worker import ask_worker

    thread = args.thread = args.thread or uuid.uuid4().hex
    result = ask_worker(args, None if args.quiet else print_progress)
    if result is None:
        context = _context(args)
        check_question(args.question, context)
        with _sqlite_graph(context) as graph:
            result = run_turn(graph, context, thread, args.question, show_progress=not args.quiet)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_result(result)
        print(f"  (thread {thread}: pass --thread {thread} to follow up)", file=sys.stderr)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from reground.tools.errors import RegroundError

    context = _context(args)
    thread = args.thread or uuid.uuid4().hex
    print(f"reground chat on '{context.collection}' (thread {thread}); empty line or Ctrl-D to quit", file=sys.stderr)
    with _sqlite_graph(context) as graph:
        while True:
            try:
                question = input("\nyou> ").strip()
            except EOFError:
                break
            if not question:
                break
            try:
                check_question(question, context)
                print_result(run_turn(graph, context, thread, question))
            except RegroundError as exc:  # the thread is unchanged (nodes/thread_messages.py): ask again
                print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job: local LLM up, demo corpus in, a 3-turn conversation, LLM down."""
    from langgraph.checkpoint.memory import InMemorySaver

    from reground.graph.builder import build_graph
    from reground.tools.adapters import local_server
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore
    from reground.tools.tuning.stores import INGEST

    context = _context(args, collection=DEMO_COLLECTION, metadata_filter=DEMO_SCOPE, escalation=DEMO_ESCALATION)
    started_server = False
    if context.chat_model.startswith("local:") and local_server.status() is None:
        print(f"starting the local LLM server ({args.llm}) ...", file=sys.stderr)
        info = local_server.serve(args.llm)
        started_server = True
        print(f"  {info.model} at {info.url}", file=sys.stderr)
    try:
        store = PassageStore.open(DEMO_COLLECTION, data_dir=context.data_dir or None, create=True)
        summary = ingest([demo_corpus_path()], store, progress=False, max_tokens=INGEST.chunk_tokens)
        print(f"demo corpus: {summary}", file=sys.stderr)
        graph = build_graph(checkpointer=InMemorySaver())
        thread = uuid.uuid4().hex
        print(f"scope (from the run's context, not the question): {json.dumps(DEMO_SCOPE)}")
        for number, question in enumerate(DEMO_TURNS, start=1):
            print(f"\n=== turn {number}: {question}")
            print_result(run_turn(graph, context, thread, question))
    finally:
        if started_server:
            local_server.stop()
            print("\nstopped the local LLM server", file=sys.stderr)
    print(f"\n{demo_next_step()}")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--collection", help="collection to answer from (default: demo-hr)")
    parser.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
    parser.add_argument(
        "--store", help="store spec, e.g. postgresql://... or pgserver:<dir> (search in the engine); default: data dir"
    )
    parser.add_argument("--model", help="chat model spec, e.g. local:default or openai:gpt-4o-mini")
    parser.add_argument("--filter", help='the user\'s scope as JSON, e.g. \'{"country": "DE"}\'')
    parser.add_argument("--thread", help="conversation thread id (kept in <data-dir>/threads.sqlite)")
    parser.add_argument("--review", choices=("off", "failed", "all"), help="pause for human review")
    add_set_option(parser)


def add_commands(subparsers: Any) -> None:
    ask = add_parser(subparsers, "ask")
    ask.add_argument("question")
    _common(ask)
    ask.add_argument("--json", action="store_true", help="print the turn's full result as JSON")
    ask.add_argument("--quiet", action="store_true", help="no progress lines")
    ask.set_defaults(func=cmd_ask)

    chat = add_parser(subparsers, "chat")
    _common(chat)
    chat.set_defaults(func=cmd_chat)

    demo = add_parser(subparsers, "demo")
    demo.add_argument("--llm", default="default", help="local model to serve (default: the measured best trade-off)")
    demo.add_argument("--data-dir", help="store directory")
    demo.add_argument("--model", help=argparse.SUPPRESS)
    demo.set_defaults(func=cmd_demo)
