"""ConvRAG's self-check generator with the HR chatbot's answer rules and ProMiSe's best-of-N start."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reground.graph.state import Draft, PassageJudgement, State
from reground.nodes.common import NodeEnv, grounded_messages, numbered_lines
from reground.prompts import answer as answer_prompts
from reground.tools.chat import LLMReplyError, call_parsed
from reground.tools.scoring import majority_best, principle_scores
from reground.tools.types import Passage

SAMPLE_TEMPERATURE = 0.7  # ProMiSe's sampling temperature for samples after the first

_NOT_FOUND = re.compile(
    r"(do(es)? not (cover|contain|mention|say|include|provide|specify)|don't (cover|contain|mention|say|have)|"
    r"could not find|couldn't find|can ?not find|no information|not (mentioned|covered|specified|provided) in|"
    r"i (do not|don't) know|not able to find|open a ticket)",
    re.IGNORECASE,
)


def answer_kind(text: str) -> str:
    """'clarify' for a question back, 'not_found' for an honest admission, else 'answer'."""
    if _NOT_FOUND.search(text):
        return "not_found"
    if text.rstrip().endswith("?") and len(text.split()) < 40:
        return "clarify"
    return "answer"


def parse_helpfulness(text: str, count: int) -> dict[int, tuple[bool, str]]:
    judged: dict[int, tuple[bool, str]] = {}
    for number, rest in numbered_lines(text).items():
        if not 1 <= number <= count:
            continue
        lowered = rest.lower()
        unhelpful = bool(re.match(r"^(not|un|no\b|irrelevant)", lowered)) or "not helpful" in lowered[:30]
        if "helpful" in lowered or "relevant" in lowered or unhelpful or lowered.startswith(("yes", "no")):
            reason = re.sub(r"^(not\s+)?(helpful|relevant|yes|no)\s*[-:,.]*\s*", "", rest, flags=re.IGNORECASE)
            judged[number] = (not unhelpful and not lowered.startswith("no"), reason[:200])
    if not judged:
        raise ValueError("no '[number] helpful/not helpful' lines found")
    return judged


_HELPFUL_LINE = re.compile(r"^\W*helpful(?: passages)?\s*[:=-]\s*(.*)$", re.IGNORECASE)
_PASSAGE_HEADER = re.compile(r"^\s*\[\d{1,2}\]\s+\S.*\(https?://[^)\s]*\)\s*$")
_ECHOED_TASK = re.compile(r"^\s*(the user's last message|last message|standalone question)\s*:", re.IGNORECASE)
_LIST_MARK = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•])\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def split_inline_judgement(text: str, count: int) -> tuple[str, dict[int, bool] | None]:
    """The inline self-check: ('Helpful: [1], [3]' line → {1: True, 2: False, 3: True}, the rest is the answer).

    No such line → (text, None): every passage counts as helpful and nothing is guessed.
    """
    lines = text.strip().splitlines()
    for index, line in enumerate(lines[:3]):
        match = _HELPFUL_LINE.match(line.strip())
        if match:
            numbers = {int(n) for n in re.findall(r"\d{1,2}", match.group(1)) if 1 <= int(n) <= count}
            rest = "\n".join(lines[:index] + lines[index + 1 :]).strip()
            return rest, {n: n in numbers for n in range(1, count + 1)}
    return text.strip(), None


def passage_headers(passages: Sequence[Passage]) -> set[str]:
    """Each passage's header line as the prompt shows it, without its number (what a small model echoes)."""
    headers = set()
    for p in passages:
        section = f" / {p['section']}" if p.get("section") else ""
        headers.add(f"{p.get('title', '')}{section} ({p.get('url') or 'no url'})".strip())
    return headers


def tidy_answer(text: str, passages: Sequence[Passage], escalation: str, max_sentences: int) -> str:
    """What a small model adds around an answer, removed: echoed passage headers and titles, a leading
    'Answer:', list numbering and stray fragments, the escalation tacked onto a real answer, and sentences past
    the cap."""
    titles = {p["title"].strip().lower() for p in passages if p.get("title")}
    kept_lines = [
        line
        for line in text.splitlines()
        if not _PASSAGE_HEADER.match(line)
        and line.strip().lower().rstrip(":") not in titles
        and not _ECHOED_TASK.match(line)
    ]
    body = re.sub(r"^\s*(answer|reply)\s*:\s*", "", "\n".join(kept_lines).strip(), flags=re.IGNORECASE)
    for header in sorted(passage_headers(passages), key=len, reverse=True):  # a header quoted mid-line
        body = re.sub(re.escape(header), "", body, flags=re.IGNORECASE)
    body = body.replace("(no url)", "")
    parts = [_LIST_MARK.sub("", part).strip() for part in _SENTENCE_END.split(body)]
    parts = [part for part in parts if len(part.split()) >= 2 or re.search(r"[A-Za-z]{3}", part)]
    escalation_key = escalation.strip().strip(".").lower()
    substantive = [
        p for p in parts if not (escalation_key and escalation_key in p.lower() and len(p) < len(escalation) + 40)
    ]
    if substantive and len(substantive) < len(parts) and not _NOT_FOUND.search(" ".join(substantive)):
        parts = substantive
    return " ".join(parts[:max_sentences]).strip()


