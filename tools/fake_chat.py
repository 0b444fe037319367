"""A scripted chat model for tests (yours and ours): replies per task, records every call.

It stands in for a real LLM behind the same LangChain interface, so a graph runs end to end with no
server. Each reply is chosen by the task the prompt asks for (recognised from the prompt text), from a
script of replies per task; the last reply of a task repeats. Tool binding returns the model itself,
and structured output is not implemented, like langchain-core's fakes: reground then parses JSON text.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field, PrivateAttr

# How a task is recognised: a phrase its prompt always contains (checked in this order).
TASK_MARKERS: tuple[tuple[str, str], ...] = (
    ("Let's make this response more", "refine"),
    ("Rewrite the search query", "reground"),
    ("Standalone question:", "refine_question"),
    ("search keywords", "keywords"),
    ("Rate how useful each numbered passage", "rerank"),
    ("check each numbered passage", "self_check"),
    ("Check this answer", "groundedness"),
    ("Write the support agent's reply", "answer"),
    ("Answer the user's last question", "answer"),  # the evaluation baselines' one call
)

DEFAULT_REPLIES: dict[str, str] = {
    "refine_question": "What is the policy?",
    "keywords": '{"keywords": ["policy"]}',
    "rerank": "[1] 9\n[2] 5\n[3] 2",
    "self_check": "[1] helpful - it answers the question\n[2] not helpful - other topic\n[3] not helpful - other topic",
    "answer": "The passage says so [1].",
    "groundedness": "NONE",
    "reground": "policy details from the conversation",
    "refine": "The passage says so, specifically [1].",
    "other": "OK",
}


def first_passage_reply(messages: Sequence[BaseMessage]) -> str:
    """A grounded one-call answer: the inline self-check line, then passage [1]'s first sentence, cited."""
    lines = str(messages[0].content).splitlines()
    first_text = lines[next(i for i, line in enumerate(lines) if line.startswith("[1]")) + 1]
    return f"Helpful: [1]\n{first_text.split('. ')[0].rstrip('.')}. [1]"


def task_of(messages: Sequence[BaseMessage]) -> str:
    text = "\n".join(str(m.content) for m in messages[-3:])  # a repair retry ends with reply + instruction
    for marker, task in TASK_MARKERS:
        if marker in text:
            return task
    return "other"


class ScriptedChatModel(BaseChatModel):
    """Replies from `script[task]` in order (the last one repeats), else from DEFAULT_REPLIES.

    A reply may be a callable taking the messages, for replies that depend on the prompt; an
    Exception instance is raised instead of replying (to test error paths).
    """

    script: dict[str, list[Any]] = Field(default_factory=dict)
    latency_s: float = 0.0
    _calls: list[tuple[str, list[BaseMessage]]] = PrivateAttr(default_factory=list)
    _served: dict[str, int] = PrivateAttr(default_factory=lambda: defaultdict(int))

    @property
    def _llm_type(self) -> str:
        return "reground-scripted"

    @property
    def calls(self) -> list[tuple[str, list[BaseMessage]]]:
        """(task, messages) of every call so far."""
        return self._calls

    def calls_for(self, task: str) -> int:
        return sum(1 for name, _ in self._calls if name == task)

    def reset(self) -> None:
        self._calls.clear()
        self._served.clear()

    def _reply(self, messages: list[BaseMessage]) -> str:
        task = task_of(messages)
        self._calls.append((task, list(messages)))
        replies = self.script.get(task)
        if not replies:
            return DEFAULT_REPLIES.get(task, DEFAULT_REPLIES["other"])
        index = min(self._served[task], len(replies) - 1)
        self._served[task] += 1
        reply = replies[index]
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(messages)
        return str(reply)

    def _usage(self, messages: list[BaseMessage], text: str) -> dict[str, int]:
        prompt = sum(len(str(m.content).split()) for m in messages)
        completion = len(text.split())
        return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}

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
        text = self._reply(messages)
        message = AIMessage(content=text, usage_metadata=self._usage(messages, text))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        text = self._reply(messages)
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

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model answers structured requests as JSON text")
