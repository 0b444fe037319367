"""False cautions on legitimate documentation: how many replies over real documentation sets carry a caution.

Every page of the eight documentation sets (`$DATA/techdocs`, `$DATA/techdocs_wide`) is the project's own: a reply
citing them that carries a caution ("... is not on one of this collection's trusted domains ...", "... downloads and
runs code from ...") is a false caution, unless what it warns about is itself worth a warning (a command piping a
script from another site into a shell). Each collection is ingested twice: as published (each page with its url)
and as local files (the urls left out: what `reground ingest docs/` of a checkout gives, where the origin is
unknown), and the graph answers every dev turn on each. Written per run: `summary.json` (per collection and mode:
turns, replies with a caution, by kind) and `cautions.jsonl` (each cautioned reply, its reasons and cited pages).

Run: `python -m reground.evals.runs.cautions --docs $DATA/techdocs/docs.jsonl $DATA/techdocs_wide/docs.jsonl
--cases $DATA/techdocs/cases_dev.jsonl $DATA/techdocs_wide/cases_dev.jsonl --out DIR` (offline: a scripted chat model
stands in for the LLM, as in the injection suites; `--chat-model local:default` uses the local server).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reground.tools.tuning.stores import INGEST

MODES = ("urls", "files")


def _kind(reason: str) -> str:
    """What a caution's reason warns about."""
    if "downloads and runs code" in reason:
        return "command"
    if "trusted domains" in reason:
        return "contact"
    return "request"


