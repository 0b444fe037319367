"""The chat page's app without a LangGraph server: its routes, headers, the scope guard in front of (stand-in) API
routes, a thread's turns from checkpoint history, ratings in a LangGraph store, and the page's own safety rules.

The real server, browser and graph are in tests/integration/test_chat_page.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.store.memory import InMemoryStore
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from reground.web.app import CONTENT_SECURITY_POLICY, STATIC, create_app
from reground.web.guard import ScopeGuard
from reground.web.policy import policy_from_json
from reground.web.server import langgraph_config
from reground.web.turns import FEEDBACK_NAMESPACE, feedback_record, thread_turns

REPO = Path(__file__).resolve().parents[2]
POLICY = policy_from_json(
    {
        "collections": {"demo-hr": {"scope": {"country": ["DE"]}, "default": {"country": "DE"}}},
        "context": {"escalation": "ask HR"},
    }
)
SCOPE = {"collection": "demo-hr", "metadata_filter": {"country": "DE"}}
T1, T2, GONE = (f"0195c6a4-1e5f-7000-8000-{n:012x}" for n in (0xA1, 0xA2, 0xDEAD))  # thread ids (UUIDs)
RUN = {"assistant_id": "reground", "input": {"messages": [{"role": "user", "content": "hi"}]}, "context": SCOPE}


def _message(kind: str, text: str, mid: str) -> dict[str, Any]:
    return {"type": kind, "content": text, "id": mid}


def _result(answer: str, kind: str = "answer") -> dict[str, Any]:
    passage = {"chunk_id": "c1", "doc_id": "annual-leave-de", "title": "Annual leave", "text": f"{answer} More."}
    citation = {"number": 1, "doc_id": "annual-leave-de", "title": "Annual leave", "url": "", "chunk_id": "c1"}
    return {"answer": answer, "kind": kind, "passed": True, "citations": [{**citation, "quote": answer}],
            "passages": [passage]}  # fmt: skip


# Checkpoint history of a two-turn thread, newest first, as the server returns it (only the fields used).
H1, A1, H2, A2 = (_message("human", "How much leave?", "h1"), _message("ai", "30 days.", "a1"),
                  _message("human", "Carry over?", "h2"), _message("ai", "5 days.", "a2"))  # fmt: skip
META = {"collection": "demo-hr", "metadata_filter": {"country": "DE"}}
HISTORY = [
    {"next": [], "values": {"messages": [H1, A1, H2, A2], "result": _result("5 days.")}, "metadata": META},
    {"next": ["finalize"], "values": {"messages": [H1, A1, H2], "result": _result("30 days.")}, "metadata": META},
    {"next": [], "values": {"messages": [H1, A1], "result": _result("30 days.")}, "metadata": META},
    {"next": ["start_turn"], "values": {"messages": [H1]}, "metadata": META},
]


class FakeServer:
    """The two things the routes need from the LangGraph server: a thread's history and its store."""

    def __init__(self) -> None:
        self._store = InMemoryStore()
        self.runs: dict[str, list[dict[str, Any]]] = {T1: [{"escalation": "ask HR", **SCOPE}]}

    async def history(self, thread_id: str) -> list[dict[str, Any]]:
        if thread_id == GONE:  # what the SDK raises for a thread the server does not have
            request = httpx.Request("POST", f"http://api/threads/{thread_id}/history")
            raise httpx.HTTPStatusError("404", request=request, response=httpx.Response(404, request=request))
        return HISTORY if thread_id == T1 else []

    async def store(self) -> Any:
        return self._store

    async def run_contexts(self, thread_id: str) -> list[dict[str, Any]] | None:
        return None if thread_id == GONE else self.runs.get(thread_id, [])


