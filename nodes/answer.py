"""ConvRAG's self-check generator with the HR chatbot's answer rules and ProMiSe's best-of-N start.

The self-check decides which passages help before the answer is written: the passages holding the sentences
closest to the question (ranked once per retrieval by triage, tools/signals/evidence.py) are the helpful ones.

Two answer styles (`answer_style`): **extract** replies with those sentences in the documents' own words (no LLM
call; on doc2dial and MTRAG-UN dev the embedded 0.5B model's written replies score no better than the best
sentence, evals/README.md), adding the next-best sentence while it scores close to the best; **write** has the chat
model write the reply from the passages, shown the best sentences, in one plain-text call (no grammar-constrained
decoding: on the 0.5B default it slowed every generated token), best-of-N. `use_self_check=True` asks the
model which passages help instead, as a field of one JSON-schema reply. When the passages hold too little of the
question (`partial_coverage`), the reply says which of its words the documents do not mention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from reground.nodes.common import (
    NodeEnv,
    cap_sentences,
    current_draft,
    evidence_of,
    extracted_sentences,
    grounded_messages,
    make_draft,
    question_of,
)
from reground.nodes.state import Draft, PassageJudgement, State
from reground.prompts import answer as answer_prompts
from reground.tools.adapters.chat import LLMReplyError, call_text
from reground.tools.retrieval.variants import variant_of
from reground.tools.signals.evidence import Evidence, figure_first, hedge_units
from reground.tools.signals.extract_reply import join_reply
from reground.tools.signals.scoring import majority_best
from reground.tools.signals.variants_named import named_variants, one_variant
from reground.tools.text.code_blocks import trim_code_blocks
from reground.tools.text.sentences import strip_citations
from reground.tools.types import Passage


class AnswerReply(BaseModel):
    """The answer call's reply: ConvRAG's passage self-check, then the reply to the user."""

    helpful: list[int] = Field(description="numbers of the passages that help answer the last message")
    answer: str = Field(description="the reply to the user's last message")


def is_not_found(text: str, escalation: str) -> bool:
    """The reply is the honest 'not in the documents' (the prompt asks for the escalation with it)."""
    key = escalation.strip().strip(".").lower()
    return bool(key) and key in text.lower()


def not_found_draft(passages: Sequence[Passage], state: State, escalation: str) -> Draft:
    text = answer_prompts.NOT_FOUND.format(escalation=escalation)
    return make_draft(text, passages, state, [], kind="not_found")


def judgements_from(
    passages: Sequence[Passage], helpful: Sequence[int] | None, source: str = "judged in the answer call"
) -> list[PassageJudgement]:
    """Per passage, the self-check verdict (None: not judged, every passage counts as helpful)."""
    return [
        PassageJudgement(
            number=i,
            chunk_id=p["chunk_id"],
            helpful=helpful is None or i in helpful,
            reason="not judged" if helpful is None else source,
        )
        for i, p in enumerate(passages, start=1)
    ]


def shown_evidence(evidence: Sequence[Evidence], limit: int) -> list[Evidence]:
    """The evidence sentences the answer call sees: the closest ones that share a content word with the question."""
    return [e for e in evidence[:limit] if e.lexical > 0]


def evidence_helpful(evidence: Sequence[Evidence], limit: int) -> list[int]:
    """The LLM-free self-check: the passages that hold the shown evidence sentences."""
    return sorted({e.passage for e in shown_evidence(evidence, limit)})


def answer_task(state: State, env: NodeEnv, evidence: Sequence[Evidence]) -> str:
    """The answer call's task: the context's answer prompt (or the self-check one) with the evidence it is shown."""
    context = env.context
    shown = shown_evidence(evidence, context.evidence.answer_evidence)
    hint = (
        answer_prompts.EVIDENCE.format(
            sentences="\n".join(f'[{e.passage}] "{" ".join(e.text.split())}"' for e in shown)
        )
        if shown
        else ""
    )
    task = answer_prompts.TASK_WITH_SELF_CHECK if context.evidence.use_self_check else context.prompts.answer_prompt
    return task.format(question=question_of(state), evidence=hint, escalation=context.escalation)


def answer_sample(messages: Sequence[Any], env: NodeEnv, temperature: float) -> tuple[str, list[int] | None]:
    """One answer sample: plain text, or with `use_self_check` the JSON reply carrying the model's verdicts."""
    context = env.context
    if not context.evidence.use_self_check:
        model = env.services.chat(context, "answer", temperature=temperature)
        return call_text(model, messages, env.stats, tags=["answer"], max_tokens=context.models.max_answer_tokens), None
    reply = env.ask(
        "answer",
        messages,
        AnswerReply,
        tags=["answer"],
        max_tokens=context.models.max_answer_tokens + context.models.answer_json_overhead_tokens,
        temperature=temperature,
    )
    return reply.answer, list(reply.helpful)


def with_gap(text: str, state: State, env: NodeEnv) -> tuple[str, str]:
    """(reply, kind): a reply to a question the passages only partly cover says what they do not mention."""
    covered = state.get("signals", {}).get("coverage", 1.0)
    missing = state.get("missing", [])
    if env.context.triage.partial_coverage <= 0 or covered >= env.context.triage.partial_coverage or not missing:
        return text, "answer"
    gap = answer_prompts.PARTIAL.format(
        missing=", ".join(f"'{w}'" for w in missing[: env.context.triage.partial_missing_named])
    )
    return f"{text} {gap}", "partial"


