"""The chat page and `reground ui` (reground/web/): how much a request may carry and how long the server may take."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChatPage:
    """Limits and waits of the page's server side (reground/web/app.py, guard.py, turns.py, server.py)."""

    # Checkpoints read to rebuild a thread's turns (a turn writes about 12): about 80 turns.
    history_checkpoints: int = 1000
    # Ratings read back per thread.
    ratings_per_thread: int = 1000
    # A page request is a question and its scope; a larger body is refused.
    max_body_bytes: int = 2**20
    # A request body nesting deeper is refused (400): the page's deepest is 4 levels; 100,000 crashed the server.
    max_json_depth: int = 64
    # A rating's note is cut to this many characters.
    max_note_chars: int = 2000
    # `reground ui`: the README's port for `langgraph dev` (a free one when it is taken), how long the server may take
    # to start (it imports the graph and the page), how often to look, how long it has to
    # stop, how many log lines to show when it fails, and how much of the log to search for the port it chose.
    default_port: int = 2025
    start_timeout_s: float = 180.0
    poll_s: float = 0.25
    stop_grace_s: float = 10.0
    log_lines: int = 30
    log_search_lines: int = 400


CHAT_PAGE = ChatPage()