def self_check(passages: Sequence[Passage], state: State, env: NodeEnv) -> list[PassageJudgement]:
    """Judge every passage in one call (they share the prefix); unparseable → all count as helpful."""
    env.progress("answer", "checking which passages help")
    model = env.services.chat(env.context, "answer")
    messages = grounded_messages(
        passages,
        state.get("history", []),
        state["question"],
        env.context.self_check_prompt.format(question=state.get("standalone_question") or state["question"]),
    )
    try:
        judged = call_parsed(
            model,
            messages,
            lambda text: parse_helpfulness(text, len(passages)),
            env.stats,
            tags=["self_check"],
            max_tokens=16 * len(passages) + 8,
        )
    except LLMReplyError as exc:
        env.stats.notes.append(f"self-check unusable ({exc}); using every passage")
        judged = {}
    return [
        PassageJudgement(
            number=i,
            chunk_id=p["chunk_id"],
            helpful=judged.get(i, (True, ""))[0],
            reason=judged.get(i, (True, "not judged"))[1],
        )
        for i, p in enumerate(passages, start=1)
    ]


def inline_judgements(
    passages: Sequence[Passage], judged: dict[int, bool] | None, env: NodeEnv
) -> list[PassageJudgement]:
    if judged is None:
        env.stats.notes.append("inline self-check line missing; every passage counted as helpful")
    return [
        PassageJudgement(
            number=i,
            chunk_id=p["chunk_id"],
            helpful=True if judged is None else judged[i],
            reason="not judged" if judged is None else "judged in the answer call",
        )
        for i, p in enumerate(passages, start=1)
    ]


def query_text(state: State) -> str:
    """What an answer must be relevant to: the question and the most recent turns."""
    recent = " ".join(turn["text"] for turn in state.get("history", [])[-2:])
    return f"{state.get('standalone_question') or state['question']} {recent}".strip()


def make_draft(text: str, passages: Sequence[Passage], state: State) -> Draft:
    return Draft(
        text=text,
        principle_scores=principle_scores(text, [p["text"] for p in passages], query_text(state)),
        groundedness=0.0,
        groundedness_parts={},
        unsupported_claims=[],
        kind=answer_kind(text),
    )


def _non_empty(text: str) -> str:
    if len(text.split()) < 2:
        raise ValueError("the answer is empty")
    return text


def answer(state: State, env: NodeEnv) -> dict[str, Any]:
    context = env.context
    passages = list(state.get("passages", []))
    escalation = context.escalation
    if not passages:
        text = answer_prompts.NOT_FOUND.format(escalation=escalation)
        return {"judgements": [], "draft": make_draft(text, passages, state), "draft_checked": False}
    inline = context.use_self_check and context.self_check_inline
    judgements = (
        self_check(passages, state, env)
        if context.use_self_check and not inline
        else [
            PassageJudgement(number=i, chunk_id=p["chunk_id"], helpful=True, reason="")
            for i, p in enumerate(passages, 1)
        ]
    )
    helpful = [j["number"] for j in judgements if j["helpful"]]
    if not helpful:
        env.stats.notes.append("no passage judged helpful")
        text = answer_prompts.NOT_FOUND.format(escalation=escalation)
        return {"judgements": judgements, "draft": make_draft(text, passages, state), "draft_checked": False}
    env.progress("answer", "writing the answer", helpful=helpful)
    marked = ", ".join(f"[{n}]" for n in helpful)
    task = context.answer_prompt.format(
        question=state.get("standalone_question") or state["question"],
        judge_passages=answer_prompts.INLINE_SELF_CHECK
        if inline
        else answer_prompts.USE_HELPFUL.format(helpful=marked),
        helpful=marked,
        escalation=escalation,
    )
    messages = grounded_messages(passages, state.get("history", []), state["question"], task)

    def parse_reply(text: str) -> tuple[str, dict[int, bool] | None]:
        reply, judged = split_inline_judgement(text, len(passages)) if inline else (text, None)
        return _non_empty(tidy_answer(reply, passages, escalation, context.max_answer_sentences)), judged

    drafts: list[Draft] = []
    # Sequential on purpose: a local llama.cpp server has one slot and its prefix cache serves
    # every sample after the first.
    for sample in range(context.n_samples):
        temperature = context.temperature if sample == 0 else SAMPLE_TEMPERATURE
        model = env.services.chat(context, "answer", temperature=temperature)
        try:
            text, judged = call_parsed(
                model, messages, parse_reply, env.stats, tags=["answer"], max_tokens=context.max_answer_tokens
            )
        except LLMReplyError:
            continue
        if inline and sample == 0:
            judgements = inline_judgements(passages, judged, env)
        drafts.append(make_draft(text, passages, state))
    if not drafts:
        env.stats.notes.append("every answer sample was empty")
        text = answer_prompts.NOT_FOUND.format(escalation=escalation)
        return {"judgements": judgements, "draft": make_draft(text, passages, state), "draft_checked": False}
    best = majority_best([d["principle_scores"] for d in drafts])
    return {"judgements": judgements, "draft": drafts[best], "draft_checked": False}
