// reground chat page: talks to the LangGraph server it is served by (threads, runs/stream) and to the page's own
// routes under /chat/api. Every string that comes from a document or a reply is put in the DOM as text
// (textContent / createTextNode), never as HTML: a document's <script>, javascript: link or remote image stays text.
"use strict";

const APP = "reground-chat"; // thread metadata marking the page's conversations
const KIND_LABELS = {
  answer: "Answer",
  partial: "Partial answer",
  hedge: "Not exactly in the documents",
  clarify: "Question back",
  abstain: "Not in the documents",
};
const STEP_LABELS = {
  start_turn: "reading the question",
  refine_question: "reading the question in its conversation",
  extract_keywords: "picking keywords",
  retrieve: "searching the documents",
  rerank: "ranking the passages",
  triage: "reading the passages",
  clarify: "preparing a question back",
  answer: "drafting the answer",
  check_groundedness: "checking the answer",
  re_ground: "searching again with a better query",
  refine: "improving the answer",
  quote: "quoting the documents",
  review: "waiting for review",
  finalize: "done",
};

const state = {
  config: null,
  threadId: null,
  busy: false,
  timings: [], // per turn: sent, first progress and final reply times (ms, performance.now), read by the tests
};
window.__reground = state;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function oneLine(text) {
  return String(text || "").replace(/\s+/g, " ").trim();
}

function showError(message) {
  const box = $("error");
  if (!message) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.textContent = oneLine(message);
  box.hidden = false;
}

// --- HTTP ---------------------------------------------------------------------------------

async function api(method, path, body) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new Error("The chat server cannot be reached: is `reground ui` still running?");
  }
  if (!response.ok) throw new Error(await failure(response));
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

async function failure(response) {
  let detail = "";
  try {
    const data = await response.json();
    detail = data.detail || data.message || data.error || "";
    if (typeof detail !== "string") detail = JSON.stringify(detail);
  } catch (err) {
    detail = response.statusText;
  }
  return oneLine(detail) || `the server answered ${response.status}`;
}

// Server-sent events from a POST (fetch + a stream reader): yields {event, data}.
async function* sse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let parsed = null;
      try {
        parsed = JSON.parse(data.join("\n"));
      } catch (err) {
        parsed = data.join("\n");
      }
      yield { event, data: parsed };
    }
  }
}

// --- scope --------------------------------------------------------------------------------

function currentScope() {
  const collection = $("collection").value;
  const metadata_filter = {};
  for (const select of $("scope-fields").querySelectorAll("select")) metadata_filter[select.name] = select.value;
  return { collection, metadata_filter };
}

function scopeLabel(scope) {
  const parts = [scope.collection || "?"];
  for (const [key, value] of Object.entries(scope.metadata_filter || {})) {
    parts.push(`${key} ${Array.isArray(value) ? value.join("/") : typeof value === "object" ? JSON.stringify(value) : value}`);
  }
  return parts.join(" · ");
}

function renderScopeFields() {
  const name = $("collection").value;
  const entry = (state.config.collections || {})[name] || { scope: {}, default: {} };
  const saved = JSON.parse(localStorage.getItem("reground-scope") || "{}");
  const holder = $("scope-fields");
  holder.replaceChildren();
  for (const [field, values] of Object.entries(entry.scope || {})) {
    const select = el("select", { name: field, "data-field": field });
    for (const value of values) select.append(el("option", { value, text: value }));
    const wanted = saved.collection === name ? (saved.metadata_filter || {})[field] : undefined;
    select.value = values.includes(wanted) ? wanted : (entry.default || {})[field] || values[0];
    select.addEventListener("change", saveScope);
    holder.append(el("label", {}, field.replace(/_/g, " ") + " ", select));
  }
}

function saveScope() {
  localStorage.setItem("reground-scope", JSON.stringify(currentScope()));
}

