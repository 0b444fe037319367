"""Chat models by spec string, always through ChatOpenAI, so any OpenAI-compatible server works.

Specs: `local:<name>` (the llama.cpp server `reground llm serve` started and recorded, or
$REGROUND_LOCAL_LLM_URL), `openai:<model>` ($OPENAI_API_KEY, optional $OPENAI_BASE_URL) and
`openai-compatible:<model>@<base_url>` (key from $REGROUND_API_KEY, default "none").
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from reground.tools.errors import InputError, ModelError

LOCAL_MODEL_ALIAS = "local"
ACCEPTED = "'local:<name>', 'openai:<model>' or 'openai-compatible:<model>@<base_url>'"
REACHABLE_TTL_S = 30.0


class LLMUnavailableError(ModelError, RuntimeError):
    """No chat model answers at the configured URL (or it died mid-answer); the message names it and the ways out."""


class LLMTimeoutError(ModelError, RuntimeError):
    """The chat model accepted the call but did not reply in time; the node's retry policy retries it."""


class ModelSpecError(InputError):
    """A chat model spec that does not parse; the message lists the accepted forms."""


def _ways_out(url: str) -> str:
    return (
        f"No chat model answered at {url}. Either start the local server with `reground llm serve`, "
        "or point reground at an OpenAI-compatible endpoint: REGROUND_CHAT_MODEL=openai:gpt-4o-mini with "
        "OPENAI_API_KEY (and OPENAI_BASE_URL for other servers), or "
        "REGROUND_CHAT_MODEL=openai-compatible:<model>@<base_url>."
    )


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """(scheme, model, base_url or None)."""
    scheme, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelSpecError(f"invalid chat model spec {spec!r}: use {ACCEPTED}")
    if scheme == "local":
        return scheme, rest, None
    if scheme == "openai":
        return scheme, rest, os.environ.get("OPENAI_BASE_URL") or None
    if scheme == "openai-compatible":
        model, at, base_url = rest.partition("@")
        if not at or not model or not base_url:
            raise ModelSpecError(f"invalid chat model spec {spec!r}: use 'openai-compatible:<model>@<base_url>'")
        return scheme, model, base_url
    raise ModelSpecError(f"unknown chat model scheme {scheme!r} in {spec!r}: use {ACCEPTED}")


def base_url_for(spec: str) -> str:
    scheme, _, base_url = parse_spec(spec)
    if scheme == "local":
        url = os.environ.get("REGROUND_LOCAL_LLM_URL") or _recorded_local_url()
        if not url:
            raise LLMUnavailableError(
                "No local LLM server is running (none recorded and REGROUND_LOCAL_LLM_URL is not set). "
                + _ways_out("the local server").split(". ", 1)[1]
            )
        return url.rstrip("/")
    return (base_url or "https://api.openai.com/v1").rstrip("/")


def _recorded_local_url() -> str | None:
    try:
        from reground.tools.local_server import recorded_server_url
    except ImportError:
        return None
    return recorded_server_url()


def _api_key(scheme: str) -> str:
    if scheme == "openai":
        key = os.environ.get("OPENAI_API_KEY", "")
        if not key:
            raise LLMUnavailableError(
                "OPENAI_API_KEY is not set for an 'openai:' chat model spec: export it, or serve a local model "
                "with `reground llm serve`"
            )
        return key
    if scheme == "openai-compatible":
        return os.environ.get("REGROUND_API_KEY", "none")
    return "local"


_MODELS: dict[tuple[Any, ...], BaseChatModel] = {}
_MODELS_LOCK = threading.Lock()


def load_chat_model(
    spec: str,
    *,
    temperature: float = 0.0,
    timeout_s: float = 120.0,
    max_tokens: int | None = None,
    max_retries: int = 1,
) -> BaseChatModel:
    """A ChatOpenAI for the spec, cached per (spec, url, parameters)."""
    from langchain_openai import ChatOpenAI

    scheme, model, _ = parse_spec(spec)
    base_url = base_url_for(spec)
    key = (spec, base_url, temperature, timeout_s, max_tokens, max_retries)
    cap = _cap_kwargs(base_url, max_tokens) if max_tokens else {}
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = ChatOpenAI(
                model=LOCAL_MODEL_ALIAS if scheme == "local" else model,
                base_url=base_url,
                api_key=_api_key(scheme),  # type: ignore[arg-type]
                temperature=temperature,
                timeout=timeout_s,
                max_retries=max_retries,
                stream_usage=True,
                **cap,
            )
        return _MODELS[key]


def _cap_kwargs(base_url: str, max_tokens: int) -> dict[str, Any]:
    # OpenAI takes `max_completion_tokens`; llama.cpp, vLLM and most compatible servers read only
    # `max_tokens` and silently ignore the other (then generate until the context is full).
    if "api.openai.com" in base_url:
        return {"max_completion_tokens": max_tokens}
    return {"extra_body": {"max_tokens": max_tokens}}


def token_cap(model: BaseChatModel, max_tokens: int | None) -> dict[str, Any]:
    """Per-call keyword arguments that cap a reply's length on this model's backend ({} if unknown)."""
    base_url = str(getattr(model, "openai_api_base", "") or "")
    if not max_tokens or not base_url:
        return {}
    return _cap_kwargs(base_url, max_tokens)


_REACHABLE: dict[str, float] = {}


def ensure_reachable(spec: str, *, timeout_s: float = 3.0) -> str:
    """The base URL if a server answers there (checked at most every 30 s), else LLMUnavailableError."""
    url = base_url_for(spec)
    if time.monotonic() - _REACHABLE.get(url, -1e9) < REACHABLE_TTL_S:
        return url
    scheme = parse_spec(spec)[0]
    headers = {"Authorization": f"Bearer {_api_key(scheme)}"}
    try:
        response = httpx.get(f"{url}/models", headers=headers, timeout=timeout_s)
    except httpx.ConnectTimeout as exc:  # nothing accepted the connection in time: down or unroutable
        raise LLMUnavailableError(_ways_out(url) + " (ConnectTimeout)") from exc
    except httpx.TimeoutException:
        # Something accepted the connection but is slow to answer: a single-slot llama.cpp server
        # busy with another request. That server is up; the call itself has its own timeout.
        _REACHABLE[url] = time.monotonic()
        return url
    except httpx.HTTPError as exc:
        raise LLMUnavailableError(_ways_out(url) + f" ({type(exc).__name__})") from exc
    if response.status_code >= 500 or response.status_code == 404:
        raise LLMUnavailableError(_ways_out(url) + f" (HTTP {response.status_code})")
    _REACHABLE[url] = time.monotonic()
    return url
