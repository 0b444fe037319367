"""The ingest of one large text file through `reground ingest`, timed, with its progress inside the file.

    python -m reground.evals.perf.ingest_large --corpus ../shared/data/doc2dial/docs.jsonl --mb 30 \
        --out evals/results/ingest_large.json

The file is the corpus's texts, one after another, repeated until it reaches the size (doc2dial's government pages:
prose, lists and tables). It is ingested into a fresh collection with the size limit lifted (`--max-file-mb 0`), as
a user would, and the run records the wall time, the chunks written, the rate (MB and chunks per second) and the
progress bar's readings inside the file (the bar counts characters: issue 39 saw one bar at "0/1 documents" for
minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MB = 10**6


def build_file(corpus: Path, target: Path, megabytes: float) -> int:
    """Write the corpus's texts into one file until it holds `megabytes` MB (UTF-8); its size in bytes."""
    texts = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    written = 0
    with target.open("w", encoding="utf-8") as handle:
        while written < megabytes * MB:
            for text in texts:
                chunk = text.strip() + "\n\n"
                handle.write(chunk)
                written += len(chunk.encode("utf-8"))
                if written >= megabytes * MB:
                    break
    return target.stat().st_size


def run(corpus: Path, megabytes: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="reground-ingest-large-") as tmp:
        work = Path(tmp)
        path = work / "large.txt"
        size = build_file(corpus, path, megabytes)
        argv = [sys.executable, "-m", "reground", "ingest", str(path), "--collection", "large", "--data-dir"]
        argv += [str(work / "data"), "--max-file-mb", "0"]
        env = {**os.environ, "COLUMNS": "120"}
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        seconds = time.perf_counter() - started
        load_after = os.getloadavg()[0]
    readings = re.findall(r"ingest → large:\s+(\d+)%", done.stderr.replace("\r", "\n"))
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    chunks = int(m.group(1)) if (m := re.search(r"(\d+) chunks added", summary)) else 0
    return {
        "file_bytes": size,
        "exit_code": done.returncode,
        "seconds": round(seconds, 1),
        "mb_per_s": round(size / MB / seconds, 4),
        "chunks": chunks,
        "chunks_per_s": round(chunks / seconds, 1),
        "summary": summary,
        "progress_percentages_seen": sorted({int(r) for r in readings}),
        # The machine is shared: its 1-minute load average when the ingest started and ended (2 cores).
        "load_average_start_end": [round(load_before, 2), round(load_after, 2)],
        "stderr_tail": done.stderr.replace("\r", "\n").strip().splitlines()[-3:],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reground.evals.perf.ingest_large", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--corpus", type=Path, required=True, help=".jsonl whose texts make the file")
    parser.add_argument("--mb", type=float, default=30.0, help="size of the file in MB (default 30)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = run(args.corpus, args.mb)
    command = "python -m reground.evals.perf.ingest_large " + shlex.join(
        list(argv if argv is not None else sys.argv[1:])
    )
    record = {"command": command, "machine": f"{os.cpu_count()} cores, shared", **result}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k != "stderr_tail"}))
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