async function loadConfig() {
  state.config = await api("GET", "/chat/api/config");
  const select = $("collection");
  select.replaceChildren();
  const names = Object.keys(state.config.collections || {});
  for (const name of names) select.append(el("option", { value: name, text: name }));
  const saved = JSON.parse(localStorage.getItem("reground-scope") || "{}");
  if (names.includes(saved.collection)) select.value = saved.collection;
  renderScopeFields();
  select.addEventListener("change", () => {
    renderScopeFields();
    saveScope();
  });
  $("scope-note").textContent = state.config.enforced
    ? "scope enforced by the server"
    : names.length
      ? "no scope policy: any scope may be asked"
      : "no collections yet: ingest documents first";
}

// --- threads ------------------------------------------------------------------------------

async function listThreads() {
  const threads = await api("POST", "/threads/search", {
    metadata: { app: APP },
    limit: 100,
    sort_by: "updated_at",
    sort_order: "desc",
    select: ["thread_id", "metadata", "updated_at"],
  });
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads || []) list.append(threadItem(thread));
}

function threadItem(thread) {
  const id = thread.thread_id;
  const title = oneLine((thread.metadata || {}).title) || "New conversation";
  const open = el("button", { class: "thread-title", type: "button", title, text: title, onclick: () => openThread(id) });
  const rename = el("button", { class: "small rename", type: "button", title: "Rename", "aria-label": "Rename", text: "✎" });
  const remove = el("button", { class: "small delete", type: "button", title: "Delete", "aria-label": "Delete", text: "×" });
  const item = el("li", { "data-thread-id": id, class: id === state.threadId ? "current" : "" }, open, rename, remove);
  rename.addEventListener("click", () => {
    const input = el("input", { class: "thread-title-input", value: title, "aria-label": "New title" });
    const save = async () => {
      const value = oneLine(input.value);
      if (value && value !== title) await guarded(() => api("PATCH", `/threads/${id}`, { metadata: { title: value } }));
      await listThreads();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") save();
      if (event.key === "Escape") listThreads();
    });
    input.addEventListener("blur", save, { once: true });
    open.replaceWith(input);
    input.focus();
    input.select();
  });
  remove.addEventListener("click", async () => {
    if (remove.dataset.armed !== "1") {
      remove.dataset.armed = "1";
      remove.textContent = "Delete?";
      return;
    }
    await guarded(() => api("DELETE", `/threads/${id}`));
    if (state.threadId === id) newThread();
    await listThreads();
  });
  return item;
}

function markCurrent() {
  for (const item of $("threads").children) item.classList.toggle("current", item.dataset.threadId === state.threadId);
}

function newThread() {
  state.threadId = null;
  history.replaceState(null, "", "#");
  $("conversation").replaceChildren();
  markCurrent();
  closePassage();
  $("question").focus();
}

async function openThread(id) {
  showError("");
  closePassage();
  const data = await guarded(() => api("GET", `/chat/api/threads/${encodeURIComponent(id)}/turns`));
  if (!data) return;
  state.threadId = id;
  history.replaceState(null, "", `#thread=${encodeURIComponent(id)}`);
  const conversation = $("conversation");
  conversation.replaceChildren();
  for (const turn of data.turns) {
    conversation.append(userMessage(turn.question));
    const reply = el("article", { class: "reply" });
    conversation.append(reply);
    renderReply(reply, turn.result, turn.scope, turn.message_id, turn.feedback);
  }
  markCurrent();
  conversation.scrollTop = conversation.scrollHeight;
}

async function guarded(action) {
  try {
    return await action();
  } catch (err) {
    showError(err.message);
    return null;
  }
}

// --- a turn -------------------------------------------------------------------------------

function userMessage(text) {
  return el("div", { class: "user-message", text });
}

