"""Chat models by spec string: every provider LangChain's `init_chat_model` knows, plus our own forms.

Specs:
- `<provider>:<model>` — anything `langchain.chat_models.init_chat_model` accepts, e.g. `openai:gpt-4o-mini`
  ($OPENAI_API_KEY, optional $OPENAI_BASE_URL), `anthropic:claude-sonnet-4-5`, `ollama:qwen2.5`,
  `google_genai:gemini-2.5-flash` (`google-genai` works too); the provider's integration package must be
  installed (`pip install langchain-anthropic`) and reads its own API key variable;
- `local:<name>` — the llama.cpp server `reground llm serve` started and recorded (or $REGROUND_LOCAL_LLM_URL);
- `openai-compatible:<model>@<base_url>` — any OpenAI-compatible server (vLLM, LM Studio, llama.cpp), key
  from $REGROUND_API_KEY (default "none").
Each is built by `init_chat_model`; only the local URL lookup and the reply-length cap are reground's.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from reground.tools.errors import InputError, ModelError
from reground.tools.tuning.models import ENDPOINTS

LOCAL_MODEL_ALIAS = "local"
ACCEPTED = "'<provider>:<model>' (e.g. 'openai:gpt-4o-mini'), 'local:<name>' or 'openai-compatible:<model>@<base_url>'"
REACHABLE_TTL_S = ENDPOINTS.reachable_ttl_s
OPENAI_URL = "https://api.openai.com/v1"


class LLMUnavailableError(ModelError, RuntimeError):
    """No chat model answers at the configured URL (or it died mid-answer); the message names it and the ways out."""


class LLMTimeoutError(ModelError, RuntimeError):
    """The chat model accepted the call but did not reply in time; the node's retry policy retries it."""


class ModelSpecError(InputError):
    """A chat model spec that does not parse; the message lists the accepted forms."""


def _ways_out(url: str) -> str:
    return (
        f"No chat model answered at {url}. Either start the local server with `reground llm serve`, "
        "or point reground at another model: REGROUND_CHAT_MODEL=openai:gpt-4o-mini with OPENAI_API_KEY "
        "(and OPENAI_BASE_URL for other servers), REGROUND_CHAT_MODEL=<provider>:<model> for any LangChain "
        "provider, or REGROUND_CHAT_MODEL=openai-compatible:<model>@<base_url>."
    )


def providers() -> list[str]:
    """The providers `init_chat_model` knows (their integration packages may or may not be installed)."""
    from langchain.chat_models import base

    return sorted(base._BUILTIN_PROVIDERS)


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """(provider, model, base_url or None); provider is 'local', 'openai-compatible' or a LangChain provider."""
    scheme, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ModelSpecError(f"invalid chat model spec {spec!r}: use {ACCEPTED}")
    if scheme == "local":
        return scheme, rest, None
    if scheme == "openai-compatible":
        model, at, base_url = rest.partition("@")
        if not at or not model or not base_url:
            raise ModelSpecError(f"invalid chat model spec {spec!r}: use 'openai-compatible:<model>@<base_url>'")
        return scheme, model, base_url
    provider = scheme.replace("-", "_").lower()
    if provider not in providers():
        raise ModelSpecError(
            f"unknown chat model provider {scheme!r} in {spec!r}: use {ACCEPTED}; providers: {', '.join(providers())}"
        )
    return provider, rest, (os.environ.get("OPENAI_BASE_URL") or None) if provider == "openai" else None


def base_url_for(spec: str) -> str:
    """The OpenAI-compatible base URL the spec talks to; "" for a provider with its own API (no URL to check)."""
    provider, _, base_url = parse_spec(spec)
    if provider == "local":
        url = os.environ.get("REGROUND_LOCAL_LLM_URL") or _recorded_local_url()
        if not url:
            raise LLMUnavailableError(
                "No local LLM server is running (none recorded and REGROUND_LOCAL_LLM_URL is not set). "
                + _ways_out("the local server").split(". ", 1)[1]
            )
        return url.rstrip("/")
    if provider in ("openai", "openai-compatible"):
        return (base_url or OPENAI_URL).rstrip("/")
    return ""


def _recorded_local_url() -> str | None:
    try:
        from reground.tools.adapters.local_server import recorded_server_url
    except ImportError:
        return None
    return recorded_server_url()


