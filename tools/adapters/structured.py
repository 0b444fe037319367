"""Structured replies a small model cannot break: a JSON schema the server enforces, in the form each endpoint takes.

- llama-cpp-python's server (our `local:` models) turns `response_format={"type": "json_object", "schema": S}`
  into a grammar; it refuses OpenAI's `json_schema` form (HTTP 500).
- OpenAI and most compatible servers (vLLM, llama.cpp's own server, Ollama) take
  `{"type": "json_schema", "json_schema": {"name": ..., "schema": S}}`.
- An endpoint that refuses both gets `json_object`, and one that refuses that too gets the schema in the prompt
  and a parsed reply with one repair retry (the tolerant path).

The first form an endpoint accepts is remembered per base URL. Chat models that are not OpenAI-compatible (a
test double, another provider) go through `with_structured_output` when they implement it, else the tolerant
path.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.utils.json import parse_partial_json
from pydantic import BaseModel, ValidationError
from reground.tools.adapters.chat import (
    CallStats,
    LLMReplyError,
    call_parsed,
    invoke_model,
    message_text,
    model_failure,
    parse_json_object,
)
from reground.tools.adapters.llm import LOCAL_MODEL_ALIAS, token_cap
from reground.tools.tuning.models import CHAT

SchemaT = TypeVar("SchemaT", bound=BaseModel)
ReplyForm = Literal["json_schema", "json_object_schema", "json_object", "text"]

_FORMS_BY_URL: dict[str, ReplyForm] = {}
_FORMS_LOCK = threading.Lock()
# HTTP statuses with which a server says "I do not take this response_format" (not: "I am down"); llama-cpp-python
# answers 500 to a json_schema form. LangChain wraps the SDK's error, so the chain of causes is searched.
_REFUSAL_STATUSES = {400, 404, 422, 500, 501}  # fact: HTTP statuses


def refused(exc: BaseException) -> bool:
    """Whether a failed call was the endpoint refusing the request's form (an HTTP status), not a transport error."""
    current: BaseException | None = exc
    for _ in range(CHAT.cause_chain_depth):
        if current is None:
            return False
        if getattr(current, "status_code", None) in _REFUSAL_STATUSES:
            return True
        current = current.__cause__ or current.__context__
    return False


SCHEMA_IN_PROMPT = "Reply with one JSON object only, no other text, matching this JSON schema:\n{schema}"


def _base_url(model: BaseChatModel) -> str:
    return str(getattr(model, "openai_api_base", "") or "")


def candidate_forms(model: BaseChatModel) -> list[ReplyForm]:
    """The forms to try for a model, most constrained first; a remembered working form goes first."""
    url = _base_url(model)
    if not url:
        return ["text"]
    if getattr(model, "model_name", "") == LOCAL_MODEL_ALIAS:
        forms: list[ReplyForm] = ["json_object_schema", "text"]
    else:
        forms = ["json_schema", "json_object_schema", "json_object", "text"]
    with _FORMS_LOCK:
        known = _FORMS_BY_URL.get(url)
    return [known, *(f for f in forms if f != known)] if known else forms


def remember_form(model: BaseChatModel, form: ReplyForm) -> None:
    url = _base_url(model)
    if url:
        with _FORMS_LOCK:
            _FORMS_BY_URL[url] = form


def request_kwargs(
    model: BaseChatModel, form: ReplyForm, schema: type[BaseModel], max_tokens: int | None
) -> dict[str, Any]:
    """The per-call keyword arguments of one form (response format and length cap)."""
    kwargs = token_cap(model, max_tokens)
    json_schema = schema.model_json_schema()
    extra = dict(kwargs.pop("extra_body", {}))
    if form == "json_object_schema":
        # Through extra_body: LangChain would otherwise route a response_format to the OpenAI parse helper.
        extra["response_format"] = {"type": "json_object", "schema": json_schema}
    elif form == "json_object":
        extra["response_format"] = {"type": "json_object"}
    elif form == "json_schema":
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema.__name__, "schema": json_schema},
        }
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _validated(schema: type[SchemaT], text: str) -> SchemaT:
    try:
        return schema.model_validate(parse_json_object(text))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
        raise ValueError(f"JSON does not match the schema at {where}: {first['msg']}") from exc


def call_json(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    schema: type[SchemaT],
    stats: CallStats,
    *,
    tags: Sequence[str] = (),
    max_tokens: int | None = None,
) -> tuple[SchemaT, AIMessage | None]:
    """One structured call: (the validated reply, the raw message when the server enforced the schema).

    Raises LLMReplyError when even the tolerant path yields nothing valid (callers take their fallback),
    LLMUnavailableError when nothing serves.
    """
    for form in candidate_forms(model):
        if form == "text":
            return _tolerant(model, messages, schema, stats, tags=tags, max_tokens=max_tokens), None
        kwargs = request_kwargs(model, form, schema, max_tokens)
        try:
            reply = invoke_model(model, messages, stats, tags, **kwargs)
        except Exception as exc:
            if refused(exc):
                stats.notes.append(f"endpoint refused response_format {form} ({type(exc).__name__}); trying the next")
                continue
            raise
        remember_form(model, form)
        text = message_text(reply)
        try:
            return _validated(schema, text), reply
        except ValueError as exc:
            problem = str(exc)
        # A schema-enforced reply is only invalid when the length cap cut it: close what is open and keep it.
        try:
            completed = schema.model_validate(parse_partial_json(text[text.find("{") :]))
        except (ValueError, ValidationError):
            stats.notes.append(f"structured reply invalid ({problem}); one repair through the tolerant path")
            return _tolerant(model, messages, schema, stats, tags=tags, max_tokens=max_tokens), None
        stats.notes.append("structured reply cut by the length cap; its open strings and lists closed")
        return completed, reply
    raise LLMReplyError("no reply form left to try")


def _tolerant(
    model: BaseChatModel,
    messages: Sequence[BaseMessage],
    schema: type[SchemaT],
    stats: CallStats,
    *,
    tags: Sequence[str],
    max_tokens: int | None,
) -> SchemaT:
    """The schema in the prompt, the reply parsed, one repair retry."""
    if hasattr(model, "with_structured_output") and not _base_url(model):
        try:
            bound = model.with_structured_output(schema, include_raw=True)
        except NotImplementedError:
            bound = None
        if bound is not None:
            started = time.perf_counter()
            try:
                out: Any = bound.invoke(list(messages), config={"tags": list(tags)})
            except Exception as exc:
                failure = model_failure(model, exc)
                if failure is not None:
                    raise failure from exc
                raise
            raw = out.get("raw") if isinstance(out, dict) else None
            if isinstance(raw, BaseMessage):
                stats.add_message(raw, time.perf_counter() - started)
            if isinstance(out, dict) and isinstance(out.get("parsed"), schema):
                return out["parsed"]
    instruction = SCHEMA_IN_PROMPT.format(schema=json.dumps(schema.model_json_schema()))
    last = messages[-1]
    asked = [*messages[:-1], HumanMessage(f"{message_text(last)}\n\n{instruction}")]
    return call_parsed(model, asked, lambda text: _validated(schema, text), stats, tags=tags, max_tokens=max_tokens)