async function ask(question) {
  if (state.busy || !oneLine(question)) return;
  state.busy = true;
  $("send").disabled = true;
  showError("");
  const timing = { question, sent: performance.now(), firstProgress: null, final: null };
  state.timings.push(timing);
  const scope = currentScope();
  const conversation = $("conversation");
  conversation.append(userMessage(question));
  const reply = el("article", { class: "reply pending" });
  const progress = el("p", { class: "progress", text: "sending…" });
  reply.append(progress);
  conversation.append(reply);
  conversation.scrollTop = conversation.scrollHeight;
  try {
    if (!state.threadId) {
      const thread = await api("POST", "/threads", { metadata: { app: APP, title: oneLine(question).slice(0, 80) } });
      state.threadId = thread.thread_id;
      history.replaceState(null, "", `#thread=${encodeURIComponent(state.threadId)}`);
      listThreads();
    }
    const result = await streamTurn(question, scope, (message) => {
      progress.textContent = message;
      if (timing.firstProgress === null) timing.firstProgress = performance.now();
    });
    renderReply(reply, result, scope, null, null);
    timing.final = performance.now();
    reply.dataset.final = "1";
    const messageId = await lastReplyId();
    if (messageId) attachFeedback(reply, messageId, null);
  } catch (err) {
    reply.className = "reply failed";
    reply.replaceChildren(el("p", { class: "error-line", text: oneLine(err.message) }));
    showError(err.message);
  } finally {
    state.busy = false;
    $("send").disabled = false;
    conversation.scrollTop = conversation.scrollHeight;
  }
}

