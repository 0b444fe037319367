"""The page's server (`langgraph dev` with the chat page, started as `reground ui` starts it) against requests from
another origin or host, a narrower policy after a restart, and forged scope claims; no LLM server (the extract
default answers without one).

A conversation is held first with no policy (the widest: DE and US), then the server restarts on the same threads
with a policy that opens DE only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from reground.tools.adapters.local_server import free_port
from reground.tools.tuning.stores import INGEST

from reground.demo import DEMO_COLLECTION, demo_corpus_path
from reground.web.server import PageServer, start_page_server

pytestmark = pytest.mark.integration

QUESTION = "How many days of annual leave do I get?"
DE = {"collection": DEMO_COLLECTION, "metadata_filter": {"country": "DE", "employment_type": "full-time"}}
US = {"collection": DEMO_COLLECTION, "metadata_filter": {"country": "US", "employment_type": "full-time"}}
NARROW = {"collections": {DEMO_COLLECTION: {"scope": {"country": ["DE"], "employment_type": ["full-time"]}}}}
FORGED = {"collection": "hr-executives", "metadata_filter": {"country": "CH"}}
TURN_TIMEOUT_S = 300.0  # the first turn loads the embedding model on 2 shared cores


class Site:
    """The data dir, the server's working dir and the running server."""

    def __init__(self, root: Path) -> None:
        self.root, self.data, self.work = root, root / "data", root / "ui"
        self.server: PageServer | None = None
        self.port = free_port()

    def start(self, policy: dict[str, Any] | None) -> str:
        env = {"REGROUND_DATA_DIR": str(self.data), "REGROUND_STATE_DIR": str(self.root / "state")}
        if policy is not None:
            path = self.root / "policy.json"
            path.write_text(json.dumps(policy), encoding="utf-8")
            env["REGROUND_UI_POLICY"] = str(path)
        self.server = start_page_server(self.work, port=self.port, env=env)
        return self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    site = Site(tmp_path_factory.mktemp("web-origin"))
    store = PassageStore.open(DEMO_COLLECTION, data_dir=site.data, create=True)
    assert not ingest([demo_corpus_path()], store, progress=False, max_tokens=INGEST.chunk_tokens).errors
    yield site
    site.stop()


def ask(url: str, thread_id: str, scope: dict[str, Any], **extra: Any) -> httpx.Response:
    run = {"assistant_id": "reground", "input": {"messages": [{"role": "user", "content": QUESTION}]},
           "context": scope, "stream_mode": ["values"], **extra}  # fmt: skip
    return httpx.post(f"{url}/threads/{thread_id}/runs/stream", json=run, timeout=TURN_TIMEOUT_S)


def new_thread(url: str, title: str) -> str:
    response = httpx.post(f"{url}/threads", json={"metadata": {"app": "reground-chat", "title": title}}, timeout=30)
    response.raise_for_status()
    return str(response.json()["thread_id"])


def turns(url: str, thread_id: str) -> httpx.Response:
    return httpx.get(f"{url}/chat/api/threads/{thread_id}/turns", timeout=60)


def attacks(url: str, thread_id: str) -> list[tuple[str, str, dict[str, str], Any]]:
    """(method, path, headers, body) a page on another origin, a rebound DNS name or a simple form would send."""
    port = url.rsplit(":", 1)[1]
    foreign = [{"origin": "http://evil.example"}, {"origin": f"http://127.0.0.1:{free_port()}"},
               {"host": f"rebind.attacker.example:{port}"}]  # fmt: skip
    routes = [
        ("GET", f"/threads/{thread_id}/state", None),
        ("POST", "/threads/search", {"limit": 10}),
        ("POST", f"/threads/{thread_id}/history", {"limit": 1}),
        ("GET", f"/chat/api/threads/{thread_id}/turns", None),
        ("GET", "/chat/api/config", None),
        ("PATCH", f"/threads/{thread_id}", {"metadata": {"title": "renamed by another site"}}),
        ("POST", "/chat/api/feedback", {"thread_id": thread_id, "message_id": "x", "rating": "down"}),
        ("DELETE", f"/threads/{thread_id}", None),
        ("POST", "/threads", {"metadata": {"app": "reground-chat", "title": "planted"}}),
    ]
    return [(m, p, {**h, "content-type": "application/json"}, b) for h in foreign for m, p, b in routes]