def extracted(
    state: State, env: NodeEnv, passages: Sequence[Passage], evidence: Sequence[Evidence], *, hedge: bool = False
) -> dict[str, Any]:
    """The extract style: the best evidence sentences as the reply, their passages as the helpful ones (`hedge`: a
    draft of kind "hedge", which the reply introduces as the closest the documents come)."""
    context = env.context
    # A question asking for a figure ("how many days ...") is answered by a sentence stating one; units the unit
    # ranker ranked keep its order (a figure there is a code value).
    if not evidence or evidence[0].unit_score is None:
        evidence = figure_first(question_of(state), evidence, passages)
    if hedge:
        evidence = hedge_units(question_of(state), evidence, passages)
    # A page that answers once per language or platform: the reply comes from one, and names the others' calls.
    evidence, others = one_variant(evidence, passages)
    text, helpful = extracted_sentences(evidence, context.evidence, context.answer_length, state.get("history", []))
    text = trim_code_blocks(text, [question_of(state), text], context.evidence.max_code_lines)
    # Named only beside a reply that gives one variant's own unit.
    named = named_variants(others, passages) if text and any(variant_of(passages[n - 1]) for n in helpful) else ""
    if named:
        env.stats.notes.append(f"answered from one variant; named {len(others)} other(s)")
        text = join_reply([text, named])
        helpful = sorted({*helpful, *(e.passage for e in others)})
    if not text:
        env.stats.notes.append("no passage sentence to answer with")
        return {"judgements": [], "draft": not_found_draft(passages, state, context.escalation)}
    reply, kind = (text, "hedge") if hedge else with_gap(text, state, env)
    env.stats.notes.append(f"answered with {len(helpful)} passage(s)' own sentences")
    draft = make_draft(reply, passages, state, evidence, kind=kind)
    return {"judgements": judgements_from(passages, helpful, "holds the answer's sentence"), "draft": draft}


def answer(state: State, env: NodeEnv) -> dict[str, Any]:
    """The reply to triage's decision: the passages' best sentences (extract, and every hedge) or a written reply
    (write, best of `n_samples`), as a draft for the groundedness check; no passages: the not-found reply."""
    context = env.context
    passages = list(state.get("passages", []))
    if not passages:
        return {"judgements": [], "draft": not_found_draft(passages, state, context.escalation), "draft_checked": False}
    evidence = evidence_of(state)
    if state.get("decision") == "hedge":
        # Only something close was found: its own words, said as the closest the documents come (no written reply).
        return {**extracted(state, env, passages, evidence, hedge=True), "draft_checked": False}
    if context.answer_style == "extract":
        return {**extracted(state, env, passages, evidence), "draft_checked": False}
    env.progress("answer", "writing the answer")
    messages = grounded_messages(
        passages, state.get("history", []), state["question"], answer_task(state, env, evidence)
    )
    drafts: list[Draft] = []
    verdicts: list[list[int]] = []
    # Sequential on purpose: a local llama.cpp server has one slot and its prefix cache serves
    # every sample after the first.
    for sample in range(context.models.n_samples):
        temperature = context.models.temperature if sample == 0 else context.models.sample_temperature
        try:
            reply, helpful = answer_sample(messages, env, temperature)
        except LLMReplyError as exc:
            env.stats.notes.append(f"answer sample {sample + 1} unusable ({exc})")
            continue
        text = cap_sentences(reply, context.evidence.max_answer_sentences)
        if len(strip_citations(text).split()) < 2:
            env.stats.notes.append(f"answer sample {sample + 1} was empty")
            continue
        if is_not_found(text, context.escalation):
            drafts.append(make_draft(text, passages, state, evidence, kind="not_found"))
        else:
            text, kind = with_gap(text, state, env)
            drafts.append(make_draft(text, passages, state, evidence, kind=kind))
        if helpful is None:
            helpful = evidence_helpful(evidence, context.evidence.answer_evidence)
        verdicts.append([n for n in helpful if 1 <= n <= len(passages)])
    if not drafts:
        env.stats.notes.append("no usable answer sample")
        return {
            "judgements": judgements_from(passages, None),
            "draft": not_found_draft(passages, state, context.escalation),
            "draft_checked": False,
        }
    best = majority_best([d["principle_scores"] for d in drafts])
    source = "judged in the answer call" if context.evidence.use_self_check else "holds an evidence sentence"
    judgements = judgements_from(passages, verdicts[best] or None, source)
    return {"judgements": judgements, "draft": drafts[best], "draft_checked": False}


def quote(state: State, env: NodeEnv) -> dict[str, Any]:
    """A written reply that failed its checks with no loop left: the extract style's reply (the passages' own best
    sentences, grounded by construction) replaces it instead of an abstention, since triage measured support."""
    draft = current_draft(state, "quote")
    env.stats.notes.append(
        f"the written reply failed its checks (groundedness {draft['groundedness']:.2f}, relevance "
        f"{draft.get('relevance', 0.0):.2f}); quoting the passages instead"
    )
    passages = list(state.get("passages", []))
    return {**extracted(state, env, passages, evidence_of(state)), "draft_checked": False, "quoted": True}
