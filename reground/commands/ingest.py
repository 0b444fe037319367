"""`reground ingest`: index files and folders into a collection."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reground.commands import add_parser
from reground.tools.text.loaders import MiB
from reground.tools.tuning.stores import INGEST


def cmd_ingest(args: argparse.Namespace) -> int:
    """Open (or create) the collection, then ingest under its write lock; bad files and documents are listed by name
    with their reason, not fatal: every other document is ingested and the command exits 3 at the end."""
    from reground.tools.errors import DataError, InputError, RegroundError
    from reground.tools.stores.factory import open_store
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.vector_store import store_spec

    if not args.paths and not args.delete:
        raise InputError(
            f"nothing to ingest into {args.collection!r}: pass files or folders (or --delete DOC_ID ...), "
            f"e.g. `reground ingest docs/ --collection {args.collection}`"
        )
    if args.max_file_mb < 0:
        raise InputError(f"--max-file-mb must be 0 (no limit) or more, got {args.max_file_mb:g}")
    try:
        spec = args.store or store_spec(args.data_dir, args.chroma_url or "")
        store = open_store(spec, args.collection, create=True)
        summary = ingest(
            args.paths,
            store,
            max_tokens=args.max_tokens,
            delete=args.delete or (),
            progress=not args.quiet,
            max_file_bytes=int(args.max_file_mb * MiB),
            settings_root=Path(args.data_dir) if args.data_dir else None,
        )
    except RegroundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    for error in summary.errors:
        print(f"error: {error}", file=sys.stderr)
    if summary.repaired:
        named = INGEST.repaired_named
        shown = ", ".join(summary.repaired[:named]) + (" …" if len(summary.repaired) > named else "")
        print(f"repaired: the manifest named documents whose chunks were missing: {shown}", file=sys.stderr)
    print(f"{store.collection}: {summary}")
    if not args.quiet:
        trusted = ", ".join(summary.trusted_domains) or "none yet"
        print(
            f"trusted domains: {trusted} (learned from where the documents come from; "
            f"`reground collections {store.collection} --trust DOMAIN` to add one)",
            file=sys.stderr,
        )
    # DataError's exit code: some files or documents could not be ingested (each is named above), the rest were.
    return DataError.exit_code if summary.errors else 0


def add_commands(subparsers: Any) -> None:
    parser = add_parser(subparsers, "ingest")
    parser.add_argument("paths", nargs="*", help="files or folders")
    parser.add_argument("--collection", required=True, help="collection name (created if missing)")
    parser.add_argument("--data-dir", help="store directory (default: $REGROUND_DATA_DIR or ~/.local/share/reground)")
    parser.add_argument("--chroma-url", help="a Chroma server (chroma run) instead of the embedded store")
    parser.add_argument("--store", help="vector store spec (chroma:<dir>, chroma-http://host:port); overrides both")
    tokens = INGEST.chunk_tokens
    parser.add_argument("--max-tokens", type=int, default=tokens, help=f"chunk size in tokens (default {tokens})")
    parser.add_argument("--delete", nargs="+", metavar="DOC_ID", help="remove these documents")
    largest_mb = INGEST.max_file_bytes / MiB
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=largest_mb,
        help=f"largest document file (or .jsonl line) to read, in MB; 0: no limit (default {largest_mb:g})",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_ingest)
