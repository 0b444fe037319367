"""`reground ui`: the chat page in one command (local LLM, `langgraph dev` with the page, its URL), until Ctrl-C."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from reground.demo import DEMO_COLLECTION, DEMO_SCOPE, demo_corpus_path

UI_RECORD = "ui-server.json"  # in the state dir: the page's URL, read by `reground eval feedback export`


def _policy(args: argparse.Namespace, data: Path) -> Any:
    """The scope policy the server enforces: --policy, else every collection with its values in the scope fields."""
    from reground.web.policy import load_policy, policy_from_data

    if args.policy:
        return load_policy(args.policy)
    fields = args.scope_field or None  # None: each collection's own scope fields, read from its documents
    context = {"chat_model": args.model} if args.model else {}
    return policy_from_data(data, fields, defaults={DEMO_COLLECTION: DEMO_SCOPE}, context=context)


def _ensure_documents(data: Path) -> None:
    """A data dir with no collection gets the demo HR corpus, so the page has something to answer from."""
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore
    from reground.tools.tuning.stores import INGEST

    if PassageStore.describe(data_dir=data):
        return
    print(f"no collection in {data}: ingesting the demo HR corpus as '{DEMO_COLLECTION}' ...", file=sys.stderr)
    store = PassageStore.open(DEMO_COLLECTION, data_dir=data, create=True)
    print(f"  {ingest([demo_corpus_path()], store, progress=False, max_tokens=INGEST.chunk_tokens)}", file=sys.stderr)


def _describe(policy: Any) -> str:
    """'demo-hr (country: DE/US; employment_type: full-time)' for each collection the page may use."""
    parts = []
    for name, scope in policy.collections.items():
        fields = "; ".join(f"{key}: {'/'.join(values)}" for key, values in scope.fields.items())
        parts.append(f"{name} ({fields or 'unscoped'})")
    return ", ".join(parts)


def running_page_url(data: str | None = None) -> str:
    """The URL of the server `reground ui` is running for this data dir; InputError when none runs."""
    from reground.tools.adapters.paths import state_dir
    from reground.tools.errors import InputError

    record = state_dir(data) / UI_RECORD
    try:
        return str(json.loads(record.read_text(encoding="utf-8"))["url"])
    except (OSError, ValueError, KeyError) as exc:
        raise InputError("no `reground ui` is running for this data dir: start it, or pass --url") from exc


def _interrupt_on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # `kill <pid>` stops the servers as Ctrl-C does


def cmd_ui(args: argparse.Namespace) -> int:
    from reground.tools.adapters import local_server
    from reground.tools.adapters.paths import data_dir, state_dir
    from reground.web.origin import HOSTS_ENV
    from reground.web.policy import POLICY_ENV
    from reground.web.server import pick_port, start_page_server

    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started from a shell that ignores it
    data = data_dir(args.data_dir)
    _ensure_documents(data)
    policy = _policy(args, data)
    run = state_dir(args.data_dir)
    policy_file = run / "ui-policy.json"
    policy_file.write_text(json.dumps(policy.as_json(), indent=2) + "\n", encoding="utf-8")
    started_llm = False
    if (args.model or "local:").startswith("local:") and local_server.status(args.data_dir) is None:
        print(f"starting the local LLM server ({args.llm}) ...", file=sys.stderr)
        info = local_server.serve(args.llm, data=args.data_dir)
        started_llm = True
        print(f"  {info.model} at {info.url}", file=sys.stderr)
    record = run / UI_RECORD
    server = None
    try:
        env = {POLICY_ENV: str(policy_file), "REGROUND_DATA_DIR": str(data)}
        print("starting the LangGraph server with the chat page ...", file=sys.stderr)
        if args.allow_host:
            env[HOSTS_ENV] = ",".join(args.allow_host)
        server = start_page_server(
            data / "ui", port=pick_port(args.port), env=env, host=args.host, origins=args.allow_origin or ()
        )
        record.write_text(json.dumps({"url": server.url, "pid": server.process.pid}) + "\n", encoding="utf-8")
        print(f"collections and scopes open to the page: {_describe(policy)}")
        print(f"chat page: {server.page_url}")
        print(f"API: {server.url} (threads kept in {data / 'ui'}); Ctrl-C stops everything", flush=True)
        code = server.process.wait()
        print(f"the LangGraph server exited with {code}; log {server.log}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr)
        return 0
    finally:
        if server is not None:
            server.stop()
        record.unlink(missing_ok=True)
        if started_llm:
            local_server.stop(args.data_dir)
            print("stopped the local LLM server", file=sys.stderr)


def add_commands(subparsers: Any) -> None:
    ui = subparsers.add_parser(
        "ui", help="start the local LLM and the LangGraph server with the chat page; print its URL (Ctrl-C stops)"
    )
    ui.add_argument("--port", type=int, help="port of the server (default 2025, or a free one when it is taken)")
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    ui.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
    ui.add_argument("--llm", default="default", help="local model to serve (default: the measured best trade-off)")
    ui.add_argument("--model", help="a chat model spec instead of the local server, e.g. openai:gpt-4o-mini")
    ui.add_argument(
        "--policy",
        help="scope policy JSON: the collections and scope values the page may use (reground/web/policy.py); "
        "default: every collection, each scope field's values from its documents",
    )
    ui.add_argument(
        "--scope-field",
        action="append",
        help="a metadata field the user picks a value of (repeatable; default: the fields each collection's "
        "documents are scoped by, those some document sets to 'all' or to a list of values)",
    )
    ui.add_argument(
        "--allow-origin",
        action="append",
        help="another web origin whose pages may use the API, e.g. https://smith.langchain.com (repeatable; "
        "default: the page's own origin only)",
    )
    ui.add_argument(
        "--allow-host",
        action="append",
        help="a host name the server is reached under besides the address it listens on, e.g. a proxy's "
        "(repeatable; a DNS name rebound to this machine is refused)",
    )
    ui.set_defaults(func=cmd_ui)