def check_refusals(url: str, thread_id: str) -> None:
    for method, path, headers, body in attacks(url, thread_id):
        content = None if body is None else json.dumps(body)
        response = httpx.request(method, f"{url}{path}", headers=headers, content=content, timeout=30)
        assert response.status_code == 403, (method, path, headers, response.text)
        assert response.headers.get("access-control-allow-origin") is None
        assert "\n" not in response.json()["detail"]
    for path, body in (("/threads/search", {"limit": 3}), (f"/threads/{thread_id}", {"metadata": {"title": "t"}}),
                       ("/threads", {"metadata": {"title": "planted"}})):  # fmt: skip
        method = "PATCH" if path.endswith(thread_id) else "POST"
        response = httpx.request(method, f"{url}{path}", content=json.dumps(body),
                                 headers={"content-type": "text/plain"}, timeout=30)  # fmt: skip
        assert response.status_code == 415, (path, response.text)
    preflight = httpx.options(f"{url}/threads/search", timeout=30, headers={
        "origin": "http://evil.example", "access-control-request-method": "POST"})  # fmt: skip
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    # nothing changed: the thread keeps its title, no planted thread
    listed = httpx.post(f"{url}/threads/search", json={"limit": 100}, timeout=30).json()
    titles = {t["metadata"].get("title") for t in listed}
    assert "planted" not in titles and "renamed by another site" not in titles and thread_id in str(listed)


def test_a_wider_conversation_is_unreadable_under_a_narrower_policy_and_claims_never_relabel(site: Site) -> None:
    url = site.start(None)  # no policy: any scope may be asked
    de, us = new_thread(url, "leave in Germany"), new_thread(url, "leave in the US")
    patched = httpx.patch(f"{url}/threads/{de}", json={"metadata": FORGED}, timeout=30)  # no policy: a patch passes
    assert patched.status_code == 200
    assert ask(url, de, DE, metadata=FORGED).status_code == 200  # the run claims another scope
    assert ask(url, us, US).status_code == 200
    shown = turns(url, de).json()["turns"]
    assert [t["scope"] for t in shown] == [DE], "the page shows the scope the turn ran in, not the claimed one"
    rated = {"thread_id": de, "message_id": shown[0]["message_id"], "rating": "up", "note": "right"}
    assert httpx.post(f"{url}/chat/api/feedback", json=rated, timeout=30).status_code == 200
    item = httpx.get(f"{url}/store/items", params={"namespace": f"reground-feedback.{de}", "key": rated["message_id"]},
                     timeout=30).json()  # fmt: skip
    assert (item["value"]["collection"], item["value"]["metadata_filter"]) == (DE["collection"], DE["metadata_filter"])
    us_turn = turns(url, us).json()["turns"][0]["message_id"]
    rating = {"thread_id": us, "message_id": us_turn, "rating": "down"}
    assert httpx.post(f"{url}/chat/api/feedback", json=rating, timeout=30).status_code == 200
    check_refusals(url, us)
    site.stop()

    url = site.start(NARROW)  # the same threads, a policy that opens DE only
    listed = [t["thread_id"] for t in httpx.post(f"{url}/threads/search", json={"limit": 100}, timeout=30).json()]
    assert de in listed and us not in listed
    for method, path, body in (("GET", f"/threads/{us}", None), ("GET", f"/threads/{us}/state", None),
                               ("POST", f"/threads/{us}/history", {"limit": 5}), ("GET", f"/threads/{us}/runs", None),
                               ("GET", f"/chat/api/threads/{us}/turns", None),
                               ("PATCH", f"/threads/{us}", {"metadata": {"title": "x"}}),
                               ("DELETE", f"/threads/{us}", None)):  # fmt: skip
        response = httpx.request(method, f"{url}{path}", json=body, timeout=30)
        assert response.status_code == 404 and "open to this page" in response.json()["detail"], (path, response.text)
    assert ask(url, us, DE).status_code == 404, "no turn is added to a closed conversation"
    ratings = httpx.post(f"{url}/store/items/search", json={"namespace_prefix": ["reground-feedback"]}, timeout=30)
    assert [i["namespace"][1] for i in ratings.json()["items"]] == [de], "a closed conversation's rating is not read"
    for thread_id, status in ((de, 200), (us, 403)):
        params = {"namespace": f"reground-feedback.{thread_id}", "key": rated["message_id"]}
        assert httpx.get(f"{url}/store/items", params=params, timeout=30).status_code == status
    assert [t["scope"] for t in turns(url, de).json()["turns"]] == [DE]
    for claim in ({"metadata": FORGED}, {"metadata": {"app": "elsewhere"}}):
        assert httpx.patch(f"{url}/threads/{de}", json=claim, timeout=30).status_code == 403, claim
    assert ask(url, de, DE, metadata=FORGED).status_code == 403
    check_refusals(url, de)
    site.stop()
    url = site.start(None)  # nothing was deleted while it was closed
    assert httpx.get(f"{url}/threads/{us}/state", timeout=30).status_code == 200
