"""A scripted chat model for tests (yours and ours): replies per task, records every call.

It stands in for a real LLM behind the same LangChain interface, so a graph runs end to end with no
server. A call's task is the first tag it sends that names one (every reground call tags itself:
`answer`, `refine_question`, `check_groundedness`, ...), so rewording a prompt changes nothing here; an
untagged call is matched by its prompt's wording as a last resort, else it is `other`. Replies come from a
script per task (the last one repeats). Structured requests (`with_structured_output`) get the reply as the
schema: JSON that validates is taken as it is, and plain text is put into the schema's one text field (or,
for a list of strings, one item per "- " line; "NONE" is the empty list), so a script can say what the model
writes without spelling out JSON.

A call that asks for `logprobs` (tools/adapters/choice.py) gets them for its first token, like the OpenAI-compatible
servers return them: a scripted reply that is a mapping of tokens to probabilities ({"2": 0.7, "0": 0.3}) becomes
the first token's `top_logprobs` (the reply's text is its most likely token); a text reply is a one-hot choice of
its first word.

Sampling settings act like a real model's, deterministically: at temperature 0 (greedy) each call takes the
task's next scripted reply; at temperature > 0 a call draws one of the task's scripted replies with a random
generator seeded by (`seed`, task, how many samples that task drew), so best-of-N samples differ and a run is
reproducible. `max_tokens` (per call, or the model's field) cuts a reply to that many words, as a length cap
cuts a real reply (a cut JSON reply no longer parses). The graph sets the temperature on a caller's model
(tools/services.py) and passes the length cap per call (tools/adapters/llm.py `token_cap`).
"""

from __future__ import annotations

import json
import math
import random
import re
import typing
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

# The tags reground's calls send, and the script key each one reads.
TAG_TASKS: dict[str, str] = {
    "answer": "answer",
    "refine_question": "refine_question",
    "extract_keywords": "keywords",
    "rerank": "rerank",
    "check_groundedness": "groundedness",
    "re_ground": "reground",
    "refine": "refine",
    "baseline": "answer",
    "judge": "other",
    "synth_question": "synth",  # `eval synth`: the user's question (and reference reply)
    "synth_check": "synth_check",  # `eval synth`: the model's check of a generated question
    "synth_followup": "synth_followup",  # `eval synth`: a question rewritten to refer back to the dialogue
    "injection_check": "injection_check",  # tools/signals/injection.py: the model check of a borderline sentence
}

# Untagged calls (a user's own prompts): recognised by a phrase, as a last resort.
TASK_MARKERS: tuple[tuple[str, str], ...] = (("Standalone question:", "refine_question"),)

DEFAULT_REPLIES: dict[str, str] = {
    "refine_question": "What is the policy?",
    "keywords": '{"keywords": ["policy"]}',
    "rerank": '{"scores": [9, 5, 2]}',
    "answer": "The passage says so [1].",
    "groundedness": '{"unsupported_claims": []}',
    "reground": "policy details from the conversation",
    "refine": "The passage says so, specifically [1].",
    "injection_check": '{"instruction_to_assistant": false}',
    "other": "OK",
}


def first_passage_sentence(messages: Sequence[BaseMessage]) -> str:
    """A grounded answer: the first sentence of passage [1] in the shared prefix, cited."""
    system = str(messages[0].content)
    match = re.search(r"\[1\][^\n]*\n(.+?[.!?])(\s|$)", system, re.DOTALL)
    if not match:
        raise AssertionError("the shared prefix must carry numbered passages")
    return f"{match.group(1).strip()} [1]"


def first_passage_reply(messages: Sequence[BaseMessage]) -> str:
    """The answer a good model gives: passage [1]'s first sentence, cited (asked for the JSON self-check reply,
    it fills the answer field and judges no passage: see coerce_to_schema)."""
    return first_passage_sentence(messages)


def task_of(tags: Sequence[str], messages: Sequence[BaseMessage]) -> str:
    for tag in tags:
        if tag in TAG_TASKS:
            return TAG_TASKS[tag]
    text = "\n".join(str(m.content) for m in messages[-3:])
    return next((task for marker, task in TASK_MARKERS if marker in text), "other")


def _is_list_of(annotation: Any, item: type) -> bool:
    return typing.get_origin(annotation) is list and typing.get_args(annotation) == (item,)


