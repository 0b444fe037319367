"""Finalize a turn: the answer the user sees (never an ungrounded draft), its citations, and the turn's record."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage
from reground.nodes.common import NodeEnv, collection_trust
from reground.nodes.context import CitationSettings
from reground.nodes.routes import outcome
from reground.nodes.state import Citation, Draft, State, TurnResult
from reground.prompts import answer as answer_prompts
from reground.tools.signals.conflicts import conflict_records, conflict_reply, find_conflicts
from reground.tools.signals.reply_guard import guard_reply, unsupported_contacts
from reground.tools.signals.scoring import squad_tokens
from reground.tools.signals.sensitive import caution_notice, reply_cautions
from reground.tools.text.lexical import lexical_tokens
from reground.tools.text.sentences import CITATION, sentence_spans, split_unit, strip_citations, text_sentences
from reground.tools.types import Passage


def reply_kind(draft: Draft | None, passed: bool) -> str:
    """What the user got: an answer, a partial answer, a clarifying question, or an abstention."""
    if not passed or draft is None:
        return "abstain"
    return draft["kind"] if draft["kind"] in ("partial", "clarify", "hedge") else "answer"


def best_quote(passage: Passage, answer: str, max_chars: int) -> str:
    """What the citation vouches for: per sentence of the answer, the passage sentence sharing most words with it
    (at least half of them); the passage's text from the first of them to the last (a two-sentence answer quotes
    both, not only the longer one), or the best one alone if that stretch is longer than `max_chars`."""
    text = passage["text"]
    spans = sentence_spans(text)
    if not spans:
        return text[:max_chars]
    picked: list[tuple[int, int, str]] = []
    for part in text_sentences(strip_citations(answer)) or [answer]:
        tokens = set(squad_tokens(part))
        best = max(spans, key=lambda span: len(tokens & set(squad_tokens(span[2]))))
        # A sentence of the answer that another passage holds matches none here (half its words at least).
        if 2 * len(tokens & set(squad_tokens(best[2]))) >= len(tokens) > 0 and best not in picked:
            picked.append(best)
    start, end = (min(span[0] for span in picked), max(span[1] for span in picked)) if picked else (0, len(text))
    if end - start > max_chars or not picked:
        # A long stretch, or an answer that restates no sentence closely (a written paraphrase): the one sentence
        # sharing most words with the whole answer.
        whole = set(squad_tokens(answer))
        start, end, _ = max(picked or spans, key=lambda span: len(whole & set(squad_tokens(span[2]))))
    return text[start:end].strip()[:max_chars]


def supporting_passages(answer: str, passages: Sequence[Passage], settings: CitationSettings) -> list[int]:
    """Passages holding at least `min_share` of the answer's content words and `of_best` of the best one's share,
    best first: the passages a citation can vouch for (a passage on another topic shares only common words)."""
    words = set(lexical_tokens(answer))
    if not words:
        return []
    shares = [(len(words & set(lexical_tokens(p["text"]))) / len(words), n) for n, p in enumerate(passages, start=1)]
    best = max(share for share, _ in shares)
    return [
        n
        for share, n in sorted(shares, key=lambda x: -x[0])
        if share >= max(settings.min_share, settings.of_best * best)
    ]


def quoting_passages(answer: str, passages: Sequence[Passage], min_words: int) -> list[int]:
    """The passages holding a unit's sentence of at least `min_words` words of the answer word for word (whitespace
    aside)."""
    leads = [" ".join(split_unit(unit)[0].split()) for unit in text_sentences(strip_citations(answer))]
    leads = [lead for lead in leads if len(lead.split()) >= min_words]
    bodies = [" ".join(p["text"].split()) for p in passages]
    return [n for n, body in enumerate(bodies, start=1) if any(lead in body for lead in leads)]


def citations_for(
    answer: str, passages: Sequence[Passage], helpful: Sequence[int], settings: CitationSettings
) -> list[Citation]:
    """What the answer cites: its [n] markers, the helpful passages or all passages, each kept only if it
    holds the answer's content; a marker or verdict on an unrelated passage is dropped."""
    supporting = supporting_passages(answer, passages, settings)
    # A passage that holds one of the answer's units word for word supports it, whatever its share of the answer's
    # words: an extracted reply of two units (a sentence and its code from one page, a sentence from another)
    # cites both pages.
    quoted = [n for n in quoting_passages(answer, passages, settings.min_quoted_words) if n not in supporting]
    supporting = [*supporting, *quoted]
    marked = [int(n) for n in CITATION.findall(answer) if 1 <= int(n) <= len(passages)]
    numbers = [n for n in marked if n in supporting] or [n for n in supporting if n in helpful] or supporting[:1]
    seen: list[int] = []
    for n in numbers:
        if n not in seen:
            seen.append(n)
    return [
        Citation(
            number=n,
            doc_id=passages[n - 1]["doc_id"],
            title=passages[n - 1].get("title", ""),
            url=passages[n - 1].get("url", ""),
            chunk_id=passages[n - 1]["chunk_id"],
            quote=best_quote(passages[n - 1], answer, settings.max_quote_chars),
        )
        for n in seen
    ]


