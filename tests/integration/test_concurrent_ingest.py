"""Concurrent writers into one collection lose nothing; a manifest naming missing chunks is repaired.

What this guards: two `reground ingest` runs of different files into one collection both
reported success, yet one document had no chunks while the manifest listed it, so every later ingest
called it unchanged. Here four processes ingest disjoint files into one fresh collection at the same
moment, twenty times, and each time the collection must equal a sequential ingest of the same files
(document ids, chunk ids, Chroma row ids, manifest), read with a raw Chroma client.

To keep this fast enough for CI, a parent process imports reground once and, each round, forks
four children that each run `reground ingest` (`reground.cli.main`, the console script's code) on
one file into that round's fresh data dir, all at the same moment. Children are fresh processes with
nothing opened before the fork (no Chroma client, no model), as separate `reground ingest` runs are.
(Reusing one process for several data dirs is not an option: Chroma's embedded client keeps
process-wide state per process.) One more test runs four real `python -m reground ingest` processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings
from reground.tools.stores.locking import collection_lock, lock_path
from reground.tools.stores.store import MANIFEST_SUFFIX, VERSION_ID, PassageStore
from reground.tools.tuning.stores import INGEST

pytestmark = pytest.mark.integration

COLLECTION = "concurrent-it"
WORKERS = 4
ROUNDS = 20
CLI = [sys.executable, "-m", "reground", "ingest"]
TOPICS = ("annual leave", "sick pay", "bike leasing", "travel expenses")

FORKING_PARENT = r"""
import json, os, sys, time
from pathlib import Path
import chromadb  # imported, never opened, before forking: each child opens its own client
import onnxruntime, tokenizers  # noqa: F401 - imports only; the embedding session is made in each child
from reground.cli import main
from reground.tools.text.tokens import count_tokens

count_tokens("warm")  # the tokenizer's tables: read-only data, safe to share across fork

control, collection, rounds, sources = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
(control / "ready").write_text("")
for round_ in range(rounds):
    go = control / f"go-{round_}"
    while not go.exists():
        time.sleep(0.002)
    data_dir = go.read_text()
    assert data_dir, "the go-file names the round's data dir"
    children = []
    for index, source in enumerate(sources):
        pid = os.fork()
        if pid == 0:
            out = os.open(control / f"out-{round_}-{index}", os.O_WRONLY | os.O_CREAT)
            err = os.open(control / f"err-{round_}-{index}", os.O_WRONLY | os.O_CREAT)
            os.dup2(out, 1)
            os.dup2(err, 2)
            try:
                code = main(["ingest", source, "--collection", collection, "--data-dir", data_dir, "--quiet"])
            except BaseException as exc:
                print(f"crashed: {exc!r}", file=sys.stderr)
                code = 99
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        children.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    (control / f"done-{round_}.tmp").write_text(json.dumps(codes))
    os.replace(control / f"done-{round_}.tmp", control / f"done-{round_}")
"""


def write_sources(folder: Path) -> list[Path]:
    """Four disjoint markdown files of three sections (three chunks) each."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for index, topic in enumerate(TOPICS):
        path = folder / f"policy-{index}.md"
        path.write_text(
            "\n\n".join(
                f"# {topic.title()} part {part}\n\nPart {part} of the {topic} policy, document {index}: "
                f"ask HR about {topic} before the end of the quarter."
                for part in range(3)
            ),
            encoding="utf-8",
        )
        files.append(path)
    return files


