"""End to end with the network cut: ingest, retrieve, count tokens, load a metric, run a graph turn.

The work runs in a fresh Python process whose `sitecustomize` (first on PYTHONPATH, so it is loaded
before anything else) records and refuses every connection and name lookup that is not loopback.
Caches start empty: a fresh HF_HOME (with HF_HUB_OFFLINE=1), a fresh reground cache dir (so the
tiktoken files are seeded from the package, not downloaded) and a fresh data dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

GUARD = r'''
"""Installed by tests/integration/test_offline.py: no traffic off this machine."""
import ipaddress
import json
import os
import socket
import traceback

_LOG = os.environ["REGROUND_TEST_NETWORK_LOG"]
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "", socket.gethostname()}


def _is_local(host):
    if isinstance(host, bytes):
        host = host.decode()
    if host is None or host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _record(kind, target):
    with open(_LOG, "a", encoding="utf-8") as handle:
        stack = "".join(traceback.format_stack(limit=12)[:-2])
        handle.write(json.dumps({"kind": kind, "target": repr(target), "stack": stack}) + "\n")
    raise OSError(f"network blocked in test: {kind} {target!r}")


_connect, _connect_ex, _sendto, _getaddrinfo = (
    socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto, socket.getaddrinfo
)


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        _record("connect", address)
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        _record("connect", address)
    return _connect_ex(self, address)


def _guarded_sendto(self, data, *args):
    address = args[-1]
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        _record("sendto", address)
    return _sendto(self, data, *args)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_local(host):
        _record("getaddrinfo", host)
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
socket.socket.sendto = _guarded_sendto
socket.getaddrinfo = _guarded_getaddrinfo
'''

WORK = r"""
import json, re, socket, sys
from pathlib import Path

# The guard is in place and works (this probe is the one attempt the log may hold).
assert socket.socket.connect.__name__ == "_guarded_connect", "sitecustomize was not loaded"
try:
    socket.socket().connect(("192.0.2.1", 443))
    raise SystemExit("the guard let an outbound connection through")
except OSError as exc:
    assert "blocked" in str(exc), exc

work = Path(sys.argv[1])
out = {}

from reground.cli import main
out["ingest_rc"] = main(["ingest", str(work / "docs"), "--collection", "offline-docs",
                         "--data-dir", str(work / "store"), "--quiet"])

from reground.tools.text.tokens import count_tokens
out["tokens"] = count_tokens("Each parent gets sixteen weeks of fully paid parental leave.")

from reground.tools.retrieval.search import HybridRetriever, RetrievalQuery
from reground.tools.stores.store import PassageStore
store = PassageStore.open("offline-docs", data_dir=work / "store")
question = "How many weeks of parental leave does each parent get?"
passages = HybridRetriever(store).search(RetrievalQuery(question, question), where=None, doc_k=2, paragraph_k=2)
out["count"] = store.count()
out["retrieved"] = [p["doc_id"] for p in passages]

from reground.evals.metrics import load_metric
metric = load_metric("token_f1")
out["token_f1"] = metric.compute(predictions=["sixteen weeks"], references=["sixteen weeks"])["token_f1"]

from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context
from reground.testing.fake_chat import ScriptedChatModel


def first_passage_sentence(messages):
    match = re.search(r"\[1\][^\n]*\n(.+?[.!?])(\s|$)", str(messages[0].content), re.DOTALL)
    return f"{match.group(1).strip()} [1]"


model = ScriptedChatModel(script={"answer": [first_passage_sentence]})
context = Context(
    collection="offline-docs",
    data_dir=str(work / "store"),
    groundedness={"use_llm_groundedness_judge": False},
    answer_style="write",
)
graph = build_graph(chat_model=model, store=store)
turn = graph.invoke({"messages": [{"role": "user", "content": question}]}, config=run_config(context), context=context)
result = turn["result"]
out["graph"] = {
    "answer": result["answer"],
    "passed": result["passed"],
    "cited": [c["doc_id"] for c in result["citations"]],
    "tasks": [task for task, _ in model.calls],
}
print("RESULT " + json.dumps(out))
"""

DOCS = {
    "parental.md": "# Parental leave\n\nEach parent gets sixteen weeks of fully paid parental leave. Apply through "
    "the HR portal at least eight weeks before the leave starts.\n",
    "canteen.md": "# Canteen\n\nThe canteen serves lunch from 11:30 to 14:00 on weekdays.\n",
}


def offline_env(tmp_path: Path, guard_dir: Path, log: Path) -> dict[str, str]:
    dropped = ("HF_", "HUGGINGFACE", "REGROUND_", "TIKTOKEN_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and "PROXY" not in k.upper()}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(guard_dir), os.environ.get("PYTHONPATH", "")])),
        REGROUND_TEST_NETWORK_LOG=str(log),
        HF_HOME=str(tmp_path / "hf_home"),
        HF_HUB_OFFLINE="1",
        REGROUND_CACHE_DIR=str(tmp_path / "cache"),
        REGROUND_DATA_DIR=str(tmp_path / "default-data"),
    )
    return env


def test_ingest_retrieve_tokens_metric_and_a_graph_turn_need_no_network(tmp_path: Path) -> None:
    guard_dir, docs, log = tmp_path / "guard", tmp_path / "docs", tmp_path / "network.jsonl"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")

    proc = subprocess.run(
        [sys.executable, "-c", WORK, str(tmp_path)],
        env=offline_env(tmp_path, guard_dir, log),
        capture_output=True,
        text=True,
        timeout=300,
    )
    attempts = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert [a["target"] for a in attempts] == ["('192.0.2.1', 443)"], "\n\n".join(
        f"{a['kind']} {a['target']}\n{a['stack']}" for a in attempts
    )
    out = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])

    assert out["ingest_rc"] == 0 and out["count"] == 2
    assert out["tokens"] == 11
    assert out["retrieved"][0] == "parental.md"
    assert out["token_f1"] == pytest.approx(1.0)
    graph = out["graph"]
    assert graph["passed"] and graph["cited"][0] == "parental.md", graph
    assert "sixteen weeks" in graph["answer"]
    assert "answer" in graph["tasks"]
    # tiktoken's files were seeded into the fresh cache from the package (not downloaded).
    assert len(list((tmp_path / "cache" / "tiktoken").iterdir())) == 2