def coerce_to_schema(text: str, schema: type[BaseModel]) -> BaseModel:
    """The reply as the schema: valid JSON as is; else text into the one str field, or "- " lines into the one
    list[str] field ("NONE": empty). Raises ValueError when neither fits."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match:
        try:
            return schema.model_validate(json.loads(match.group(0)))
        except (json.JSONDecodeError, ValidationError):
            pass
    fields = schema.model_fields
    strings = [name for name, f in fields.items() if f.annotation is str]
    lists = [name for name, f in fields.items() if _is_list_of(f.annotation, str)]
    defaults: dict[str, list[Any]] = {n: [] for n, f in fields.items() if typing.get_origin(f.annotation) is list}
    try:
        if len(strings) == 1:
            return schema.model_validate({**defaults, strings[0]: text.strip()})
        if len(lists) == 1:
            items = [ln.strip().lstrip("-*").strip() for ln in text.splitlines() if ln.strip().startswith(("-", "*"))]
            if not items and text.strip().strip(".").upper() != "NONE":
                raise ValueError(f"reply {text!r} is neither NONE nor '- ' lines")
            return schema.model_validate({**defaults, lists[0]: items})
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc
    raise ValueError(f"reply {text!r} does not fit {schema.__name__}")


class ScriptedChatModel(BaseChatModel):
    """Replies from `script[task]` in order (the last one repeats), else from DEFAULT_REPLIES.

    A reply may be a callable taking the messages, for replies that depend on the prompt; an
    Exception instance is raised instead of replying (to test error paths).
    """

    script: dict[str, list[Any]] = Field(default_factory=dict)
    latency_s: float = 0.0
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int = 0
    _calls: list[tuple[str, list[BaseMessage]]] = PrivateAttr(default_factory=list)
    _served: dict[str, int] = PrivateAttr(default_factory=lambda: defaultdict(int))
    _sampled: dict[str, int] = PrivateAttr(default_factory=lambda: defaultdict(int))
    _temperatures: list[float] = PrivateAttr(default_factory=list)
    _choices: list[dict[str, float]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "reground-scripted"

    @property
    def calls(self) -> list[tuple[str, list[BaseMessage]]]:
        """(task, messages) of every call so far."""
        return self._calls

    def calls_for(self, task: str) -> int:
        return sum(1 for name, _ in self._calls if name == task)

    @property
    def temperatures(self) -> list[float]:
        """The temperature of every call so far (a copy at another temperature shares this record)."""
        return self._temperatures

    def reset(self) -> None:
        self._calls.clear()
        self._served.clear()
        self._sampled.clear()
        self._temperatures.clear()
        self._choices.clear()

    def _pick(self, task: str, replies: Sequence[Any], temperature: float) -> Any:
        """Greedy: the next scripted reply (the last repeats). Sampling: a seeded draw among the task's replies."""
        if temperature > 0:
            draw = self._sampled[task]
            self._sampled[task] += 1
            return replies[random.Random(f"{self.seed}:{task}:{draw}").randrange(len(replies))]
        index = min(self._served[task], len(replies) - 1)
        self._served[task] += 1
        return replies[index]

    def _reply(
        self, messages: list[BaseMessage], tags: Sequence[str], max_tokens: int | None, temperature: float | None = None
    ) -> str:
        task = task_of(tags, messages)
        self._calls.append((task, list(messages)))
        heat = self.temperature if temperature is None else float(temperature)
        self._temperatures.append(heat)
        replies = self.script.get(task)
        reply: Any = self._pick(task, replies, heat) if replies else DEFAULT_REPLIES.get(task, DEFAULT_REPLIES["other"])
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        if isinstance(reply, dict):  # token probabilities of a one-token choice
            self._choices.append({str(k): float(v) for k, v in reply.items()})
            reply = max(reply, key=lambda k: reply[k])
        else:
            self._choices.append({str(reply).split(" ")[0]: 1.0} if str(reply).strip() else {})
        cap = max_tokens or self.max_tokens
        words = str(reply).split(" ")
        return " ".join(words[:cap]) if cap else str(reply)

    def _usage(self, messages: list[BaseMessage], text: str) -> dict[str, int]:
        prompt = sum(len(str(m.content).split()) for m in messages)
        completion = len(text.split())
        return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}

    @staticmethod
    def _max_tokens(kwargs: dict[str, Any]) -> int | None:
        cap = kwargs.get("max_tokens") or (kwargs.get("extra_body") or {}).get("max_tokens")
        return int(cap) if cap else None

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            import time

            time.sleep(self.latency_s)
        tags = run_manager.tags if run_manager else []
        text = self._reply(messages, tags, self._max_tokens(kwargs), kwargs.get("temperature"))
        metadata: dict[str, Any] = {}
        if kwargs.get("logprobs"):
            top = [
                {"token": token, "logprob": math.log(p) if p > 0 else -math.inf}
                for token, p in sorted(self._choices[-1].items(), key=lambda kv: -kv[1])
            ]
            metadata["logprobs"] = {"content": [{"token": text.split(" ")[0], "logprob": 0.0, "top_logprobs": top}]}
        message = AIMessage(content=text, usage_metadata=self._usage(messages, text), response_metadata=metadata)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        tags = run_manager.tags if run_manager else []
        text = self._reply(messages, tags, self._max_tokens(kwargs), kwargs.get("temperature"))
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == len(words) - 1 else word + " "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        usage = self._usage(messages, text)
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage))  # type: ignore[arg-type]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        """The scripted reply as `schema` (see coerce_to_schema), like a model with enforced structured output."""

        def structured(messages: Any, config: RunnableConfig) -> Any:
            raw = self.invoke(messages, config=config)
            try:
                parsed: Any = coerce_to_schema(str(raw.content), schema)
                error = None
            except ValueError as exc:
                parsed, error = None, exc
            if include_raw:
                return {"raw": raw, "parsed": parsed, "parsing_error": error}
            if error is not None:
                raise error
            return parsed

        return RunnableLambda(structured)
