"""reground on the real `langgraph dev` server, driven through the official SDK client.

One local LLM server (SmolLM2-135M: fast, answers are junk) and one `langgraph dev` serve the whole
module. Assertions are about structure and behaviour — the thread carries the history, citations
point at real chunks, the review edit is what the thread ends with — never about answer quality.
Runs use a short answer budget, no LLM groundedness judge and no loops unless a test needs them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import httpx
import pytest
from servers import REPO, LanggraphDev, LocalLLM, free_port, openai_base, start_langgraph_dev, start_local_llm

pytestmark = pytest.mark.integration

LLM_MODEL = "smollm2-135m"

# Fast settings for plumbing tests; a test that needs a loop or a judge turns it on itself.
FAST: dict[str, Any] = {
    "collection": "test-hr",
    "chat_model": f"local:{LLM_MODEL}",
    "models": {"max_answer_tokens": 40, "llm_timeout_s": 60.0},
    "groundedness": {"use_llm_groundedness_judge": False, "max_reground_attempts": 0},
    "evidence": {"use_self_check": False},
    "use_principle_refinement": False,
}
# The same with replies written by the model (the default quotes the passages and calls no model on a first turn).
WRITE: dict[str, Any] = {**FAST, "answer_style": "write"}


def _requires_local_llm() -> None:
    try:
        import llama_cpp  # noqa: F401
        from reground.tools.adapters import local_server  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"local LLM stack not installed ({exc}); `make test` installs it")


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLLM]:
    running = os.environ.get("REGROUND_TEST_LLM_URL")  # reuse a server you started (faster iterations)
    if running:
        yield LocalLLM(url=openai_base(running), pid=0, model=LLM_MODEL)
        return
    _requires_local_llm()
    server = start_local_llm(LLM_MODEL, tmp_path_factory.mktemp("llm-state"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server_data_dir(tmp_path_factory: pytest.TempPathFactory, hr_store_dir: str) -> Path:
    """A copy of the HR store that only the server process opens (it also ingests into it)."""
    target = tmp_path_factory.mktemp("server-data") / "store"
    shutil.copytree(hr_store_dir, target)
    return target


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: LocalLLM, server_data_dir: Path) -> Iterator[LanggraphDev]:
    workdir = tmp_path_factory.mktemp("langgraph-dev")  # .langgraph_api/ lands here, not in the repo
    env = {
        "REGROUND_DATA_DIR": str(server_data_dir),
        "REGROUND_LOCAL_LLM_URL": llm.url,
        "REGROUND_STATE_DIR": str(workdir / "state"),
    }
    dev = start_langgraph_dev(workdir, env)
    try:
        yield dev
    finally:
        dev.stop()
    assert not (REPO / ".langgraph_api").exists() or _created_before(REPO / ".langgraph_api", dev)


def _created_before(path: Path, dev: LanggraphDev) -> bool:
    """A .langgraph_api in the repo is tolerated only if it predates this server."""
    return path.stat().st_mtime < dev.log_path.stat().st_ctime


@pytest.fixture(scope="module")
def client(server: LanggraphDev) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=server.url, timeout=httpx.Timeout(300.0, connect=10.0))


@pytest.fixture(scope="module")
def store_chunks(server_data_dir: Path) -> dict[str, dict[str, Any]]:
    """Chunk ids of the HR collection, read before the server writes anything."""
    from reground.tools.stores.store import PassageStore

    return {c["chunk_id"]: dict(c) for c in PassageStore.open("test-hr", data_dir=server_data_dir).all_chunks()}


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def assistant_id(client: Any, graph_id: str) -> str:
    found = client.assistants.search(graph_id=graph_id)
    assert found, f"no assistant for graph {graph_id!r}"
    return str(found[0]["assistant_id"])


def check_result(
    result: dict[str, Any], chunks: dict[str, dict[str, Any]], answered_by: Literal["extract", "write", "human"]
) -> None:
    """Structure every turn must have, whatever the model said: an extracted reply is made of passage sentences,
    a written one cost at least one model call."""
    assert isinstance(result["answer"], str) and result["answer"].strip()
    assert result["passages"], "retrieval found nothing in a collection that has the answer"
    passage_ids = [p["chunk_id"] for p in result["passages"]]
    assert set(passage_ids) <= set(chunks), "passages must be real stored chunks"
    for citation in result["citations"]:
        assert citation["chunk_id"] in passage_ids, citation
        assert citation["quote"] in chunks[citation["chunk_id"]]["text"]
    assert result["seconds"] > 0
    if answered_by == "write":
        assert result["llm_calls"] >= 1
    if answered_by == "extract" and result["kind"] == "answer":
        passage_text = " ".join(" ".join(chunks[chunk_id]["text"].split()) for chunk_id in passage_ids)
        reply = re.sub(r"\s*\[\d+\]", "", result["answer"])
        for sentence in re.split(r"(?<=[.!?:])\s+|\n+", reply):
            sentence = " ".join(sentence.lstrip("-*• ").split())
            assert not sentence or sentence in passage_text, (sentence, result["answer"])


def message_texts(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], str(m["content"])) for m in state["values"]["messages"]]


# --- schema ---


@pytest.mark.parametrize("graph_id", ["reground", "ingest"])
def test_context_schema_describes_every_field(client: Any, graph_id: str) -> None:
    schemas = client.assistants.get_schemas(assistant_id(client, graph_id))
    properties = schemas["context_schema"]["properties"]
    assert properties, "the server must publish the context schema (Studio's configuration form)"
    undescribed = sorted(name for name, spec in properties.items() if not str(spec.get("description", "")).strip())
    assert not undescribed, f"context fields without a description in Studio: {undescribed}"
    assert "collection" in properties and "data_dir" in properties


# --- conversation on a server-side thread ---

TURNS = [
    "How many days of annual leave do full-time employees in Germany get?",
    "And in the United States?",
    "Which of the two lets me carry over more unused days?",
]


@pytest.fixture(scope="module")
def three_turn_thread(client: Any, store_chunks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    results = []
    for question in TURNS:
        output = client.runs.wait(thread_id, aid, input=user(question), context=FAST)
        assert "result" in output, f"run failed: {output}"
        results.append(output["result"])
    return {"thread_id": thread_id, "results": results, "assistant_id": aid}


def test_three_turns_on_a_thread_carry_the_history(
    client: Any, three_turn_thread: dict[str, Any], store_chunks: dict[str, Any]
) -> None:
    for result in three_turn_thread["results"]:
        check_result(result, store_chunks, "extract")
    state = client.threads.get_state(three_turn_thread["thread_id"])
    roles = [role for role, _ in message_texts(state)]
    assert roles == ["human", "ai"] * 3
    assert [text for role, text in message_texts(state) if role == "human"] == TURNS
    # The third turn was answered with the first two in its history: the server's thread state
    # carried them.
    history = state["values"]["history"]
    assert [h["text"] for h in history if h["role"] == "user"] == TURNS[:2]
    assert state["values"]["question"] == TURNS[2]
    nodes = [e["node"] for e in state["values"]["trace"]]
    assert "refine_question" in nodes, "a follow-up goes through the question refiner"


def test_state_history_lists_every_turn(client: Any, three_turn_thread: dict[str, Any]) -> None:
    history = client.threads.get_history(three_turn_thread["thread_id"], limit=200)
    assert len(history) > 3
    counts = sorted({len(h["values"].get("messages", [])) for h in history})
    assert {1, 2, 3, 4, 5, 6} <= set(counts), counts
    finals = [h for h in history if h["values"].get("result") and not h["next"]]
    assert len({h["values"]["result"]["answer"] + str(len(h["values"]["messages"])) for h in finals}) >= 3


def test_stream_updates_custom_progress_and_message_tokens(client: Any, store_chunks: dict[str, Any]) -> None:
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    started = time.perf_counter()
    seen: dict[str, list[Any]] = {}
    first_custom_s = None
    for part in client.runs.stream(
        thread_id,
        aid,
        input=user(TURNS[0]),
        context=WRITE,
        stream_mode=["updates", "custom", "messages-tuple"],
    ):
        seen.setdefault(part.event, []).append(part.data)
        if part.event == "custom" and first_custom_s is None:
            first_custom_s = time.perf_counter() - started
    total_s = time.perf_counter() - started
    assert "error" not in seen, seen.get("error")
    updated_nodes = [node for update in seen.get("updates", []) for node in update]
    for node in ("start_turn", "retrieve", "answer", "finalize"):
        assert node in updated_nodes, updated_nodes
    custom = seen.get("custom", [])
    assert custom and all("node" in event and "message" in event for event in custom), custom
    assert any(event["node"] == "retrieve" for event in custom)
    tokens = [data[0] for data in seen.get("messages", []) if data and data[0].get("type") == "AIMessageChunk"]
    assert tokens, f"no message tokens streamed; events: {sorted(seen)}"
    assert "".join(str(t.get("content", "")) for t in tokens).strip()
    assert first_custom_s is not None and first_custom_s < total_s
    final = client.threads.get_state(thread_id)["values"]["result"]
    check_result(final, store_chunks, "write")


def test_thread_survives_a_server_restart(client: Any, server: LanggraphDev, three_turn_thread: dict[str, Any]) -> None:
    thread_id = three_turn_thread["thread_id"]
    before = client.threads.get_state(thread_id)
    history_before = client.threads.get_history(thread_id, limit=200)
    server.restart()
    after = client.threads.get_state(thread_id)
    assert message_texts(after) == message_texts(before)
    assert after["values"]["result"] == before["values"]["result"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    assert len(client.threads.get_history(thread_id, limit=200)) == len(history_before)
    assert httpx.get(f"{server.url}/ok").status_code == 200


# --- review mode ---


def test_review_pauses_then_resumes_with_the_edited_answer(client: Any, store_chunks: dict[str, Any]) -> None:
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    context = {**FAST, "review_mode": "all"}
    client.runs.wait(thread_id, aid, input=user(TURNS[0]), context=context)
    thread = client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    state = client.threads.get_state(thread_id)
    assert state["next"] == ["review"]
    interrupts = [i for task in state["tasks"] for i in task["interrupts"]]
    assert interrupts and interrupts[0]["value"]["question"] == TURNS[0]
    assert interrupts[0]["value"]["passages"], "the reviewer sees the passages"
    assert not any(m["type"] == "ai" for m in state["values"]["messages"]), "nothing answered before review"

    edited = "Full-time employees in Germany get 30 days of paid annual leave [1]."
    output = client.runs.wait(thread_id, aid, command={"resume": {"action": "edit", "answer": edited}}, context=context)
    final = client.threads.get_state(thread_id)
    assert final["next"] == []
    assert message_texts(final)[-1] == ("ai", edited)
    result = output["result"]
    assert result["answer"] == edited and result["passed"] and result["review"]["action"] == "edit"
    check_result(result, store_chunks, "human")
    assert [c["chunk_id"] for c in result["citations"]] == [result["passages"][0]["chunk_id"]]


# --- ingestion graph ---

NEW_DOC = {
    "doc_id": "parental-leave-acme",
    "title": "Parental leave",
    "url": "https://hr.example/parental",
    "country": "all",
    "employment_type": "all",
    "text": "# Parental leave\n\nEach parent gets sixteen weeks of fully paid parental leave after "
    "the birth or adoption of a child. Apply through the Quokka portal at least eight weeks "
    "before the leave starts.",
}


@pytest.mark.parametrize("collection", ["test-hr", "test-ingested"], ids=["existing-collection", "new-collection"])
def test_ingest_through_the_server_then_ask(client: Any, three_turn_thread: dict[str, Any], collection: str) -> None:
    doc = {**NEW_DOC, "doc_id": f"{NEW_DOC['doc_id']}-{collection}"}
    summary = client.runs.wait(
        None,
        assistant_id(client, "ingest"),
        input={"documents": [doc]},
        context={"collection": collection},
    )
    assert "summary" in summary, summary
    assert summary["summary"]["collection"] == collection
    output = client.runs.wait(
        None,
        assistant_id(client, "reground"),
        input=user("How many weeks of parental leave does each parent get, and where do I apply?"),
        context={**FAST, "collection": collection},
    )
    doc_ids = [p["doc_id"] for p in output["result"]["passages"]]
    assert doc["doc_id"] in doc_ids, f"the ingested document is not retrieved from {collection!r}: {doc_ids}"


def test_ingest_rejects_bad_input_clearly(client: Any, server: LanggraphDev) -> None:
    aid = assistant_id(client, "ingest")
    with pytest.raises(Exception, match="needs a non-empty 'text'"):
        client.runs.wait(
            None,
            aid,
            input={"documents": [{"doc_id": "x", "text": " "}]},
            context={"collection": "test-hr"},
        )
    with pytest.raises(Exception, match="does not exist on the server"):
        client.runs.wait(
            None,
            aid,
            input={"paths": ["/nonexistent/reground.md"]},
            context={"collection": "test-hr"},
        )
    assert httpx.get(f"{server.url}/ok").status_code == 200


# --- many users at once ---

CONCURRENT_QUESTIONS = [
    ("How many days of annual leave do full-time employees in Germany get?", "annual-leave-de"),
    ("How much paid time off do employees in the United States get?", "annual-leave-us"),
    ("When do I need a doctor's certificate when I am sick?", "sick-pay-all"),
    ("Which class should I book trains in on business trips?", "travel-all"),
    ("How long do I have to submit travel expense receipts?", "travel-all"),
]


def test_ten_threads_at_once_each_answer_tied_to_its_thread(client: Any, store_chunks: dict[str, Any]) -> None:
    aid = assistant_id(client, "reground")
    context = {**FAST, "models": {**FAST["models"], "max_answer_tokens": 24}, "use_question_refiner": False}
    jobs = []
    for i in range(10):
        question, doc_id = CONCURRENT_QUESTIONS[i % len(CONCURRENT_QUESTIONS)]
        question = f"{question} (ticket {i}-{uuid.uuid4().hex[:6]})"
        thread_id = client.threads.create(metadata={"user": f"user-{i}"})["thread_id"]
        run = client.runs.create(thread_id, aid, input=user(question), context=context)
        jobs.append((thread_id, run["run_id"], question, doc_id))
    for user_number, (thread_id, run_id, question, doc_id) in enumerate(jobs):
        output = client.runs.join(thread_id, run_id)
        assert client.runs.get(thread_id, run_id)["status"] == "success", output
        state = client.threads.get_state(thread_id)
        assert message_texts(state)[0] == ("human", question)
        assert len(state["values"]["messages"]) == 2
        assert state["values"]["question"] == question
        assert state["values"]["result"] == output["result"]
        check_result(output["result"], store_chunks, "extract")
        assert doc_id in [p["doc_id"] for p in output["result"]["passages"]]
        assert client.threads.get(thread_id)["metadata"]["user"] == f"user-{user_number}"


# --- errors ---


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ({"top_n": 0}, "top_n"),
        ({"review_mode": "sometimes"}, "review_mode"),
        ({"collection": "no-such-collection"}, "no-such-collection"),
    ],
    ids=["top_n=0", "bad-review-mode", "unknown-collection"],
)
def test_bad_context_fails_the_run_clearly_and_the_server_stays_up(
    client: Any, server: LanggraphDev, context: dict[str, Any], expected: str
) -> None:
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    with pytest.raises(Exception) as failure:
        client.runs.wait(thread_id, aid, input=user(TURNS[0]), context={**FAST, **context}, raise_error=True)
    assert expected in str(failure.value)
    runs = client.runs.list(thread_id)
    assert runs and runs[0]["status"] == "error"
    assert httpx.get(f"{server.url}/ok").status_code == 200
    # The thread is still usable with good settings, and the failed turn left no second user message.
    output = client.runs.wait(thread_id, aid, input=user(TURNS[0]), context=FAST)
    assert output["result"]["answer"]
    assert [role for role, _ in message_texts(client.threads.get_state(thread_id))] == ["human", "ai"]


DEAD_LLM = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there: an LLM server that is down
SDK_ERRORS = [
    ({"collection": "no-such-collection"}, TURNS[0], "CollectionNotFoundError", ("no-such-collection", "test-hr")),
    ({"metadata_filter": {"country": {"$regex": "D"}}}, TURNS[0], "MetadataFilterError", ("$regex",)),
    ({"metadata_filter": {"team": "x"}}, TURNS[0], "UnknownMetadataFieldError", ("team", "country")),
    ({"metadata_filter": ["DE"]}, TURNS[0], "ContextError", ("metadata_filter",)),
    ({"collection": "../../etc"}, TURNS[0], "ContextError", ("collection",)),
    # A written reply needs the model (the extract default answers without it, tests/unit/test_cli_offline.py).
    (
        {"chat_model": f"openai-compatible:local@{DEAD_LLM}", "answer_style": "write"},
        TURNS[0],
        "LLMUnavailableError",
        (DEAD_LLM, "llm serve"),
    ),
]


@pytest.mark.parametrize(
    ("context", "question", "error_type", "needles"),
    SDK_ERRORS,
    ids=["unknown-collection", "bad-operator", "unknown-field", "filter-list", "path-traversal", "llm-down"],
)
def test_errors_reach_sdk_clients_as_their_type_and_one_line_message(
    client: Any, server: LanggraphDev, context: dict[str, Any], question: str, error_type: str, needles: tuple[str, ...]
) -> None:
    """The same errors the CLI prints reach an SDK client as {error: type, message: one line}, no stack trace."""
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    events = list(client.runs.stream(thread_id, aid, input=user(question), context={**FAST, **context}))
    errors = [e.data for e in events if e.event == "error"]
    assert len(errors) == 1, [e.event for e in events]
    error = errors[0]
    assert error["error"] == error_type, error
    message = str(error["message"])
    assert all(n in message for n in needles), message
    assert "\n" not in message.strip() and "Traceback" not in message and 'File "' not in message
    assert set(error) <= {"error", "message"}, f"no stack trace or internals for the client: {sorted(error)}"
    waited = client.runs.wait(thread_id, aid, input=user(question), context={**FAST, **context}, raise_error=False)
    assert waited == {"__error__": {"error": error_type, "message": error["message"]}}
    assert client.runs.list(thread_id)[0]["status"] == "error"
    # A context error fails before the input is written (the thread stays empty); a failure inside the
    # graph leaves the question, once, resumable, until the next question replaces it.
    messages = client.threads.get_state(thread_id)["values"].get("messages", [])
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans in ([], [question]), f"two failed runs of one question leave at most that question: {humans}"


@pytest.mark.parametrize("question", ["", "   ", "\U0001f642\U0001f642 \x07"], ids=["empty", "blank", "emoji"])
def test_an_empty_question_is_answered_not_failed(client: Any, question: str) -> None:
    """No letter or digit: the run succeeds with the 'please type a question' reply, no retrieval, no LLM call."""
    from reground.prompts.answer import EMPTY_QUESTION

    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    events = list(client.runs.stream(thread_id, aid, input=user(question), context=FAST, stream_mode="values"))
    assert not [e.data for e in events if e.event == "error"]
    result = events[-1].data["result"]
    assert result["answer"] == EMPTY_QUESTION.format(collection=FAST["collection"])
    assert result["llm_calls"] == 0 and result["passages"] == [] and not result["passed"]
    assert client.runs.list(thread_id)[0]["status"] == "success"


def test_llm_killed_mid_answer_fails_the_run_clearly_then_the_thread_holds_one_message_per_question(
    client: Any, server: LanggraphDev, tmp_path: Path
) -> None:
    """Kill the LLM server while a call is in flight, restart it, ask again."""
    _requires_local_llm()
    from reground.tools.adapters.local_server import launch

    port = free_port()
    llm = launch(LLM_MODEL, port=port, log=tmp_path / "llm.log")
    url = openai_base(llm.url)
    context = {**WRITE, "chat_model": f"openai-compatible:local@{url}"}
    aid = assistant_id(client, "reground")
    thread_id = client.threads.create()["thread_id"]
    try:
        assert "result" in client.runs.wait(thread_id, aid, input=user(TURNS[0]), context=context)
        errors: list[dict[str, Any]] = []
        killed = False
        for part in client.runs.stream(
            thread_id, aid, input=user(TURNS[1]), context=context, stream_mode=["messages-tuple", "updates"]
        ):
            if part.event == "messages" and not killed:  # the first token: a model call is in flight
                llm.process.kill()
                llm.process.wait(timeout=30)
                killed = True
            if part.event == "error":
                errors.append(part.data)
        assert killed, "no model call streamed a token"
        assert len(errors) == 1, errors
        assert errors[0]["error"] == "LLMUnavailableError", errors[0]
        assert url in errors[0]["message"] and "reground llm serve" in errors[0]["message"]
        assert [role for role, _ in message_texts(client.threads.get_state(thread_id))] == ["human", "ai", "human"]

        llm = launch(LLM_MODEL, port=port, log=tmp_path / "llm2.log")
        output = client.runs.wait(thread_id, aid, input=user(TURNS[1]), context=context)
        assert "result" in output, output
    finally:
        if llm.process.poll() is None:
            llm.process.kill()
            llm.process.wait(timeout=30)
    state = client.threads.get_state(thread_id)
    assert [role for role, _ in message_texts(state)] == ["human", "ai", "human", "ai"]
    assert [text for role, text in message_texts(state) if role == "human"] == TURNS[:2]
    assert [h["text"] for h in state["values"]["history"] if h["role"] == "user"] == TURNS[:1]


# --- RemoteGraph ---


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"reground_example_{name}", REPO / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_remote_graph_example_against_the_server(server: LanggraphDev, store_chunks: dict[str, Any]) -> None:
    example = _example("remote_graph")
    remote = example.connect(server.url)
    thread_id = str(uuid.uuid4())
    events = example.stream_progress(remote, thread_id, TURNS[0], FAST)
    assert any(e.get("node") == "finalize" for e in events), events
    result = example.ask(remote, thread_id, TURNS[1], FAST)
    check_result(result, store_chunks, "extract")
    state = remote.get_state({"configurable": {"thread_id": thread_id}})
    assert len(state.values["messages"]) == 4