async function streamTurn(question, scope, onProgress) {
  let response;
  try {
    response = await fetch(`/threads/${state.threadId}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        assistant_id: state.config.graph || "reground",
        input: { messages: [{ role: "user", content: question }] },
        context: scope,
        stream_mode: ["custom", "updates"],
        on_disconnect: "cancel",
      }),
    });
  } catch (err) {
    throw new Error("The chat server cannot be reached: is `reground ui` still running?");
  }
  if (!response.ok) throw new Error(await failure(response));
  let result = null;
  for await (const { event, data } of sse(response)) {
    if (event === "custom" && data && data.message) {
      onProgress(data.message === "done" ? "done" : `${data.message}…`);
    } else if (event === "updates" && data && typeof data === "object") {
      for (const [node, update] of Object.entries(data)) {
        if (update && update.result) result = update.result;
        else if (STEP_LABELS[node] && node !== "finalize") onProgress(`${STEP_LABELS[node]}…`);
      }
    } else if (event === "error") {
      throw new Error(oneLine((data && (data.message || data.error)) || "the turn failed"));
    }
  }
  if (!result) throw new Error("The turn ended without a reply; ask again.");
  return result;
}

async function lastReplyId() {
  const snapshot = await guarded(() => api("GET", `/threads/${state.threadId}/state`));
  const messages = ((snapshot || {}).values || {}).messages || [];
  const last = messages[messages.length - 1];
  return last && last.type === "ai" ? last.id : null;
}

// --- a reply ------------------------------------------------------------------------------

function renderReply(node, result, scope, messageId, feedback) {
  const kind = KIND_LABELS[result.kind] ? result.kind : "answer";
  node.className = `reply kind-${kind}`;
  node.dataset.kind = kind;
  node.replaceChildren();
  const checks = result.passed && ["answer", "partial", "hedge"].includes(kind)
    ? `checked: grounded ${Number(result.groundedness || 0).toFixed(2)}, relevant ${Number(result.relevance || 0).toFixed(2)}`
    : "";
  const cost = `${result.llm_calls || 0} LLM calls, ${Number(result.seconds || 0).toFixed(1)} s`;
  node.append(
    el(
      "header",
      {},
      el("span", { class: "kind-badge", text: KIND_LABELS[kind] }),
      el("span", { class: "scope-chip", title: "The scope this reply was answered in", text: scopeLabel(scope) }),
      el("span", { class: "checks", text: [checks, cost].filter(Boolean).join(" · ") }),
    ),
  );
  const citations = result.citations || [];
  node.append(replyBody(result.answer || "", citations, result.passages || []));
  if (kind === "clarify" && (result.options || []).length) {
    const options = el("div", { class: "options", role: "group", "aria-label": "Which one do you mean?" });
    for (const option of result.options) {
      options.append(el("button", { type: "button", class: "option", text: option.label, onclick: () => ask(option.label) }));
    }
    node.append(options);
  }
  if (kind === "partial" && (result.missing || []).length) {
    node.append(el("p", { class: "missing", text: `The documents do not cover: ${result.missing.join(", ")}` }));
  }
  for (const notice of result.notices || []) node.append(el("p", { class: "notice", text: `Note: ${notice}` }));
  if (!result.passed && result.fallback_reason && kind === "abstain") {
    node.append(el("p", { class: "fallback", text: `Why: ${result.fallback_reason}` }));
  }
  if (citations.length) {
    const sources = el("ol", { class: "sources" });
    for (const citation of citations) {
      sources.append(
        el(
          "li",
          {},
          `[${citation.number}] `,
          el("button", {
            type: "button",
            class: "source-open",
            text: citation.title || citation.doc_id,
            onclick: () => openPassage(citation, result.passages || []),
          }),
        ),
      );
    }
    node.append(sources);
  }
  if (messageId) attachFeedback(node, messageId, feedback);
}

// The reply's text: fenced ``` blocks as code, paragraphs as text, [n] markers as buttons opening the passage.
function replyBody(text, citations, passages) {
  const body = el("div", { class: "reply-body" });
  const parts = String(text).split(/^```/m);
  parts.forEach((part, index) => {
    if (index % 2 === 1) {
      const newline = part.indexOf("\n");
      const language = newline >= 0 ? part.slice(0, newline).trim() : "";
      const code = newline >= 0 ? part.slice(newline + 1) : part;
      const codeNode = el("code", { text: code.replace(/\n$/, "") });
      if (/^[\w+-]{1,20}$/.test(language)) codeNode.dataset.language = language;
      body.append(el("pre", {}, codeNode));
      return;
    }
    for (const paragraph of part.split(/\n{2,}/)) {
      if (!paragraph.trim()) continue;
      body.append(inline(paragraph.trim(), citations, passages));
    }
  });
  return body;
}

const MARK_CONTEXT = 24; // characters beside a [n] compared with the passages to tell a document's own mark

function squeeze(text) {
  return String(text || "").replace(/\s+/g, " ");
}

// A "[n]" the passages themselves hold where the reply has it (a footnote mark copied with its sentence) is the
// document's text, not a citation: it stays text and opens nothing.
function documentsHold(text, index, marker, passages) {
  const before = squeeze(text.slice(Math.max(0, index - MARK_CONTEXT), index)).trimStart();
  const after = squeeze(text.slice(index + marker.length, index + marker.length + MARK_CONTEXT)).trimEnd();
  const needle = before.trim() ? before + marker : marker + after;
  if (!needle.trim() || needle.trim() === marker) return false;
  return passages.some((p) => squeeze(p.text).includes(needle));
}

function inline(text, citations, passages) {
  const paragraph = el("p");
  const pattern = /\[(\d+)\]|`([^`\n]+)`/g;
  let last = 0;
  let match;
  while ((match = pattern.exec(text)) !== null) {
    paragraph.append(document.createTextNode(text.slice(last, match.index)));
    if (match[2] !== undefined) {
      paragraph.append(el("code", { text: match[2] }));
    } else {
      const own = documentsHold(text, match.index, match[0], passages);
      const citation = own ? null : citations.find((c) => c.number === Number(match[1]));
      paragraph.append(
        citation
          ? el("button", {
              type: "button",
              class: "cite",
              title: citation.title || citation.doc_id,
              text: `[${citation.number}]`,
              onclick: () => openPassage(citation, passages),
            })
          : document.createTextNode(match[0]),
      );
    }
    last = pattern.lastIndex;
  }
  paragraph.append(document.createTextNode(text.slice(last)));
  return paragraph;
}

// An http(s) link opens in a new tab without a referrer; any other scheme is text. An address with a user part
// (good.example@evil.example) names its real host after the "@": it is not linked, and says that host.
function safeLink(url) {
  try {
    const parsed = new URL(url);
    if ((parsed.protocol === "http:" || parsed.protocol === "https:") && (parsed.username || parsed.password)) {
      return el("span", { class: "unsafe-link", text: `${url} (its host is ${parsed.host}, not the name before the @)` });
    }
    if (parsed.protocol === "http:" || parsed.protocol === "https:") {
      return el("a", { href: parsed.href, target: "_blank", rel: "noopener noreferrer", text: url });
    }
  } catch (err) {
    // not a URL: shown as text below
  }
  return el("span", { class: "unsafe-link", text: url });
}

function openPassage(citation, passages) {
  const passage = passages.find((p) => p.chunk_id === citation.chunk_id) || { text: citation.quote };
  $("passage-title").textContent = citation.title || citation.doc_id;
  const source = $("passage-source");
  source.replaceChildren();
  if (passage.section) source.append(`${passage.section} · `);
  source.append(citation.url ? safeLink(citation.url) : citation.doc_id);
  const holder = $("passage-text");
  holder.replaceChildren();
  const text = String(passage.text || "");
  const quote = String(citation.quote || "");
  const at = quote ? text.indexOf(quote) : -1;
  if (at >= 0) {
    holder.append(text.slice(0, at), el("mark", { text: quote }), text.slice(at + quote.length));
  } else {
    holder.append(text);
    if (quote) holder.append(el("p", {}, el("mark", { text: quote })));
  }
  const opener = document.activeElement && document.activeElement.closest(".reply");
  $("passage").hidden = false;
  $("layout").classList.add("with-passage");
  if (opener) opener.scrollIntoView({ block: "nearest" }); // the narrower column reflows: keep the reply in view
  const mark = holder.querySelector("mark");
  if (mark) mark.scrollIntoView({ block: "nearest" });
}

function closePassage() {
  $("passage").hidden = true;
  $("layout").classList.remove("with-passage");
}

function attachFeedback(node, messageId, feedback) {
  node.dataset.messageId = messageId;
  const old = node.querySelector(".feedback");
  if (old) old.remove();
  const status = el("span", { class: "muted feedback-status" });
  const note = el("input", { class: "feedback-note", placeholder: "optional note", "aria-label": "Note", maxlength: "2000" });
  const up = el("button", { type: "button", class: "rate-up", title: "Helpful", text: "Helpful" });
  const down = el("button", { type: "button", class: "rate-down", title: "Not helpful", text: "Not helpful" });
  const save = el("button", { type: "button", class: "feedback-save", text: "Save note" });
  let rating = feedback ? feedback.rating : null;
  if (feedback && feedback.note) note.value = feedback.note;
  const paint = () => {
    up.classList.toggle("chosen", rating === "up");
    down.classList.toggle("chosen", rating === "down");
    save.disabled = !rating;
  };
  const send = async () => {
    const stored = await guarded(() =>
      api("POST", "/chat/api/feedback", { thread_id: state.threadId, message_id: messageId, rating, note: note.value }),
    );
    if (stored) status.textContent = `saved: ${stored.rating === "up" ? "helpful" : "not helpful"}`;
  };
  up.addEventListener("click", () => { rating = "up"; paint(); send(); });
  down.addEventListener("click", () => { rating = "down"; paint(); send(); });
  save.addEventListener("click", send);
  if (feedback) status.textContent = `saved: ${feedback.rating === "up" ? "helpful" : "not helpful"}`;
  paint();
  node.append(el("footer", { class: "feedback" }, up, down, note, save, status));
}

// --- start --------------------------------------------------------------------------------

async function start() {
  $("ask").addEventListener("submit", (event) => {
    event.preventDefault();
    const question = $("question").value;
    $("question").value = "";
    ask(question);
  });
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("ask").requestSubmit();
    }
  });
  $("new-thread").addEventListener("click", newThread);
  $("passage-close").addEventListener("click", closePassage);
  await guarded(loadConfig);
  await guarded(listThreads);
  const wanted = new URLSearchParams(location.hash.slice(1)).get("thread");
  if (wanted) await openThread(wanted);
  document.body.dataset.ready = "1";
}

start();
