"""Files built to stall or bloat an ingest, each through `reground ingest` in a child process, timed, with the
child's peak memory.

    python -m reground.evals.perf.ingest_adversarial --out evals/results/ingest_adversarial.json

- `deep_html`: a 25,000-level page of unclosed tags (about 260 KB). Target: `reground ingest` on it ends within
  10 s (process start included), the page named on one line; reading it in process is timed apart, and the same
  command on a one-paragraph page gives the process's own cost on the machine at that moment.
- `one_line_markdown`: a 5 MB markdown file on one line, a paragraph of sentences cycling through a few (a page
  padded to bloat a collection). Target: every chunk within the chunk size, ingest within 60 s, peak RSS of the
  ingest process within 700 MB. The store is read back to count the chunks, their largest token count and how many
  distinct texts they hold (a distinct one is embedded once).

Peak RSS is the child's own (`os.wait4`'s resource usage), not this script's.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MB = 2**20
DEPTH = 25_000
TARGETS = {"deep_html_seconds": 10.0, "markdown_seconds": 60.0, "markdown_peak_rss_mb": 700.0}
SENTENCES = (
    "Expense reports are filed within thirty days of the trip.",
    "Receipts over 25 EUR are scanned and attached to the report.",
    "Hotel nights are booked through the travel desk where possible.",
    "Train travel in second class is the default for trips under six hours.",
    "Taxi rides need a short reason in the report's comment field.",
    "Meals with clients are reimbursed up to the limit the policy lists.",
    "Mileage for a private car is paid at the rate of the current year.",
)


def _ingest(paths: list[Path], data: Path) -> dict[str, Any]:
    """Run `reground ingest` on the paths into a fresh collection; wall time, the child's peak RSS, exit code and
    output lines."""
    argv = [sys.executable, "-m", "reground", "ingest", *map(str, paths), "--collection", "adversarial"]
    argv += ["--data-dir", str(data), "--max-file-mb", "0", "--quiet"]
    out_path, err_path = data.with_suffix(".out"), data.with_suffix(".err")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    with out_path.open("w") as out, err_path.open("w") as err:
        child = subprocess.Popen(argv, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(child.pid, 0)  # the child's own resource usage
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "exit_code": child.returncode,
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "stdout": out_path.read_text().strip().splitlines(),
        "stderr": err_path.read_text().strip().splitlines(),
        "load_average_start_end": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def deep_html(work: Path) -> dict[str, Any]:
    from reground.tools.text.loaders import load_paths

    folder = work / "deep"
    folder.mkdir()
    deep = folder / "deep.html"
    deep.write_text("<html><body>" + '<div class="x">' * (DEPTH // 2) + "<span>" * (DEPTH - DEPTH // 2) + "end")
    started = time.perf_counter()
    _documents, errors = load_paths([deep])
    read_seconds = time.perf_counter() - started
    ordinary = folder.parent / "ordinary.html"  # the same command on a one-paragraph page: the process's own cost
    ordinary.write_text("<html><body><h1>Travel</h1><p>Trains are booked in second class.</p></body></html>")
    _ingest([ordinary], work / "data-warm-up")  # not kept: the first process reads its files from a cold cache
    run = _ingest([deep], work / "data-deep")
    lines = [line for line in run["stderr"] + run["stdout"] if "deep.html" in line]
    baseline = _ingest([ordinary], work / "data-ordinary")
    return {
        "file_bytes": deep.stat().st_size,
        "depth": DEPTH,
        "read_seconds_in_process": round(read_seconds, 3),
        "read_errors": [str(e) for e in errors],
        **run,
        "lines_naming_the_file": lines,
        "ordinary_page_seconds": baseline["seconds"],
        "ordinary_page_load_average_start_end": baseline["load_average_start_end"],
        "within_target": run["seconds"] <= TARGETS["deep_html_seconds"] and len(lines) == 1,
    }


def one_line_markdown(work: Path, megabytes: float) -> dict[str, Any]:
    from reground.tools.stores.store import PassageStore
    from reground.tools.text.tokens import count_tokens
    from reground.tools.tuning.stores import INGEST

    path = work / "one-line.md"
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        n = 0
        while written < megabytes * MB:
            sentence = SENTENCES[n % len(SENTENCES)] + " "
            handle.write(sentence)
            written += len(sentence.encode("utf-8"))
            n += 1
    run = _ingest([path], work / "data-md")
    store = PassageStore.open("adversarial", data_dir=work / "data-md")
    texts = [c["text"] for c in store.all_chunks()]
    largest = max((count_tokens(t) for t in set(texts)), default=0)
    return {
        "file_bytes": path.stat().st_size,
        "lines": 1,
        **run,
        "chunks": len(texts),
        "distinct_chunk_texts": len(set(texts)),
        "largest_chunk_tokens": largest,
        "chunk_tokens": INGEST.chunk_tokens,
        "within_target": (
            largest <= INGEST.chunk_tokens
            and run["seconds"] <= TARGETS["markdown_seconds"]
            and run["peak_rss_mb"] <= TARGETS["markdown_peak_rss_mb"]
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reground.evals.perf.ingest_adversarial", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--mb", type=float, default=5.0, help="size of the one-line markdown file (default 5)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reground-ingest-adversarial-") as tmp:
        work = Path(tmp)
        result = {"deep_html": deep_html(work), "one_line_markdown": one_line_markdown(work, args.mb)}
    command = "python -m reground.evals.perf.ingest_adversarial " + shlex.join(
        list(argv if argv is not None else sys.argv[1:])
    )
    record = {"command": command, "machine": f"{os.cpu_count()} cores, shared", "targets": TARGETS, **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        json.dumps({name: {k: v for k, v in r.items() if k not in ("stdout", "stderr")} for name, r in result.items()})
    )
    return 0 if all(r["within_target"] for r in result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
