"""The server-side scope guard: with a policy, the API answers only what the chat page needs, in the policy's scope.

`langgraph.json`'s custom app wraps every route of the LangGraph server, the API included, so this middleware
sees each request before the server does. Without a policy it passes everything through (Studio, SDK clients and
backends that set their own scope keep working). With one:
- reads (GET, and the POST searches) pass;
- a run may only start as `POST /threads/{id}/runs/stream` on the `reground` graph, without `config`, with a
  `command` that only resumes; its `context` must be one the policy grants and is replaced by the enforced one
  (reground/web/policy.py), so a page whose requests were edited cannot widen its scope;
- threads may be created, renamed (metadata) and deleted;
- everything else that writes (stateless runs, crons, assistants, the store, thread state, MCP, A2A) is refused,
  and so is the API's websocket (it can start runs too).
A refusal is a 403 with one line saying why; no run starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from reground.tools.tuning.web import CHAT_PAGE
from reground.web.policy import ScopePolicy, ScopeViolation

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

GRAPH_ID = "reground"  # the only graph the page runs (langgraph.json's conversation graph)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = CHAT_PAGE.max_body_bytes
RUN_KEYS = frozenset(
    {
        "assistant_id",
        "input",
        "command",
        "context",
        "stream_mode",
        "metadata",
        "multitask_strategy",
        "on_disconnect",
        "if_not_exists",
        "stream_resumable",
        "stream_subgraphs",
        "durability",
    }
)
THREAD_KEYS = frozenset({"metadata"})
_ID = r"[^/]+"
POLICY_VIOLATION = 1008  # fact: the WebSocket close code for a request the server's policy refuses (RFC 6455)

Check = Callable[[Any, ScopePolicy], Any]  # returns the (possibly rewritten) body, or raises ScopeViolation


def _run(body: Any, policy: ScopePolicy) -> Any:
    if not isinstance(body, dict):
        raise ScopeViolation("a run request must be a JSON object")
    extra = sorted(set(body) - RUN_KEYS)
    if extra:
        raise ScopeViolation(f"the chat page may not send {', '.join(extra)} with a run")
    if body.get("assistant_id") != GRAPH_ID:
        raise ScopeViolation(f"the chat page runs only the {GRAPH_ID!r} graph; got {body.get('assistant_id')!r}")
    command = body.get("command")
    if command is not None and (not isinstance(command, dict) or set(command) - {"resume"}):
        raise ScopeViolation("a run's command may only resume a paused turn")
    return {**body, "context": policy.enforce(body.get("context") or {})}


def _thread(body: Any, policy: ScopePolicy) -> Any:
    if body is None:
        return {}
    if not isinstance(body, dict) or set(body) - THREAD_KEYS:
        raise ScopeViolation("the chat page may only set a thread's metadata")
    return body


# (method, path pattern, what to check) of every write the page makes; None: no body check.
ALLOWED: tuple[tuple[str, re.Pattern[str], Check | None], ...] = tuple(
    (method, re.compile(f"^{pattern}$"), check)
    for method, pattern, check in (
        ("POST", r"/threads", _thread),
        ("PATCH", rf"/threads/{_ID}", _thread),
        ("DELETE", rf"/threads/{_ID}", None),
        ("POST", rf"/threads/{_ID}/runs/stream", _run),
        ("POST", rf"/threads/{_ID}/runs/{_ID}/cancel", None),
        ("POST", r"/threads/search", None),
        ("POST", r"/threads/count", None),
        ("POST", rf"/threads/{_ID}/history", None),
        ("POST", r"/assistants/search", None),
        ("POST", r"/store/items/search", None),
        ("POST", r"/store/namespaces", None),
        ("POST", r"/chat/api/feedback", None),  # the page's own route validates its body
    )
)


def route_check(method: str, path: str) -> tuple[bool, Check | None]:
    """(allowed, body check) for a write request under a policy."""
    for allowed_method, pattern, check in ALLOWED:
        if method == allowed_method and pattern.match(path):
            return True, check
    return False, None


class ScopeGuard:
    """ASGI middleware enforcing a ScopePolicy on the LangGraph API (pass-through when the policy is None)."""

    def __init__(self, app: ASGIApp, policy: ScopePolicy | None = None) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.policy is not None and scope["type"] == "websocket":
            await _refuse_websocket(receive, send)  # the API's websocket can start runs: not the page's way
            return
        if scope["type"] != "http" or self.policy is None or scope["method"] in READ_METHODS:
            await self.app(scope, receive, send)
            return
        path = _path(scope)
        allowed, check = route_check(scope["method"], path)
        if not allowed:
            await _refuse(send, f"{scope['method']} {path} is not open while the chat page's scope policy is on")
            return
        if check is None:
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        if raw is None:
            await _refuse(send, "request body too large", status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            return
        try:
            body = json.loads(raw) if raw.strip() else None
            checked = check(body, self.policy)
        except ValueError as exc:  # ScopeViolation is a ValueError too; invalid JSON is one
            message = str(exc) if isinstance(exc, ScopeViolation) else "the request body is not valid JSON"
            await _refuse(send, message)
            return
        if checked is not body:
            raw = json.dumps(checked).encode()
        await self.app(_with_length(scope, len(raw)), _replay(raw, receive), send)


def _path(scope: Scope) -> str:
    """The route's path: without the root path an in-process client mounts it under."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    return path.rstrip("/") or "/"


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later: the client's disconnect

    return replay


def _with_length(scope: Scope, length: int) -> Scope:
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": "closed by the scope policy"})


async def _refuse(send: Send, detail: str, *, status: int = HTTPStatus.FORBIDDEN) -> None:
    body = json.dumps({"detail": " ".join(detail.split())}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
