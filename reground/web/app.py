"""The chat page, served by the LangGraph server itself (`langgraph.json`: `"http": {"app": "reground.web.app:app"}`).

Routes, beside the LangGraph API on the same origin:
- `GET /chat`: the page (plain HTML, CSS and JS shipped in reground/web/static; nothing is fetched elsewhere);
- `GET /chat/api/config`: the collections and scope choices the page may offer, and whether a policy binds them;
- `GET /chat/api/threads/{id}/turns`: a thread's answered turns with their results, scope and rating;
- `POST /chat/api/feedback`: a thumbs up/down and note on one reply, stored in the server's LangGraph store.
Conversations themselves go through the LangGraph API (threads, runs/stream), which the ScopeGuard middleware
keeps inside the scope policy when one is set (`$REGROUND_UI_POLICY`), reads included; the SameOrigin middleware
answers only the page's own origin and host (reground/web/origin.py).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from reground.tools.tuning.web import CHAT_PAGE
from reground.web.guard import GRAPH_ID, ScopeGuard, is_uuid
from reground.web.origin import SameOrigin
from reground.web.policy import ScopePolicy, policy_from_env
from reground.web.turns import FEEDBACK_NAMESPACE, MAX_NOTE_CHARS, RATINGS, feedback_record, thread_turns

STATIC = Path(__file__).resolve().parent / "static"
HISTORY_LIMIT = CHAT_PAGE.history_checkpoints
SCOPE_FIELDS_ENV = "REGROUND_UI_SCOPE_FIELDS"  # without a policy: the fields the page offers (comma-separated)
# No remote loads, no inline script, no plugins, no framing: document text can only ever be text.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


class Backend(Protocol):
    """What the page's routes need from the server: a thread's checkpoint history and the LangGraph store."""

    async def history(self, thread_id: str) -> list[dict[str, Any]]: ...

    async def store(self) -> Any: ...

    async def run_contexts(self, thread_id: str) -> list[dict[str, Any]] | None: ...


class LangGraphServer:
    """The running LangGraph server, reached in-process (the SDK's loopback client and the server's own store)."""

    def __init__(self) -> None:
        self._client: Any = None

    def _sdk(self) -> Any:
        if self._client is None:
            from langgraph_sdk import get_client

            self._client = get_client(url=None)  # in-process: only once the server is up
        return self._client

    async def history(self, thread_id: str) -> list[dict[str, Any]]:
        return list(await self._sdk().threads.get_history(thread_id, limit=HISTORY_LIMIT))

    async def run_contexts(self, thread_id: str) -> list[dict[str, Any]] | None:
        """The context each run of the thread ran with, as the server keeps it; None: no such thread."""
        try:
            runs = await self._sdk().runs.list(thread_id, limit=HISTORY_LIMIT)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == httpx.codes.NOT_FOUND:
                return None
            raise
        return [dict((run.get("kwargs") or {}).get("context") or {}) for run in runs]

    async def store(self) -> Any:
        from langgraph_api.store import get_store

        return await get_store()


def open_choices(data_dir: str | None = None) -> ScopePolicy:
    """Without a policy: every collection of the data dir, with the values its chunks hold in its scope fields
    ($REGROUND_UI_SCOPE_FIELDS, else the fields each collection's metadata scopes its documents by)."""
    from reground.web.policy import policy_from_data

    fields = [f.strip() for f in os.environ.get(SCOPE_FIELDS_ENV, "").split(",") if f.strip()]
    return policy_from_data(data_dir, fields or None)


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": " ".join(detail.split())}, status_code=status)


def create_app(
    policy: ScopePolicy | None,
    *,
    backend: Backend | None = None,
    choices: Callable[[], ScopePolicy] | None = None,
) -> Starlette:
    """The page's app. `policy`: enforced on the API when given; `choices`: what the page offers without one."""
    server: Backend = backend or LangGraphServer()
    offered: list[ScopePolicy] = []

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    async def config(request: Request) -> Response:
        if policy is None and not offered:
            offered.append(await run_in_threadpool(choices or open_choices))
        shown = (policy or offered[0]).as_json()
        return JSONResponse({"graph": GRAPH_ID, "enforced": policy is not None, "collections": shown["collections"]})

    async def answered(thread_id: str) -> list[dict[str, Any]] | None:
        """The thread's answered turns; None when the server has no such thread."""
        try:
            return thread_turns(await server.history(thread_id))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == httpx.codes.NOT_FOUND:
                return None
            raise

    async def turns(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        found = await answered(thread_id)
        if found is None:
            return _error(HTTPStatus.NOT_FOUND, f"no conversation {thread_id!r} on this server (deleted?)")
        store = await server.store()
        ratings = {
            item.key: item.value
            for item in await store.asearch((FEEDBACK_NAMESPACE, thread_id), limit=CHAT_PAGE.ratings_per_thread)
        }
        for turn in found:
            rated = ratings.get(turn["message_id"])
            turn["feedback"] = {"rating": rated["rating"], "note": rated["note"]} if rated else None
        return JSONResponse({"thread_id": thread_id, "turns": found})

    async def feedback(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(HTTPStatus.BAD_REQUEST, "the feedback must be a JSON object")
        if not isinstance(body, dict):
            return _error(HTTPStatus.BAD_REQUEST, "the feedback must be a JSON object")
        thread_id, message_id = str(body.get("thread_id", "")), str(body.get("message_id", ""))
        rating, note = body.get("rating"), body.get("note") or ""
        if rating not in RATINGS:
            return _error(HTTPStatus.BAD_REQUEST, f"rating must be one of {', '.join(RATINGS)}")
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
            return _error(HTTPStatus.BAD_REQUEST, f"the note must be text of at most {MAX_NOTE_CHARS} characters")
        found = {t["message_id"]: t for t in (await answered(thread_id) or [])} if is_uuid(thread_id) else {}
        if message_id not in found:
            return _error(HTTPStatus.NOT_FOUND, f"no answered turn {message_id!r} in thread {thread_id!r}")
        record = feedback_record(thread_id, found[message_id], rating, note)
        store = await server.store()
        await store.aput((FEEDBACK_NAMESPACE, thread_id), message_id, record)
        return JSONResponse({"stored": True, "rating": rating, "note": record["note"]})

    routes = [
        Route("/chat", page, methods=["GET"]),
        Route("/chat/", page, methods=["GET"]),
        Route("/chat/api/config", config, methods=["GET"]),
        Route("/chat/api/threads/{thread_id}/turns", turns, methods=["GET"]),
        Route("/chat/api/feedback", feedback, methods=["POST"]),
        Mount("/chat/static", StaticFiles(directory=STATIC), name="static"),
    ]
    # Outermost first: another origin or host is refused before anything else reads the request.
    middleware = [
        Middleware(SameOrigin),
        Middleware(SecurityHeaders),
        Middleware(ScopeGuard, policy=policy, runs=server.run_contexts),
    ]
    return Starlette(routes=routes, middleware=middleware)


Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


class SecurityHeaders:
    """The page's headers (CSP and friends) on every /chat response; the API's responses are left as they are."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/chat"):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# What langgraph.json mounts: the policy named by $REGROUND_UI_POLICY (a bad file stops the server with its reason).
app = create_app(policy_from_env())