def _client(policy: Any = POLICY) -> tuple[TestClient, list[dict[str, Any]], FakeServer]:
    """The page's app with a stand-in for the API's run route behind the guard, recording what reaches it."""
    reached: list[dict[str, Any]] = []

    async def run_stream(request: Request) -> JSONResponse:
        body = await request.json()
        reached.append(body)
        return JSONResponse({"ran": True, "context": body.get("context")})

    async def anything(request: Request) -> JSONResponse:
        reached.append({"path": request.url.path})
        return JSONResponse({"ok": True})

    server = FakeServer()
    app = create_app(policy, backend=server, choices=lambda: POLICY)
    app.router.routes.extend(
        [
            Route("/threads/{thread_id}/runs/stream", run_stream, methods=["POST"]),
            Route("/{rest:path}", anything, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ]
    )
    return TestClient(app), reached, server


def test_the_page_and_its_assets_carry_a_strict_content_security_policy() -> None:
    client, _, _ = _client()
    page = client.get("/chat")
    assert page.status_code == 200 and '<script src="/chat/static/app.js"' in page.text
    for response in (page, client.get("/chat/static/app.js"), client.get("/chat/static/style.css")):
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "content-security-policy" not in client.get("/threads/x").headers, "the API's responses are left alone"


def test_config_offers_the_policy_and_says_it_is_enforced() -> None:
    client, _, _ = _client()
    config = client.get("/chat/api/config").json()
    assert config == {
        "graph": "reground",
        "enforced": True,
        "collections": {"demo-hr": {"scope": {"country": ["DE"]}, "default": {"country": "DE"}}},
    }
    open_config = _client(None)[0].get("/chat/api/config").json()
    assert open_config["enforced"] is False and open_config["collections"] == config["collections"]


def test_a_granted_run_reaches_the_api_with_the_enforced_context() -> None:
    client, reached, _ = _client()
    response = client.post(f"/threads/{T1}/runs/stream", json=RUN)
    assert response.status_code == 200
    assert reached == [{**RUN, "context": {"escalation": "ask HR", **SCOPE}, "metadata": SCOPE}], "stamped: the scope"


@pytest.mark.parametrize(
    ("method", "path", "body", "needle"),
    [
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "context": {**SCOPE, "metadata_filter": {}}}, "country"),
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "context": {**SCOPE, "chat_model": "openai:x"}}, "chat_model"),
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "assistant_id": "ingest"}, "'reground' graph"),
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "config": {"configurable": SCOPE}, "context": None}, "config"),
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "command": {"update": {"passages": []}}}, "resume"),
        ("POST", f"/threads/{T1}/runs/stream", {**RUN, "webhook": "http://x"}, "webhook"),
        ("POST", f"/threads/{T1}/runs", RUN, "not open"),
        ("POST", f"/threads/{T1}/runs/wait", RUN, "not open"),
        ("POST", "/runs/stream", RUN, "not open"),
        ("POST", "/runs/batch", [RUN], "not open"),
        ("POST", "/runs/crons", RUN, "not open"),
        ("POST", "/assistants", {"graph_id": "reground", "context": {"data_dir": "/"}}, "not open"),
        ("PATCH", "/assistants/a1", {"context": {"data_dir": "/"}}, "not open"),
        ("PUT", "/store/items", {"namespace": [FEEDBACK_NAMESPACE, T1], "key": "a1", "value": {}}, "not open"),
        ("POST", f"/threads/{T1}/state", {"values": {"passages": []}}, "not open"),
        ("POST", "/threads", {"metadata": {}, "supersteps": [{"updates": []}]}, "metadata"),
        ("POST", "/mcp", {"method": "tools/call"}, "not open"),
    ],
)
def test_every_other_way_to_run_or_write_is_refused_before_it_reaches_the_api(
    method: str, path: str, body: Any, needle: str
) -> None:
    client, reached, _ = _client()
    content = body if isinstance(body, str) else json.dumps(body)
    response = client.request(method, path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 403, response.text
    assert needle in response.json()["detail"]
    assert reached == []


def test_reads_and_the_pages_thread_writes_pass() -> None:
    client, reached, _ = _client()
    assert client.post("/threads", json={"metadata": {"title": "x"}}).status_code == 200
    assert client.patch(f"/threads/{T1}", json={"metadata": {"title": "y"}}).status_code == 200
    assert client.delete(f"/threads/{T1}").status_code == 200
    assert client.post("/threads/search", json={"limit": 5}).status_code == 200
    assert client.get(f"/threads/{T1}/state").status_code == 200
    assert [r.get("path") for r in reached] == ["/threads", f"/threads/{T1}", f"/threads/{T1}", "/threads/search",
                                                f"/threads/{T1}/state"]  # fmt: skip


def test_without_a_policy_everything_passes() -> None:
    client, _, _ = _client(None)
    body = {**RUN, "context": {"collection": "anything", "data_dir": "/x"}}
    assert client.post(f"/threads/{T1}/runs/stream", json=body).json()["context"] == body["context"]
    assert client.post("/runs/wait", json=RUN).status_code == 200


def test_the_apis_websocket_is_closed_under_a_policy() -> None:
    async def ws_app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})

    client = TestClient(ScopeGuard(ws_app, policy=POLICY, runs=FakeServer().run_contexts))
    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect(f"/threads/{T1}/stream/events"):
        pass
    assert closed.value.code == 1008


