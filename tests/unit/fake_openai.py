"""A tiny OpenAI-compatible HTTP server for error tests: it answers, or dies in the middle of a reply.

`mode="answer"` replies to every chat completion with `reply`. `mode="die"` accepts the chat request,
then drops the connection without a response and stops listening, like a llama.cpp server killed
mid-answer: the client's retry finds nothing at the port. `/v1/models` always answers while up, so
the graph's fail-fast reachability check passes and the failure happens after the turn started.
With `structured=True` a call that asks for a JSON schema (`response_format` json_schema) gets a reply of the
schema's shape (strings are `reply`). Every chat request's Authorization header is kept in `auth`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAI:
    """Start with `start()`, stop with `stop()`; `url` is the OpenAI base URL (…/v1)."""

    def __init__(
        self,
        mode: str = "answer",
        reply: str = "Full-time employees get 30 days of leave [1].",
        *,
        structured: bool = False,
    ) -> None:
        self.mode = mode
        self.reply = reply
        self.structured = structured
        self.auth: list[str] = []
        self.chat_requests = 0
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def spec(self) -> str:
        return f"openai-compatible:local@{self.url}"

    def start(self, port: int = 0) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return

            def _json(self, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json({"object": "list", "data": [{"id": "local", "object": "model"}]})
                else:
                    self.send_error(404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                fake.chat_requests += 1
                fake.auth.append(self.headers.get("Authorization", ""))
                if fake.mode == "die":
                    # Killed mid-answer: no response on this connection, nothing listening afterwards.
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    threading.Thread(target=fake.stop, daemon=True).start()
                    return
                message = {"role": "assistant", "content": fake.content_for(request)}
                usage = {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18}
                if request.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    chunk = {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": "local",
                        "choices": [{"index": 0, "delta": message, "finish_reason": "stop"}],
                        "usage": usage,
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
                    return
                self._json(
                    {
                        "id": "c1",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": "local",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": usage,
                    }
                )

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def content_for(self, request: dict[str, Any]) -> str:
        """`reply`, or with `structured` and a json_schema request, a JSON object of the schema's shape."""
        response_format = request.get("response_format") or {}
        if not self.structured or response_format.get("type") != "json_schema":
            return self.reply
        properties = response_format["json_schema"]["schema"].get("properties", {})
        samples: dict[str, Any] = {"string": self.reply, "array": [], "integer": 1, "boolean": False, "number": 1.0}
        return json.dumps({name: samples.get(p.get("type"), "") for name, p in properties.items()})

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def restart(self, mode: str = "answer") -> FakeOpenAI:
        """Back up on the same port (the URL the thread's context names), in `mode`."""
        self.stop()
        self.mode = mode
        return self.start(self.port)
