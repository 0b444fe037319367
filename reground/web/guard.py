"""The server-side scope guard: with a policy, the API answers only what the chat page needs, in the policy's scope.

`langgraph.json`'s custom app wraps every route of the LangGraph server, the API included, so this middleware
sees each request before the server does. In every mode it answers a malformed id (a thread or run id that is not a
UUID) with a 404 and a JSON body that does not parse or nests deeper than any request needs with a 400, and it
stamps a run's `metadata` with the scope the run is given (`collection`, `metadata_filter` from its context), so the
scope a turn records, shows and stores with a rating is the one it ran in, never one a request claimed. Without a
policy it otherwise passes everything through (Studio and SDK clients keep working). With one:
- a conversation is readable and writable only while the policy allows the scope of every run it holds (the runs'
  own context, kept by the server); another is a 404, and `/threads/search` leaves it out;
- the store answers only the ratings of open conversations (they hold questions, replies and notes); other reads
  outside the page's needs (crons, thread counts, store namespaces) are refused;
- a run may only start as `POST /threads/{id}/runs/stream` on the `reground` graph, without `config` or
  `metadata`, with a `command` that only resumes; its `context` must be one the policy grants and is replaced by
  the enforced one (reground/web/policy.py), so a page whose requests were edited cannot widen its scope;
- threads may be created (metadata: `app`, `title`), renamed (metadata: `title` only, so a patch cannot hide or
  relabel a conversation) and deleted;
- everything else that writes (stateless runs, crons, assistants, the store, thread state, MCP, A2A) is refused,
  and so is the API's websocket (it can start runs too).
A refusal is one line saying why; no run starts.
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from reground.tools.tuning.web import CHAT_PAGE
from reground.web.origin import refuse
from reground.web.policy import ScopePolicy, ScopeViolation
from reground.web.turns import FEEDBACK_NAMESPACE

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
RunContexts = Callable[[str], Awaitable[list[dict[str, Any]] | None]]  # a thread's runs' contexts; None: no thread

GRAPH_ID = "reground"  # the only graph the page runs (langgraph.json's conversation graph)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MAX_BODY_BYTES = CHAT_PAGE.max_body_bytes
MAX_JSON_DEPTH = CHAT_PAGE.max_json_depth
LOOPBACK_ROOT = "/noauth"  # the root path of the server's own in-process client (langgraph_sdk's loopback)
SCOPE_KEYS = ("collection", "metadata_filter")
RUN_KEYS = frozenset(
    {
        "assistant_id",
        "input",
        "command",
        "context",
        "stream_mode",
        "multitask_strategy",
        "on_disconnect",
        "if_not_exists",
        "stream_resumable",
        "stream_subgraphs",
        "durability",
    }
)
CREATE_THREAD_KEYS = frozenset({"app", "title"})
RENAME_THREAD_KEYS = frozenset({"title"})
_ID = r"[^/]+"
POLICY_VIOLATION = 1008  # fact: the WebSocket close code for a request the server's policy refuses (RFC 6455)
# Words in an id's place that are routes, not ids.
ROUTE_WORDS = frozenset({"search", "count", "prune", "stream", "wait", "crons", "batch", "cancel"})
# Paths whose segment after the given one is an id: /threads/{id}, /threads/{id}/runs/{id}, /chat/api/threads/{id}.
ID_AFTER = frozenset({"threads", "runs"})
_THREAD = re.compile(r"^(?:/chat/api)?/threads/([^/]+)(?:/|$)")
_RUN_ROUTE = re.compile(rf"^(?:/threads/{_ID})?/runs(?:/stream|/wait)?$")
# Reads the page needs under a policy (besides a thread's own routes, which are checked against its scope).
OPEN_READS = tuple(
    re.compile(f"^{pattern}$")
    for pattern in (
        r"/",
        r"/ok",
        r"/info",
        r"/docs",
        r"/openapi\.json",
        r"/chat(?:/.*)?",
        r"/assistants(?:/.*)?",
        r"/store/items",
    )
)

Check = Callable[[Any, ScopePolicy], Any]  # returns the (possibly rewritten) body, or raises ScopeViolation


def _stamped(body: dict[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """The run with its metadata's scope keys set to the scope it runs in (the metadata the checkpoints keep)."""
    given = body.get("metadata")
    metadata: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    filter_ = context.get("metadata_filter")  # as given: a malformed one fails the run with its own message
    scope = {"collection": str(context.get("collection") or ""), "metadata_filter": {} if filter_ is None else filter_}
    return {**body, "metadata": {**metadata, **scope}}


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
    context = policy.enforce(body.get("context") or {})
    return _stamped({**body, "context": context}, context)