def test_a_threads_turns_come_from_its_checkpoints_with_their_scope() -> None:
    turns = thread_turns(HISTORY)
    assert [(t["message_id"], t["question"], t["result"]["answer"]) for t in turns] == [
        ("a1", "How much leave?", "30 days."),
        ("a2", "Carry over?", "5 days."),
    ]
    assert turns[1]["history"] == [{"role": "user", "text": "How much leave?"}, {"role": "agent", "text": "30 days."}]
    assert turns[0]["scope"] == SCOPE


def test_a_rating_is_stored_as_the_server_ran_the_turn_and_shown_with_the_thread() -> None:
    client, _, server = _client()
    stored = client.post("/chat/api/feedback", json={"thread_id": T1, "message_id": "a1", "rating": "up",
                                                      "note": "  exactly\nright "})  # fmt: skip
    assert stored.json() == {"stored": True, "rating": "up", "note": "exactly right"}
    item = server._store.get((FEEDBACK_NAMESPACE, T1), "a1")
    assert item is not None
    assert item.value["question"] == "How much leave?" and item.value["answer"] == "30 days."
    assert item.value["metadata_filter"] == {"country": "DE"} and item.value["citations"][0]["doc_id"]
    turns = client.get(f"/chat/api/threads/{T1}/turns").json()["turns"]
    assert [t["feedback"] for t in turns] == [{"rating": "up", "note": "exactly right"}, None]


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"thread_id": T1, "message_id": "a1", "rating": "meh"}, 400, "rating"),
        ({"thread_id": T1, "message_id": "a1", "rating": "up", "note": "x" * 2001}, 400, "note"),
        ({"thread_id": T1, "message_id": "h1", "rating": "up"}, 404, "no answered turn"),
        ({"thread_id": T2, "message_id": "a1", "rating": "down"}, 404, "no answered turn"),
        ({"thread_id": GONE, "message_id": "a1", "rating": "down"}, 404, "no answered turn"),
        (["up"], 400, "JSON object"),
    ],
)
def test_bad_feedback_is_refused_on_one_line(body: Any, status: int, needle: str) -> None:
    client, _, server = _client()
    response = client.post("/chat/api/feedback", json=body)
    assert response.status_code == status and needle in response.json()["detail"]
    assert server._store.search((FEEDBACK_NAMESPACE,)) == []


def test_an_unknown_thread_is_a_one_line_404() -> None:
    response = _client()[0].get(f"/chat/api/threads/{GONE}/turns")
    assert response.status_code == 404
    assert response.json()["detail"] == f"no conversation '{GONE}' on this server (deleted?)"


def test_feedback_record_rejects_an_unknown_rating() -> None:
    with pytest.raises(ValueError, match="rating"):
        feedback_record(T1, thread_turns(HISTORY)[0], "sideways", "")


def test_reground_ui_serves_the_same_graphs_and_page_as_the_repositorys_langgraph_json() -> None:
    repo = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
    served = langgraph_config()
    assert served["graphs"] == repo["graphs"] and served["http"]["app"] == repo["http"]["app"]
    # CORS differs by design: plain `langgraph dev` lets LangGraph Studio in, the page's own server no other origin
    assert repo["http"]["cors"]["allow_origins"] == ["https://smith.langchain.com"]
    assert served["http"]["cors"] == {"allow_origins": []}


# --- the page's own rules: a regression in app.js or index.html fails here, before a browser runs ---------------

SCRIPT = (STATIC / "app.js").read_text(encoding="utf-8")
HTML = (STATIC / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("sink", ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                                  "new Function", "srcdoc"])  # fmt: skip
def test_the_script_never_parses_text_as_html_or_code(sink: str) -> None:
    assert sink not in SCRIPT


def test_the_page_loads_nothing_remote_and_has_no_inline_code() -> None:
    for asset in STATIC.iterdir():
        text = asset.read_text(encoding="utf-8")
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), f"{asset.name} names a remote URL"
    assert "<style" not in HTML and " style=" not in HTML
    assert not re.search(r"<script(?![^>]*\bsrc=)", HTML), "inline <script>"
    assert not re.search(r"\son[a-z]+=", HTML), "inline event handler"
