"""`reground collections [NAME] [--json]`: what a store holds, per collection or per document."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def cmd_collections(args: argparse.Namespace) -> int:
    """Read-only listing from the manifests (no embedding model is loaded, nothing is repaired)."""
    from reground.tools.errors import RegroundError
    from reground.tools.stores.store import PassageStore
    from reground.tools.stores.vector_store import ENGINE_SCHEMES

    try:
        if args.store and args.store.partition(":")[0] in ENGINE_SCHEMES:
            from reground.tools.stores.postgres import describe_engine

            rows = describe_engine(args.store, args.name)
        else:
            rows = PassageStore.describe(args.name, data_dir=args.data_dir, chroma_url=args.chroma_url or "")
    except RegroundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(rows[0] if args.name else rows, indent=2))
        return 0
    if not rows:
        print("no collections yet: create one with `reground ingest PATH --collection NAME`")
        return 0
    if args.name:
        row = rows[0]
        print(f"{row['collection']}: {row['documents']} documents, {row['chunks']} chunks")
        print(f"metadata fields: {', '.join(row['metadata_fields']) or 'none'}")
        width = max((len(d["doc_id"]) for d in row["document_chunks"]), default=0)
        for doc in row["document_chunks"]:
            print(f"  {doc['doc_id']:<{width}}  {doc['chunks']} chunks")
        return 0
    width = max(len(r["collection"]) for r in rows)
    for row in rows:
        print(f"{row['collection']:<{width}}  {row['documents']} documents  {row['chunks']} chunks")
    return 0


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser("collections", help="list collections, or one collection's documents")
    parser.add_argument("name", nargs="?", help="a collection: list its documents and their chunk counts")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
    parser.add_argument("--chroma-url", help="a Chroma server (chroma run) instead of the embedded store")
    parser.add_argument("--store", help="an engine's store spec (postgresql://... or pgserver:<dir>)")
    parser.set_defaults(func=cmd_collections)