def _thread_metadata(body: Any, keys: frozenset[str], what: str) -> Any:
    if body is None:
        return {}
    if not isinstance(body, dict) or set(body) - {"metadata"}:
        raise ScopeViolation("the chat page may only set a thread's metadata")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or set(metadata) - keys or not all(isinstance(v, str) for v in metadata.values()):
        raise ScopeViolation(f"{what} may only set {', '.join(sorted(keys))} (text) in a thread's metadata")
    return body


def _new_thread(body: Any, policy: ScopePolicy) -> Any:
    return _thread_metadata(body, CREATE_THREAD_KEYS, "a new conversation")


def _rename(body: Any, policy: ScopePolicy) -> Any:
    return _thread_metadata(body, RENAME_THREAD_KEYS, "a rename")


def _search(body: Any, policy: ScopePolicy) -> Any:
    """A thread search that returns each thread's id (the guard drops the ones the policy does not open)."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise ScopeViolation("a thread search must be a JSON object")
    select = body.get("select")
    if isinstance(select, list) and "thread_id" not in select:
        return {**body, "select": [*select, "thread_id"]}
    return body


# (method, path pattern, what to check) of every write the page makes; None: no body check.
ALLOWED: tuple[tuple[str, re.Pattern[str], Check | None], ...] = tuple(
    (method, re.compile(f"^{pattern}$"), check)
    for method, pattern, check in (
        ("POST", r"/threads", _new_thread),
        ("PATCH", rf"/threads/{_ID}", _rename),
        ("DELETE", rf"/threads/{_ID}", None),
        ("POST", rf"/threads/{_ID}/runs/stream", _run),
        ("POST", rf"/threads/{_ID}/runs/{_ID}/cancel", None),
        ("POST", r"/threads/search", _search),
        ("POST", rf"/threads/{_ID}/history", None),
        ("POST", r"/assistants/search", None),
        ("POST", r"/store/items/search", None),  # ratings of open conversations only (`reground eval feedback`)
        ("POST", r"/chat/api/feedback", None),  # the page's own route validates its body
    )
)


def route_check(method: str, path: str) -> tuple[bool, Check | None]:
    """(allowed, body check) for a write request under a policy."""
    for allowed_method, pattern, check in ALLOWED:
        if method == allowed_method and pattern.match(path):
            return True, check
    return False, None


def scope_key(context: Mapping[str, Any]) -> str:
    """One string per scope (collection and filter): a thread's many runs in one scope are checked once."""
    return json.dumps([context.get("collection"), context.get("metadata_filter")], sort_keys=True, default=str)


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def bad_id(path: str) -> str | None:
    """The first thread or run id in the path that is not a UUID (a route word such as 'search' is no id)."""
    parts = path.strip("/").split("/")
    for before, part in itertools.pairwise(parts):
        if before in ID_AFTER and part not in ROUTE_WORDS and not is_uuid(part):
            return part
    return None


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_body(raw: bytes) -> Any:
    """The request's JSON (None when empty); ValueError with the reason when it does not parse or nests too deep."""
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except RecursionError as exc:
        raise ValueError(f"the request body nests deeper than {MAX_JSON_DEPTH} levels") from exc
    except ValueError as exc:
        raise ValueError("the request body is not valid JSON") from exc
    if too_deep(body):
        raise ValueError(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


class ScopeGuard:
    """ASGI middleware: ids and bodies checked, runs stamped with their scope, and a ScopePolicy enforced on the
    API's reads and writes when one is given (module docstring)."""

    def __init__(self, app: ASGIApp, policy: ScopePolicy | None = None, runs: RunContexts | None = None) -> None:
        if policy is not None and runs is None:
            raise ValueError("a scope guard with a policy needs the server's runs to tell which threads it opens")
        self.app = app
        self.policy = policy
        self.runs: RunContexts = runs or _no_runs
        # thread id -> the distinct scopes its runs ran in (scope_key -> context), kept up to date as runs pass
        self._scopes: dict[str, dict[str, dict[str, Any]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.policy is not None:
            await _refuse_websocket(receive, send)  # the API's websocket can start runs: not the page's way
            return
        if scope["type"] != "http" or scope.get("root_path") == LOOPBACK_ROOT:
            await self.app(scope, receive, send)  # the server's own in-process calls (this guard's among them)
            return
        method, path = scope["method"], _path(scope)
        wrong = bad_id(path)
        if wrong is not None:
            await refuse(send, f"no conversation or run {wrong!r}: its id is not a UUID", status=HTTPStatus.NOT_FOUND)
            return
        if self.policy is None:
            await self._open(scope, receive, send, method, path)
        else:
            await self._enforced(self.policy, scope, receive, send, method, path)

    async def _open(self, scope: Scope, receive: Receive, send: Send, method: str, path: str) -> None:
        """No policy: bodies must parse, and a run's metadata is stamped with the scope its context gives."""
        if method in READ_METHODS:
            await self.app(scope, receive, send)
            return
        read = await _read_json(receive, send, limit=None)  # documents sent to the ingest graph may be large
        if read is None:
            return
        raw, body = read
        if method == "POST" and _RUN_ROUTE.match(path) and isinstance(body, dict):
            config = body.get("config")
            given = body.get("context") or (config.get("configurable") if isinstance(config, Mapping) else None) or {}
            raw = json.dumps(_stamped(body, given if isinstance(given, Mapping) else {})).encode()
        await self.app(_with_length(scope, len(raw)), _replay(raw, receive), send)

    async def _enforced(
        self, policy: ScopePolicy, scope: Scope, receive: Receive, send: Send, method: str, path: str
    ) -> None:
        thread = _THREAD.match(path)
        thread_id = thread.group(1) if thread and thread.group(1) not in ROUTE_WORDS else None
        if thread_id is not None and not await self.readable(policy, thread_id):
            await refuse(send, f"no conversation {thread_id!r} open to this page", status=HTTPStatus.NOT_FOUND)
            return
        if method in READ_METHODS:
            if path == "/store/items" and not await self._rating_open(policy, scope):
                await refuse(send, "the store holds only the ratings of conversations open to this page")
                return
            if method != "OPTIONS" and thread_id is None and not any(p.match(path) for p in OPEN_READS):
                await refuse(send, f"{method} {path} is not open while the chat page's scope policy is on")
                return
            await self.app(scope, receive, send)
            return
        allowed, check = route_check(method, path)
        if not allowed:
            await refuse(send, f"{method} {path} is not open while the chat page's scope policy is on")
            return
        read = await _read_json(receive, send, limit=MAX_BODY_BYTES)
        if read is None:
            return
        raw, body = read
        if path == "/chat/api/feedback" and isinstance(body, dict):
            rated = str(body.get("thread_id") or "")
            if not is_uuid(rated) or not await self.readable(policy, rated):
                await refuse(send, f"no conversation {rated!r} open to this page", status=HTTPStatus.NOT_FOUND)
                return
        try:
            checked = check(body, policy) if check is not None else body
        except ScopeViolation as exc:
            await refuse(send, str(exc))
            return
        if checked is not body:
            raw = json.dumps(checked).encode()
        if thread_id is not None and method == "POST" and path.endswith("/runs/stream"):
            context = dict(checked["context"])
            self._scopes.setdefault(thread_id, {})[scope_key(context)] = context
        if method == "DELETE" and thread_id is not None:
            self._scopes.pop(thread_id, None)
        scope = _with_length(scope, len(raw))
        if path == "/threads/search":
            send = self._only_readable(policy, send, _thread_id)
        elif path == "/store/items/search":
            send = self._only_readable(policy, send, _rated_thread)
        await self.app(scope, _replay(raw, receive), send)

    async def _rating_open(self, policy: ScopePolicy, scope: Scope) -> bool:
        """Whether a store read names a rating (namespace FEEDBACK_NAMESPACE.<thread id>) of an open conversation."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        namespace = query.get("namespace", [""])[0].split(".")
        return (
            _rated_thread({"namespace": namespace}) is not None
            and is_uuid(namespace[-1])
            and await self.readable(policy, namespace[-1])
        )

    async def readable(self, policy: ScopePolicy, thread_id: str) -> bool:
        """Whether the policy allows every run the thread holds (a thread the server does not have: yes, and the
        server answers its 404)."""
        scopes = self._scopes.get(thread_id)
        if scopes is None:
            found = await self.runs(thread_id)
            if found is None:
                return True
            scopes = self._scopes[thread_id] = {scope_key(context): context for context in found}
        return all(policy.allows(context) for context in scopes.values())

    def _only_readable(self, policy: ScopePolicy, send: Send, thread_of: Callable[[Any], str | None]) -> Send:
        """A `send` that passes a search's answer (a list, or {"items": [...]}) on without the entries whose thread
        (`thread_of`; None: none of the page's) the policy does not open."""

        async def listed(entry: Any) -> bool:
            thread_id = thread_of(entry)
            return thread_id is not None and is_uuid(thread_id) and await self.readable(policy, thread_id)

        started: list[Message] = []
        chunks: list[bytes] = []

        async def filtered(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(message)
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, body = started[0], b"".join(chunks)
            found = json.loads(body) if start["status"] == HTTPStatus.OK else None
            if isinstance(found, list):
                body = json.dumps([entry for entry in found if await listed(entry)]).encode()
            elif isinstance(found, dict) and isinstance(found.get("items"), list):
                body = json.dumps(
                    {**found, "items": [entry for entry in found["items"] if await listed(entry)]}
                ).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        return filtered


def _thread_id(thread: Any) -> str | None:
    return str(thread.get("thread_id", "")) if isinstance(thread, dict) else None


def _rated_thread(item: Any) -> str | None:
    """The thread a store item rates: its namespace is (FEEDBACK_NAMESPACE, thread id); anything else is no rating."""
    namespace = item.get("namespace") if isinstance(item, dict) else None
    if isinstance(namespace, list) and len(namespace) == 2 and namespace[0] == FEEDBACK_NAMESPACE:
        return str(namespace[1])
    return None


async def _no_runs(thread_id: str) -> list[dict[str, Any]] | None:
    return None


def _path(scope: Scope) -> str:
    """The route's path: without the root path an in-process client mounts it under."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    return path.rstrip("/") or "/"


async def _read_json(receive: Receive, send: Send, *, limit: int | None) -> tuple[bytes, Any] | None:
    """(the body, parsed) of a write; None once it has refused a body past `limit` bytes (413) or one that does not
    parse (400)."""
    raw = await _read_body(receive, limit=limit)
    if raw is None:
        await refuse(send, "request body too large", status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        return None
    try:
        return raw, parse_body(raw)
    except ValueError as exc:
        await refuse(send, str(exc), status=HTTPStatus.BAD_REQUEST)
        return None


async def _read_body(receive: Receive, limit: int | None = MAX_BODY_BYTES) -> bytes | None:
    """The request's body; None when it passes `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
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
