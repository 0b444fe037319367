"""Same origin only: the server behind the chat page answers its own page, not a page on another web origin.

A browser lets any site send requests to a server on this machine (a form, a `fetch` with a `text/plain` body that
needs no preflight, a DNS name rebound to 127.0.0.1); the API holds conversations, ratings and notes, so every
route, reads included, is refused (403, one line saying why) when
- the `Host` header does not name the address the request reached (the bound host and port; `localhost` for a
  loopback address) nor a name in `$REGROUND_UI_ALLOWED_HOSTS` (a proxy's public name): a DNS-rebound name is not;
- an `Origin` header names another origin than the page's own (the `Host`) and is not in
  `$REGROUND_UI_ALLOWED_ORIGINS` nor in the served config's `http.cors.allow_origins`; without an `Origin`, a
  browser's `Sec-Fetch-Site: cross-site|same-site` request is refused unless it is a top-level navigation (a link
  a person clicks shows them the response, not the site);
- a write (any method but GET, HEAD and OPTIONS) carries a body that is not `application/json` (415).
Clients outside a browser (the SDK, curl, the tests) send no `Origin` and pass with a right `Host`. A wildcard
`access-control-allow-origin` never leaves the server (langgraph.json's `http.cors` names the allowed origins;
docs/deployment.md).
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ORIGINS_ENV = "REGROUND_UI_ALLOWED_ORIGINS"  # comma-separated origins besides the page's own
SERVED_CONFIG_ENV = "LANGGRAPH_HTTP"  # the served langgraph.json's "http" section, as `langgraph dev` passes it on
HOSTS_ENV = "REGROUND_UI_ALLOWED_HOSTS"  # comma-separated host or host:port names the page is served under
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_TYPES = ("application/json",)
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}  # fact: the schemes' default ports
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain"})
CROSS_SITE = frozenset({"cross-site", "same-site"})  # Sec-Fetch-Site values of a request another site made
POLICY_VIOLATION = 1008  # fact: the WebSocket close code for a request the server's policy refuses (RFC 6455)


def configured_origins(http_json: str | None = None) -> frozenset[str]:
    """The origins the served config's CORS lets in (`http.cors.allow_origins`): one allow-list for the browser and
    for this check, so listing an origin there (LangGraph Studio in this repository's langgraph.json) is enough.
    A wildcard is never taken as an allow-list."""
    raw = os.environ.get(SERVED_CONFIG_ENV, "") if http_json is None else http_json
    try:
        cors = (json.loads(raw) or {}).get("cors") or {} if raw.strip() else {}
    except (ValueError, AttributeError):
        return frozenset()
    listed = cors.get("allow_origins") if isinstance(cors, dict) else None
    return _names([str(o) for o in listed if str(o).strip() != "*"] if isinstance(listed, list) else ())


def _names(raw: str | Iterable[str] | None) -> frozenset[str]:
    items = raw.split(",") if isinstance(raw, str) else (raw or ())
    return frozenset(item.strip().lower().rstrip("/") for item in items if item.strip())


def split_host(value: str) -> tuple[str, int | None]:
    """('name', port or None) of a Host header or URL netloc; ValueError when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 literal: [::1]:2025
        end = value.find("]")
        if end < 0:
            raise ValueError(f"not a host: {value!r}")
        name, rest = value[1:end], value[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"not a host: {value!r}")
    else:
        name, _, port = value.partition(":")
    name = name.rstrip(".")
    if not name or (port and not port.isdigit()):
        raise ValueError(f"not a host: {value!r}")
    return name, int(port) if port else None


def _loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name in LOCAL_NAMES


def host_allowed(host: str, server: tuple[str, int | None] | None, scheme: str, allowed: frozenset[str]) -> bool:
    """Whether a Host header names this server: the address the request reached (localhost too when that is a
    loopback address), on its port, or an allowed name (with or without its port)."""
    try:
        name, port = split_host(host)
    except ValueError:
        return False
    default = DEFAULT_PORTS.get(scheme)
    shown = f"{name}:{port if port is not None else default}"
    if name in allowed or shown in allowed or host.strip().lower() in allowed:
        return True
    if not server:
        return False
    bound, bound_port = str(server[0]).lower(), server[1] if server[1] is not None else default
    if (port if port is not None else default) != bound_port:
        return False
    return name == bound or (_loopback(bound) and _loopback(name))


def same_origin(origin: str, host: str) -> bool:
    """Whether `origin` is the page's own: the Host's name and port (a missing port is the origin scheme's default,
    so `https://chat.example` matches the Host `chat.example` a TLS proxy passes on)."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    try:
        origin_name, origin_port = split_host(parts.netloc)
        host_name, host_port = split_host(host)
    except ValueError:
        return False
    default = DEFAULT_PORTS[parts.scheme]
    return origin_name == host_name and (origin_port or default) == (host_port or default)


def refusal(scope: Scope, origins: frozenset[str], hosts: frozenset[str]) -> tuple[int, str] | None:
    """(status, why) when the request must be refused, else None."""
    headers: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    scheme = str(scope.get("scheme") or ("ws" if scope["type"] == "websocket" else "http"))
    host = headers.get("host", "")
    if not host_allowed(host, scope.get("server"), scheme, hosts):
        return HTTPStatus.FORBIDDEN, (
            f"the Host header {host!r} does not name this server; a name it is served under goes in ${HOSTS_ENV}"
        )
    origin = headers.get("origin")
    if origin is not None:
        if origin.strip().lower().rstrip("/") not in origins and not same_origin(origin, host):
            return HTTPStatus.FORBIDDEN, (
                f"requests from {origin!r} are refused: this server answers only its own page "
                f"(other origins go in ${ORIGINS_ENV})"
            )
    elif headers.get("sec-fetch-site") in CROSS_SITE and headers.get("sec-fetch-mode") != "navigate":
        return HTTPStatus.FORBIDDEN, "a request another site's page made is refused: this server answers its own page"
    if scope["type"] == "http" and scope["method"] not in READ_METHODS and _has_body(headers):
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in JSON_TYPES:
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, (
                f"a write must be sent as application/json, not {media or 'a body without a content type'}"
            )
    return None


def _has_body(headers: Mapping[str, str]) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0")


class SameOrigin:
    """ASGI middleware: refuses foreign hosts, foreign origins and non-JSON writes (module docstring); drops a
    wildcard CORS header from what it lets through."""

    def __init__(
        self, app: ASGIApp, *, origins: Iterable[str] | None = None, hosts: Iterable[str] | None = None
    ) -> None:
        self.app = app
        if origins is None:
            self.origins = _names(os.environ.get(ORIGINS_ENV, "")) | configured_origins()
        else:
            self.origins = _names(origins)
        self.hosts = _names(os.environ.get(HOSTS_ENV, "") if hosts is None else hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refused = refusal(scope, self.origins, self.hosts)
        if refused is not None:
            status, detail = refused
            if scope["type"] == "websocket":
                await _close_websocket(receive, send)
            else:
                await refuse(send, detail, status=status)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_without_wildcard(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if not (k.lower() == b"access-control-allow-origin" and v.strip() == b"*")
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_without_wildcard)


async def _close_websocket(receive: Receive, send: Send) -> None:
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": "refused: not this page's origin"})


async def refuse(send: Send, detail: str, *, status: int = HTTPStatus.FORBIDDEN) -> None:
    """A one-line JSON refusal: {"detail": why}."""
    body = json.dumps({"detail": " ".join(detail.split())}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