def finalize(state: State, env: NodeEnv) -> dict[str, Any]:
    """The turn's result: the reply the user sees (the draft if it passed its checks, else the fallback), its
    citations, cautions and conflicts, the assistant message and the turn's record."""
    context = env.context
    draft = state.get("draft")
    text, passed, reason = outcome(draft, state, context)
    review = state.get("review")
    if review:
        action = review.get("action")
        if action == "edit" and str(review.get("answer", "")).strip():
            text, passed, reason = str(review["answer"]).strip(), True, None
        elif action == "reject":
            text = answer_prompts.NOT_FOUND.format(escalation=context.escalation)
            passed, reason = False, "rejected by the reviewer"
    passages = list(state.get("passages", []))
    helpful = [j["number"] for j in state.get("judgements", []) if j["helpful"]]
    kind = reply_kind(draft, passed)
    grounded_answer = (passed or (review or {}).get("action") == "approve") and kind != "clarify"
    citations = citations_for(text, passages, helpful, context.citations) if grounded_answer and passages else []
    not_found = answer_prompts.NOT_FOUND.format(escalation=context.escalation)  # flagged text: never said alone
    text, passed, reason, kind, citations = guard_reply(
        text, passed, reason, kind, citations, passages, not_found, reviewed=bool(review)
    )
    cited = {c["chunk_id"] for c in citations}
    foreign = unsupported_contacts(text, [p["text"] for p in passages if p["chunk_id"] in cited], [])
    if passed and foreign and not review:
        # A link, address or number must come from a cited passage's content, never from elsewhere.
        text, passed, citations = not_found, False, []
        reason = f"the answer gives a contact no cited passage holds: {', '.join(foreign)}"
        kind = "abstain"
    conflicts: list[dict[str, Any]] = []
    if passed and kind in ("answer", "partial") and context.groundedness.surface_conflicts and not review:
        question = state.get("standalone_question") or state.get("question", "")
        found = find_conflicts(text, question, passages, scope=context.metadata_filter)
        if found:
            # Two statements of the fact disagree: both are said, neither is chosen ("supersedes" is no authority).
            text = conflict_reply(found, passages, scope=context.metadata_filter)
            conflicts = conflict_records(found, passages)
            citations = citations_for(
                text,
                passages,
                [n for r in conflicts for n in (s["number"] for s in r["statements"])],
                context.citations,
            )
    if kind == "hedge":
        text = answer_prompts.HEDGE.format(quote=text)  # the closest sentences, said as such (their citations hold)
    cautions = []
    if passed and kind != "clarify" and context.groundedness.check_sensitive_requests:
        cautions = reply_cautions(text, passages, collection_trust(env))
        if cautions:
            text = f"{caution_notice(cautions)}\n{text}"  # the reply, with why it needs care before it
    trace = [*state.get("trace", [])]
    result = TurnResult(
        answer=text,
        citations=citations,
        passages=passages,
        groundedness=draft["groundedness"] if draft else 0.0,
        relevance=draft.get("relevance", 0.0) if draft else 0.0,
        principle_scores=draft["principle_scores"] if draft else {},
        passed=passed,
        fallback_reason=reason,
        reground_attempts=state.get("reground_attempts", 0),
        refine_iterations=state.get("refine_iterations", 0),
        llm_calls=env.stats.llm_calls + sum(e.get("llm_calls", 0) for e in trace),
        prompt_tokens=sum(e.get("prompt_tokens", 0) for e in trace),
        completion_tokens=sum(e.get("completion_tokens", 0) for e in trace),
        seconds=round(time.time() - state.get("turn_started", time.time()), 3),
        review=review,
        notices=list(state.get("notices", [])),
        kind=kind,
        options=list(state.get("options", [])) if kind == "clarify" else [],
        missing=list(state.get("missing", [])) if kind == "partial" else [],
        signals=dict(state.get("signals", {})),
        cautions=[c.reason for c in cautions],
        conflicts=conflicts,
    )
    env.progress("finalize", "done", passed=passed)
    return {"result": result, "messages": [AIMessage(content=text, name="reground")], "review": None}