def snapshot(data_dir: Path) -> dict[str, Any]:
    """What Chroma holds, read without reground's store: rows, manifest, and whether they agree."""
    # A fresh client: one cached in this process does not follow other processes' writes to the vector index.
    SharedSystemClient.clear_system_cache()
    client = chromadb.PersistentClient(
        path=str(data_dir / "chroma"), settings=Settings(anonymized_telemetry=False, allow_reset=False)
    )
    collection = client.get_collection(COLLECTION)
    chunks = collection.get(include=["metadatas", "embeddings"])
    # Chroma's own vector index (what a raw `query` uses) must hold every row too, not only its tables.
    probe = [float(x) for x in chunks["embeddings"][0]] if len(chunks["ids"]) else [0.0]
    indexed = collection.query(query_embeddings=[probe], n_results=100, include=[])["ids"][0] if probe[1:] else []
    manifest = client.get_collection(COLLECTION + MANIFEST_SUFFIX).get(include=["metadatas"])
    records = {i: m for i, m in zip(manifest["ids"], manifest["metadatas"], strict=True) if i != VERSION_ID}
    rows = sorted(chunks["ids"])
    live = sorted(
        row
        for row, meta in zip(chunks["ids"], chunks["metadatas"], strict=True)
        if records.get(str(meta["doc_id"]), {}).get("generation") == meta["generation"]
    )
    return {
        "rows": rows,
        "indexed": sorted(indexed),
        "live_rows": live,
        "chunk_ids": sorted((str(m["doc_id"]), str(m["chunk_id"])) for m in chunks["metadatas"]),
        "manifest": {d: (m["hash"], m["generation"], m["chunks"]) for d, m in sorted(records.items())},
    }


def sequential_reference(sources: list[Path], data_dir: Path) -> dict[str, Any]:
    """The same files ingested one after another (in this process: the same code as the command)."""
    from reground.tools.stores.ingest import ingest

    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    for source in sources:
        summary = ingest([source], store, progress=False, max_tokens=INGEST.chunk_tokens)
        assert not summary.errors and summary.chunks_added == 3, summary
    reference = snapshot(data_dir)
    assert len(reference["manifest"]) == len(sources) and len(reference["rows"]) == 3 * len(sources)
    assert reference["rows"] == reference["live_rows"]
    return reference


def release(go: Path, data_dir: str) -> None:
    """Atomically: a child must never read a half-written go-file (an empty data dir means the default one)."""
    go.with_suffix(".tmp").write_text(data_dir)
    os.replace(go.with_suffix(".tmp"), go)