def _api_key(provider: str) -> str:
    if provider == "openai":
        key = os.environ.get("OPENAI_API_KEY", "")
        if not key:
            raise LLMUnavailableError(
                "OPENAI_API_KEY is not set for an 'openai:' chat model spec: export it, or serve a local model "
                "with `reground llm serve`"
            )
        return key
    if provider == "openai-compatible":
        return os.environ.get("REGROUND_API_KEY", "none")
    return "local"


_MODELS: dict[tuple[Any, ...], BaseChatModel] = {}
_MODELS_LOCK = threading.Lock()


def load_chat_model(
    spec: str,
    *,
    temperature: float = 0.0,
    timeout_s: float,
    max_tokens: int | None = None,
    max_retries: int = 1,
) -> BaseChatModel:
    """The spec's chat model from `init_chat_model`, cached per (spec, url, parameters)."""
    provider, model, _ = parse_spec(spec)
    base_url = base_url_for(spec)
    key = (spec, base_url, temperature, timeout_s, max_tokens, max_retries)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _build(spec, provider, model, base_url, temperature, timeout_s, max_tokens, max_retries)
        return _MODELS[key]


def _build(
    spec: str,
    provider: str,
    model: str,
    base_url: str,
    temperature: float,
    timeout_s: float,
    max_tokens: int | None,
    max_retries: int,
) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {"temperature": temperature, "timeout": timeout_s, "max_retries": max_retries}
    if base_url:  # an OpenAI-compatible endpoint: local, openai-compatible or openai
        kwargs.update(base_url=base_url, api_key=_api_key(provider), stream_usage=True)
        kwargs.update(_cap_kwargs(base_url, max_tokens) if max_tokens else {})
        model, provider = (LOCAL_MODEL_ALIAS if provider == "local" else model), "openai"
    elif max_tokens:
        kwargs["max_tokens"] = max_tokens
    try:
        chat = init_chat_model(model, model_provider=provider, **kwargs)
    except ImportError as exc:
        raise ModelSpecError(f"chat model {spec!r} needs its LangChain integration package: {exc}") from exc
    except Exception as exc:  # a provider's own validation, e.g. its API key variable is not set
        raise LLMUnavailableError(
            f"cannot build the chat model {spec!r}: {str(exc).splitlines()[0]}; set the provider's API key, "
            "or serve a local model with `reground llm serve`"
        ) from exc
    if not isinstance(chat, BaseChatModel):  # init_chat_model returns a configurable wrapper only without a model
        raise ModelSpecError(f"invalid chat model spec {spec!r}: use {ACCEPTED}")
    return chat


def _cap_kwargs(base_url: str, max_tokens: int) -> dict[str, Any]:
    # OpenAI takes `max_completion_tokens`; llama.cpp, vLLM and most compatible servers read only
    # `max_tokens` and silently ignore the other (then generate until the context is full).
    if "api.openai.com" in base_url:
        return {"max_completion_tokens": max_tokens}
    return {"extra_body": {"max_tokens": max_tokens}}


def token_cap(model: BaseChatModel, max_tokens: int | None) -> dict[str, Any]:
    """Per-call keyword arguments that cap a reply's length on this model's backend ({} if unknown)."""
    base_url = str(getattr(model, "openai_api_base", "") or "")
    if max_tokens and not base_url and "max_tokens" in getattr(type(model), "model_fields", {}):
        return {"max_tokens": max_tokens}  # a model that names the cap max_tokens (the scripted model, Anthropic)
    if not max_tokens or not base_url:
        return {}
    return _cap_kwargs(base_url, max_tokens)


_REACHABLE: dict[str, float] = {}


def ensure_reachable(spec: str, *, timeout_s: float = ENDPOINTS.reachable_timeout_s) -> str:
    """The base URL if a server answers there (checked at most every REACHABLE_TTL_S), else LLMUnavailableError.

    A provider with its own API (no OpenAI-compatible URL) is not probed: "" is returned and its first call
    reports what is wrong.
    """
    url = base_url_for(spec)
    if not url:
        return url
    if time.monotonic() - _REACHABLE.get(url, -math.inf) < REACHABLE_TTL_S:
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
    if response.status_code >= 500 or response.status_code == 404:  # fact: HTTP statuses
        raise LLMUnavailableError(_ways_out(url) + f" (HTTP {response.status_code})")
    _REACHABLE[url] = time.monotonic()
    return url
