"""The page's server answers its own origin and host only, and keeps a narrower policy's conversations to it: the
SameOrigin and ScopeGuard middleware in front of stand-in API routes (the real server: tests/integration/
test_web_origin_server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from reground.web.guard import ScopeGuard, bad_id, too_deep
from reground.web.origin import SameOrigin, host_allowed, same_origin
from reground.web.policy import policy_from_json, scope_fields

PAGE = "http://testserver"
NARROW = policy_from_json({"collections": {"hr": {"scope": {"country": ["DE"]}}}})
DE, US = (f"0195c6a4-1e5f-7000-8000-{n:012x}" for n in (0xDE, 0x05))  # a DE thread and a US one
RUNS = {DE: [{"collection": "hr", "metadata_filter": {"country": "DE"}, "escalation": "x"}],
        US: [{"collection": "hr", "metadata_filter": {"country": "DE"}},
             {"collection": "hr", "metadata_filter": {"country": "US"}}]}  # fmt: skip


async def run_contexts(thread_id: str) -> list[dict[str, Any]] | None:
    return RUNS.get(thread_id)


def _app(policy: Any = None, **origin: Any) -> tuple[TestClient, list[dict[str, Any]]]:
    reached: list[dict[str, Any]] = []

    async def api(request: Request) -> JSONResponse:
        body = await request.body()
        reached.append({"method": request.method, "path": request.url.path, "body": json.loads(body or b"null")})
        if request.url.path == "/threads/search":
            return JSONResponse([{"thread_id": DE}, {"thread_id": US}], headers={"access-control-allow-origin": "*"})
        if request.url.path == "/store/items/search":
            rated = [{"namespace": ["reground-feedback", t], "key": "a1"} for t in (DE, US)]
            return JSONResponse({"items": [*rated, {"namespace": ["elsewhere"], "key": "k"}]})
        return JSONResponse({"ok": True}, headers={"access-control-allow-origin": "*"})

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    middleware = [Middleware(SameOrigin, **origin), Middleware(ScopeGuard, policy=policy, runs=run_contexts)]
    app = Starlette(routes=[Route("/{rest:path}", api, methods=methods)], middleware=middleware)
    return TestClient(app), reached


@pytest.mark.parametrize("method", ["GET", "POST", "PATCH", "DELETE", "OPTIONS"])
def test_another_origin_is_refused_on_reads_and_writes(method: str) -> None:
    client, reached = _app()
    for origin in ("http://evil.example", "http://testserver:8080", "null", "https://testserver.evil.example"):
        response = client.request(
            method, f"/threads/{DE}", headers={"origin": origin, "content-type": "application/json"}
        )
        assert response.status_code == 403, (origin, response.text)
        assert "this server answers only its own page" in response.json()["detail"]
        assert "access-control-allow-origin" not in response.headers
    assert reached == []


def test_the_pages_own_origin_and_an_allowed_one_pass_without_a_wildcard() -> None:
    client, reached = _app(origins=["https://studio.example"])
    for origin in (PAGE, "http://TESTSERVER:80", "https://studio.example/"):
        response = client.get("/threads/search", headers={"origin": origin})
        assert response.status_code == 200, origin
        assert response.headers.get("access-control-allow-origin") != "*"
    assert len(reached) == 3


def test_a_foreign_host_is_refused_as_dns_rebinding() -> None:
    client, reached = _app()
    for host in ("rebind.attacker.example", "testserver:81", "testserver.attacker.example", ""):
        response = client.get("/threads/search", headers={"host": host})
        assert response.status_code == 403 and "Host header" in response.json()["detail"], host
    assert reached == []
    assert _app(hosts=["chat.example"])[0].get("/ok", headers={"host": "chat.example"}).status_code == 200


@pytest.mark.parametrize(
    ("host", "server", "ok"),
    [
        ("127.0.0.1:2025", ("127.0.0.1", 2025), True),
        ("localhost:2025", ("127.0.0.1", 2025), True),
        ("[::1]:2025", ("::1", 2025), True),
        ("localhost:2025", ("192.168.1.5", 2025), False),  # localhost is not a LAN address
        ("127.0.0.1:2026", ("127.0.0.1", 2025), False),
        ("evil.example:2025", ("127.0.0.1", 2025), False),
        ("api", ("api", None), True),  # the server's own in-process client
        ("127.0.0.1:x", ("127.0.0.1", 2025), False),
    ],
)
def test_host_names_the_bound_address(host: str, server: tuple[str, int | None], ok: bool) -> None:
    assert host_allowed(host, server, "http", frozenset()) is ok


def test_same_origin_compares_name_and_port_with_the_schemes_default() -> None:
    assert same_origin("https://chat.example", "chat.example")  # behind a TLS proxy
    assert same_origin("http://127.0.0.1:2025", "127.0.0.1:2025")
    assert not same_origin("http://127.0.0.1:2026", "127.0.0.1:2025")
    assert not same_origin("file://", "127.0.0.1:2025")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""])
def test_a_write_that_is_not_json_is_refused(content_type: str) -> None:
    client, reached = _app()
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/threads/search", content=b'{"limit": 3}', headers=headers)
    assert response.status_code == 415 and "application/json" in response.json()["detail"]
    assert reached == []
    assert client.delete(f"/threads/{DE}").status_code == 200, "a write without a body needs no type"


def test_a_cross_site_request_without_origin_is_refused_unless_a_person_navigates() -> None:
    client, _ = _app()
    no_cors = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
    assert client.get(f"/threads/{DE}/state", headers=no_cors).status_code == 403
    navigate = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    assert client.get("/chat", headers=navigate).status_code == 200


def test_a_conversation_from_a_wider_policy_is_unreadable_under_a_narrower_one() -> None:
    client, reached = _app(NARROW)
    listed = client.post("/threads/search", json={"limit": 10, "select": ["metadata"]})
    assert [t["thread_id"] for t in listed.json()] == [DE]
    assert reached[-1]["body"]["select"] == ["metadata", "thread_id"], "the search returns ids to check"
    for method, path in (("GET", f"/threads/{US}"), ("GET", f"/threads/{US}/state"), ("POST", f"/threads/{US}/history"),
                         ("GET", f"/threads/{US}/runs"), ("GET", f"/chat/api/threads/{US}/turns"),
                         ("PATCH", f"/threads/{US}"), ("DELETE", f"/threads/{US}")):  # fmt: skip
        response = client.request(method, path, json={"metadata": {"title": "x"}} if method == "PATCH" else None)
        assert response.status_code == 404 and "open to this page" in response.json()["detail"], path
    ratings = client.post("/store/items/search", json={"namespace_prefix": ["reground-feedback"]}).json()["items"]
    assert ratings == [{"namespace": ["reground-feedback", DE], "key": "a1"}], "ratings of open conversations only"
    assert client.get("/store/items", params={"namespace": f"reground-feedback.{US}", "key": "a1"}).status_code == 403
    assert client.get("/store/items", params={"namespace": f"reground-feedback.{DE}", "key": "a1"}).status_code == 200
    for thread_id in (US, "", "x"):
        rating = {"thread_id": thread_id, "message_id": "a1", "rating": "up"}
        assert client.post("/chat/api/feedback", json=rating).status_code == 404, thread_id
    assert client.get(f"/threads/{DE}/state").status_code == 200
    assert all(US not in r["path"] for r in reached)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/store/items"), ("POST", "/store/namespaces"), ("POST", "/threads/count"), ("GET", "/runs/crons/x")],
)
def test_reads_the_page_does_not_need_are_refused_under_a_policy(method: str, path: str) -> None:
    client, reached = _app(NARROW)
    assert client.request(method, path, json={} if method == "POST" else None).status_code == 403
    assert reached == []


@pytest.mark.parametrize(
    ("method", "path", "body", "needle"),
    [
        ("PATCH", f"/threads/{DE}", {"metadata": {"app": "hidden"}}, "title"),
        ("PATCH", f"/threads/{DE}", {"metadata": {"collection": "other"}}, "title"),
        ("POST", "/threads", {"metadata": {"app": "x", "metadata_filter": {"country": "US"}}}, "app, title"),
        ("POST", f"/threads/{DE}/runs/stream",
         {"assistant_id": "reground", "context": {"collection": "hr", "metadata_filter": {"country": "DE"}},
          "metadata": {"collection": "other"}}, "metadata"),
    ],
)  # fmt: skip
def test_metadata_cannot_hide_or_relabel_a_conversation(method: str, path: str, body: Any, needle: str) -> None:
    client, reached = _app(NARROW)
    response = client.request(method, path, json=body)
    assert response.status_code == 403 and needle in response.json()["detail"]
    assert reached == []


def test_a_runs_metadata_is_stamped_with_the_scope_it_runs_in_with_or_without_a_policy() -> None:
    forged = {"collection": "other", "metadata_filter": {"country": "XX"}, "note": "kept"}
    context: dict[str, Any] = {"collection": "hr", "metadata_filter": {"country": "DE"}}
    run = {"assistant_id": "reground", "context": context}
    client, reached = _app()
    assert client.post(f"/threads/{DE}/runs/stream", json={**run, "metadata": forged}).status_code == 200
    assert reached[-1]["body"]["metadata"] == {**forged, **context}
    malformed = {**run, "context": {"collection": "hr", "metadata_filter": ["DE"]}}
    assert client.post(f"/threads/{DE}/runs/stream", json=malformed).status_code == 200, "the graph says what is wrong"
    assert reached[-1]["body"]["metadata"]["metadata_filter"] == ["DE"]
    client, reached = _app(NARROW)
    assert client.post(f"/threads/{DE}/runs/stream", json=run).status_code == 200
    assert reached[-1]["body"]["metadata"] == run["context"]


def test_bad_ids_and_deep_json_are_4xx_not_server_errors() -> None:
    for policy in (None, NARROW):
        client, reached = _app(policy)
        for path in ("/threads/not-a-uuid", f"/threads/{DE}/runs/nope", "/chat/api/threads/x/turns"):
            response = client.get(path)
            assert response.status_code == 404 and "not a UUID" in response.json()["detail"], path
        deep = b"[" * 100_000 + b"]" * 100_000
        for path in ("/threads", f"/threads/{DE}/runs/stream", "/chat/api/feedback", "/threads/search"):
            response = client.post(path, content=deep, headers={"content-type": "application/json"})
            assert response.status_code == 400 and "nests deeper" in response.json()["detail"], path
        assert reached == []
    assert bad_id("/threads/search") is None and bad_id(f"/threads/{DE}/runs/stream") is None
    assert too_deep([[[1]]], limit=2) and not too_deep({"a": [1]}, limit=2)


def test_a_collections_scope_fields_are_read_from_its_metadata() -> None:
    rows = [
        {"country": "DE", "region": "EU", "topic": "leave", "team": "all"},
        {"country": "UK", "region": "EU", "topic": "pay", "team": "sales"},
        {"country": "all", "region": "all", "topic": "pay", "team": "it,sales"},
        {"country": "US", "region": "NA", "topic": "leave", "team": "it"},
        {"country": "DE", "region": "EU", "topic": "travel", "team": "it"},
    ]
    # the region follows from the country; a topic is never 'all' nor a list
    assert scope_fields(rows) == ["country", "team"]


def test_reground_ui_writes_cors_naming_only_the_allowed_origins() -> None:
    from reground.web.server import langgraph_config

    assert langgraph_config()["http"]["cors"] == {"allow_origins": []}  # type: ignore[index]
    studio = langgraph_config(["https://smith.langchain.com"])["http"]["cors"]  # type: ignore[index]
    assert studio["allow_origins"] == ["https://smith.langchain.com"] and "*" not in studio["allow_origins"]


def test_without_a_policy_a_large_body_passes_under_a_policy_it_is_refused() -> None:
    documents = {"input": {"documents": [{"doc_id": "big", "text": "x" * (2 << 20)}]}, "assistant_id": "ingest"}
    client, reached = _app()
    assert client.post("/runs/wait", json=documents).status_code == 200, "the ingest graph may be sent documents"
    assert reached[-1]["body"]["input"]["documents"][0]["text"] == documents["input"]["documents"][0]["text"]
    assert _app(NARROW)[0].post(f"/threads/{DE}/runs/stream", json=documents).status_code == 413


def test_the_served_cors_list_is_the_allow_list_and_a_wildcard_is_none() -> None:
    from reground.web.origin import configured_origins

    studio = json.dumps({"cors": {"allow_origins": ["https://smith.langchain.com/", "*"]}})
    assert configured_origins(studio) == frozenset({"https://smith.langchain.com"})
    assert configured_origins("") == frozenset() and configured_origins("not json") == frozenset()
    assert configured_origins(json.dumps({"app": "x"})) == frozenset()


def test_this_repositorys_config_lets_studio_in_and_no_wildcard() -> None:
    served = json.loads(Path(__file__).resolve().parents[2].joinpath("langgraph.json").read_text())["http"]
    assert served["cors"]["allow_origins"] == ["https://smith.langchain.com"]
    from reground.web.origin import configured_origins

    assert configured_origins(json.dumps(served)) == frozenset({"https://smith.langchain.com"})