def wait_for(paths: list[Path], timeout_s: float, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        dead = [p for p in procs if p.poll() is not None]
        assert not dead, [p.communicate() for p in dead]
        assert time.monotonic() < deadline, f"workers did not finish: {[str(p) for p in paths if not p.exists()]}"
        time.sleep(0.01)


def test_four_concurrent_ingests_equal_a_sequential_one_twenty_times(tmp_path: Path) -> None:
    sources = write_sources(tmp_path / "docs")
    reference = sequential_reference(sources, tmp_path / "sequential")
    control = tmp_path / "control"
    control.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-c", FORKING_PARENT, str(control), COLLECTION, str(ROUNDS), *map(str, sources)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for([control / "ready"], 120, [parent])
        waited = 0
        for round_ in range(ROUNDS):
            data_dir = tmp_path / f"round-{round_}"
            release(control / f"go-{round_}", str(data_dir))
            wait_for([control / f"done-{round_}"], 180, [parent])
            codes = json.loads((control / f"done-{round_}").read_text())
            outs = [(control / f"out-{round_}-{i}").read_text() for i in range(WORKERS)]
            errs = [(control / f"err-{round_}-{i}").read_text() for i in range(WORKERS)]
            assert codes == [0] * WORKERS, (codes, errs)
            for out in outs:
                assert "1 documents (0 replaced, 0 unchanged), 3 chunks added" in out, (outs, errs)
            waited += sum(f"waiting for another ingest into {COLLECTION} (pid " in err for err in errs)
            assert snapshot(data_dir) == reference, f"round {round_} differs from the sequential ingest: {errs}"
        # Not vacuous: the writers did meet at the lock (one of four goes first; the others wait).
        assert waited >= ROUNDS, waited
    finally:
        parent.kill()
        parent.wait()


def test_four_real_cli_processes_at_once_equal_a_sequential_ingest(tmp_path: Path) -> None:
    sources = write_sources(tmp_path / "docs")
    reference = sequential_reference(sources, tmp_path / "sequential")
    data_dir = tmp_path / "concurrent"
    procs = [
        subprocess.Popen(
            [*CLI, str(source), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source in sources
    ]
    outputs = [proc.communicate(timeout=180) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * WORKERS, outputs
    assert snapshot(data_dir) == reference
    # Re-running every file changes nothing: each is whole and unchanged.
    rerun = subprocess.run(
        [sys.executable, "-m", "reground", "ingest", *map(str, sources), "--collection", COLLECTION,
         "--data-dir", str(data_dir), "--quiet"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert "4 documents (0 replaced, 4 unchanged), 0 chunks added" in rerun.stdout, rerun


def test_a_writer_waits_for_the_lock_and_says_for_whom(tmp_path: Path) -> None:
    """An ingest started while another writer holds the collection's lock waits, names its pid, then lands."""
    (source,) = write_sources(tmp_path / "docs")[:1]
    data_dir = tmp_path / "store"
    args = [str(source), "--collection", COLLECTION, "--data-dir", str(data_dir), "--quiet"]
    notice = f"waiting for another ingest into {COLLECTION} (pid {os.getpid()})…"
    err_file = tmp_path / "stderr.txt"
    with collection_lock(lock_path(data_dir, COLLECTION), COLLECTION), err_file.open("w") as err:
        proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 120
        while notice not in err_file.read_text():
            assert proc.poll() is None, (proc.returncode, err_file.read_text())
            assert time.monotonic() < deadline, "the second writer never said it was waiting"
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, "it must wait while the lock is held"
    stdout, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, err_file.read_text()
    assert "3 chunks added" in stdout


def test_opening_repairs_a_manifest_that_names_a_document_without_chunks(tmp_path: Path) -> None:
    sources = write_sources(tmp_path / "docs")
    data_dir = tmp_path / "store"
    reference = sequential_reference(sources, data_dir)
    # Lose policy-1.md's chunks behind the manifest's back (what the race used to leave).
    client = chromadb.PersistentClient(
        path=str(data_dir / "chroma"), settings=Settings(anonymized_telemetry=False, allow_reset=False)
    )
    client.get_collection(COLLECTION).delete(where={"doc_id": "policy-1.md"})
    broken = snapshot(data_dir)
    assert "policy-1.md" in broken["manifest"] and len(broken["rows"]) == 9

    # A reader opening while a writer holds the lock leaves the store alone (no repair under a writer).
    with collection_lock(lock_path(data_dir, COLLECTION), COLLECTION):
        store = PassageStore.open(COLLECTION, data_dir=data_dir)
        assert store.last_repair == {}
    assert snapshot(data_dir) == broken

    store = PassageStore.open(COLLECTION, data_dir=data_dir)
    assert store.last_repair == {"dropped": ["policy-1.md"], "leftovers_deleted": 0}
    assert "policy-1.md" not in snapshot(data_dir)["manifest"]
    assert "policy-1.md" not in {c["doc_id"] for c in store.all_chunks()}
    assert PassageStore.describe(COLLECTION, data_dir=data_dir)[0]["documents"] == 3

    # The next ingest re-adds it (it is no longer "unchanged") and says it repaired something.
    rerun = subprocess.run(
        [sys.executable, "-m", "reground", "ingest", *map(str, sources), "--collection", COLLECTION,
         "--data-dir", str(data_dir), "--quiet"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "4 documents (0 replaced, 3 unchanged), 3 chunks added" in rerun.stdout
    assert snapshot(data_dir) == reference


def test_ingest_repairs_on_its_own_and_reports_it(tmp_path: Path) -> None:
    """The repair also runs when the writer takes the lock (the store was opened before the loss)."""
    sources = write_sources(tmp_path / "docs")
    data_dir = tmp_path / "store"
    reference = sequential_reference(sources, data_dir)
    store = PassageStore.open(COLLECTION, data_dir=data_dir, create=True)
    store._chunks.delete(where={"doc_id": "policy-2.md"})
    from reground.tools.stores.ingest import ingest

    summary = ingest(sources, store, progress=False, max_tokens=INGEST.chunk_tokens)
    assert summary.repaired == ["policy-2.md"] and summary.chunks_added == 3 and summary.unchanged == 3
    assert "1 documents with missing chunks re-added" in str(summary)
    assert snapshot(data_dir) == reference