def _docs_by_collection(paths: Sequence[Path]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[str(row.get("collection") or path.parent.name)].append(row)
    return out


def _ingest(collection: str, docs: list[dict[str, Any]], mode: str, data_dir: Path) -> tuple[Any, str]:
    """The collection's store in `data_dir` and its name (built once: a later run reads it)."""
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    name = f"cautions-{collection}-{mode}"
    marker = data_dir / f"{name}.done"
    store = PassageStore.open(name, data_dir=data_dir, create=True)
    if marker.exists():
        return store, name
    rows = [{k: v for k, v in d.items() if not (mode == "files" and k == "url")} for d in docs]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "docs.jsonl"
        corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        ingest([corpus], store, progress=False, max_tokens=INGEST.chunk_tokens)
    marker.write_text("done\n", encoding="utf-8")
    return store, name


def page_cautions(docs: dict[str, list[dict[str, Any]]], modes: Sequence[str]) -> dict[str, Any]:
    """Each page quoted whole as a reply citing itself: how many would carry a caution, per collection and mode
    (no store, no graph: what the collection trusts is learned from the pages' records as ingest learns it)."""
    from reground.tools.signals.sensitive import Trust, reply_cautions
    from reground.tools.stores import trusted_domains as stored
    from reground.tools.stores.trusted_domains import TrustedDomains, document_record, learn

    familiar = getattr(stored, "familiar", lambda records: ())
    from reground.tools.text.loaders import Document

    out: dict[str, Any] = {}
    for collection, pages in sorted(docs.items()):
        for mode in modes:
            rows = [(d, {**d, "url": "" if mode == "files" else str(d.get("url") or "")}) for d in pages]
            records = [document_record(Document(str(d["doc_id"]), str(d.get("title", "")), str(d["text"]),
                                                url=p["url"])) for d, p in rows]  # fmt: skip
            domains, total = learn(records)
            served = sum(1 for r in records if r.get("own"))
            if hasattr(TrustedDomains, "trust"):  # as finalize builds it in this checkout
                trust = TrustedDomains(
                    learned=domains, documents=total, served=served, familiar=familiar(records)
                ).trust()
            elif _knows_origin():
                trust = Trust(frozenset(domains), known=served > 0)
            else:  # before: any ingested page made the origin known
                trust = Trust(frozenset(domains), known=total > 0)
            kinds: Counter[str] = Counter()
            cautioned = 0
            for _doc, page in rows:
                reasons = [c.reason for c in reply_cautions(str(page["text"]), [page], trust)]
                cautioned += bool(reasons)
                kinds.update({_kind(r) for r in reasons})
            out.setdefault(collection, {})[mode] = {
                "pages": len(rows),
                "cautioned": cautioned,
                "by_kind": dict(sorted(kinds.items())),
            }
    return out


def _knows_origin() -> bool:
    """Whether this checkout's trusted domains tell a collection of local files from one served from a domain."""
    from reground.tools.stores.trusted_domains import TrustedDomains

    return hasattr(TrustedDomains, "origin_known")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver
    from reground.evals.data.datasets import load_cases
    from reground.evals.runs.answers import graph_messages
    from reground.graph.builder import build_graph, run_config
    from reground.nodes.context import Context

    from reground.testing.fake_chat import ScriptedChatModel

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data_dir = Path(args.data_dir)
    docs = _docs_by_collection([Path(p) for p in args.docs])
    cases = [c for path in args.cases for c in load_cases(path)]
    wanted = set(args.collections or docs)
    summary: dict[str, Any] = {"command": args.command, "chat_model": args.chat_model, "collections": {}}
    started = time.time()
    if args.pages:
        summary = {
            "command": args.command,
            "pages": page_cautions({c: docs[c] for c in wanted & set(docs)}, args.modes),
        }
        for mode in args.modes:
            rows = [m[mode] for m in summary["pages"].values()]
            summary[f"total_{mode}"] = {
                "pages": sum(r["pages"] for r in rows),
                "cautioned": sum(r["cautioned"] for r in rows),
                "by_kind": dict(sum((Counter(r["by_kind"]) for r in rows), Counter())),
            }
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        return summary
    with (out / "cautions.jsonl").open("w", encoding="utf-8") as log:
        for collection in sorted(wanted & set(docs)):
            mine = [c for c in cases if c.collection == collection]
            for mode in args.modes:
                store, name = _ingest(collection, docs[collection], mode, data_dir)
                if args.chat_model == "scripted":
                    model: Any = ScriptedChatModel()
                else:
                    from reground.evals.runs.answers import load_eval_model

                    model = load_eval_model(args.chat_model)
                graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
                context = Context(collection=name, data_dir=str(data_dir))
                kinds: Counter[str] = Counter()
                cautioned = 0
                for case in mine:
                    config = run_config(context, configurable={"thread_id": f"{mode}-{case.case_id}"})
                    result = graph.invoke({"messages": graph_messages(case)}, config, context=context)["result"]
                    reasons = list(result.get("cautions") or [])
                    if not reasons:
                        continue
                    cautioned += 1
                    kinds.update({_kind(r) for r in reasons})
                    row = {
                        "collection": collection,
                        "mode": mode,
                        "case_id": case.case_id,
                        "kind": result.get("kind"),
                        "cautions": reasons,
                        "cited": sorted({c["doc_id"] for c in result.get("citations", [])}),
                        "answer": str(result.get("answer", ""))[: args.answer_chars],
                    }
                    log.write(json.dumps(row) + "\n")
                summary["collections"].setdefault(collection, {})[mode] = {
                    "turns": len(mine),
                    "cautioned": cautioned,
                    "by_kind": dict(sorted(kinds.items())),
                }
                log.flush()
                _write_summary(out, summary, args.modes, started)  # a long run keeps what it measured so far
    return _write_summary(out, summary, args.modes, started)


def _write_summary(out: Path, summary: dict[str, Any], modes: Sequence[str], started: float) -> dict[str, Any]:
    for mode in modes:
        rows = [by_mode[mode] for by_mode in summary["collections"].values() if mode in by_mode]
        summary[f"total_{mode}"] = {
            "turns": sum(r["turns"] for r in rows),
            "cautioned": sum(r["cautioned"] for r in rows),
            "by_kind": dict(sum((Counter(r["by_kind"]) for r in rows), Counter())),
        }
    summary["seconds"] = round(time.time() - started, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", nargs="+", required=True, help="docs.jsonl files (a `collection` field per page)")
    parser.add_argument("--cases", nargs="+", required=True, help="cases_dev.jsonl files")
    parser.add_argument("--out", required=True, help="folder for summary.json and cautions.jsonl")
    parser.add_argument("--data-dir", default=str(Path(tempfile.gettempdir()) / "reground-cautions"))
    parser.add_argument("--collections", nargs="*", help="only these collections")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--chat-model", default="scripted", help="'scripted' (offline) or a model spec")
    parser.add_argument("--answer-chars", type=int, default=400, help="characters of each cautioned reply kept")
    parser.add_argument(
        "--pages", action="store_true", help="quote each page whole as a reply citing itself (no store, no graph)"
    )
    args = parser.parse_args(argv)
    args.command = "python -m reground.evals.runs.cautions " + " ".join(argv if argv is not None else sys.argv[1:])
    summary = run(args)
    print(json.dumps({k: v for k, v in summary.items() if k.startswith("total") or k == "seconds"}))


if __name__ == "__main__":
    main()
