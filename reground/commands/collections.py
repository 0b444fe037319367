"""`reground collections [NAME] [--json]`: what a store holds, per collection or per document."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from reground.commands import add_parser


def cmd_collections(args: argparse.Namespace) -> int:
    """Read-only listing from the manifests (no embedding model is loaded, nothing is repaired); with --trust or
    --untrust, the one edit: the collection's trusted domains."""
    from reground.tools.errors import InputError, RegroundError
    from reground.tools.stores.store import PassageStore
    from reground.tools.stores.trusted_domains import edit_trusted, settings_dir, trusted_domains
    from reground.tools.stores.vector_store import ENGINE_SCHEMES

    root = settings_dir(data_dir=args.data_dir)
    if (args.trust or args.untrust) and not args.name:
        raise InputError(
            "--trust and --untrust edit one collection: name it, e.g. `reground collections NAME --trust example.com`"
        )
    try:
        if args.store and args.store.partition(":")[0] in ENGINE_SCHEMES:
            from reground.tools.stores.postgres import describe_engine

            rows = describe_engine(args.store, args.name)
        else:
            rows = PassageStore.describe(args.name, data_dir=args.data_dir, chroma_url=args.chroma_url or "")
    except RegroundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.name:
        trusted = (
            edit_trusted(root, args.name, add=args.trust or (), remove=args.untrust or ())
            if args.trust or args.untrust
            else trusted_domains(root, args.name)
        )
        rows[0]["trusted_domains"] = trusted.as_dict()
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
        trust = row["trusted_domains"]
        edits = [f"+{d}" for d in trust["added"]] + [f"-{d}" for d in trust["removed"]]
        print(
            f"trusted domains: {', '.join(trust['trusted']) or 'none'} (learned from {trust['documents']} documents"
            + (f"; edited: {' '.join(edits)}" if edits else "")
            + "; change with --trust/--untrust DOMAIN)"
        )
        width = max((len(d["doc_id"]) for d in row["document_chunks"]), default=0)
        for doc in row["document_chunks"]:
            print(f"  {doc['doc_id']:<{width}}  {doc['chunks']} chunks")
        return 0
    width = max(len(r["collection"]) for r in rows)
    for row in rows:
        print(f"{row['collection']:<{width}}  {row['documents']} documents  {row['chunks']} chunks")
    return 0


def add_commands(subparsers: Any) -> None:
    parser = add_parser(subparsers, "collections")
    parser.add_argument("name", nargs="?", help="a collection: list its documents and their chunk counts")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
    parser.add_argument("--chroma-url", help="a Chroma server (chroma run) instead of the embedded store")
    parser.add_argument("--store", help="an engine's store spec (postgresql://... or pgserver:<dir>)")
    parser.add_argument(
        "--trust",
        nargs="+",
        metavar="DOMAIN",
        help="trust these domains (or a link's or address's) in the named collection: a reply giving a contact, or "
        "asking for personal data, on another domain comes with a warning",
    )
    parser.add_argument("--untrust", nargs="+", metavar="DOMAIN", help="stop trusting these domains")
    parser.set_defaults(func=cmd_collections)
