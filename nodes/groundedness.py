"""ReGround's groundedness check: an LLM judge of unsupported claims combined with cheap signals.

Before any of them, exact checks: a reply stating a number, amount, date or duration (tools/signals/figures.py) or
a link, address or phone number that its cited passages do not hold is not grounded, however close its words are
to theirs; nor is one that only restates an injected instruction or repeats the prompt's own words.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from reground.nodes.common import NodeEnv, current_draft, grounded_messages
from reground.nodes.routes import FLAGGED_ONLY
from reground.nodes.state import Draft, State
from reground.prompts import answer as answer_prompts
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.adapters.llm import LLMUnavailableError
from reground.tools.signals.code_terms import unsupported_code
from reground.tools.signals.evidence import quoted_verbatim
from reground.tools.signals.figures import extract_figures, unsupported_figures
from reground.tools.signals.reply_guard import only_flagged, unsupported_contacts
from reground.tools.signals.scoring import k_precision, prompt_echo, rouge_l
from reground.tools.signals.variants_named import without_named_variants
from reground.tools.text.sentences import cited_numbers, strip_citations, text_sentences
from reground.tools.types import Passage


def sentences(text: str) -> list[str]:
    return text_sentences(strip_citations(text))


class GroundednessVerdict(BaseModel):
    """The judge's reply: the answer's claims the passages do not support (empty: all supported)."""

    unsupported_claims: list[str] = Field(description="claims of the answer the passages do not support")


def embedding_support(answer: str, passage_vectors: np.ndarray, env: NodeEnv) -> float:
    """Mean over answer sentences of how closely the best passage restates it, scaled to [0, 1].

    MiniLM cosine: below context.groundedness.support_low nothing in the passages says it, above support_high it is
    restated.
    """
    parts = sentences(answer)
    if not parts or passage_vectors.size == 0:
        return 0.0
    vectors = env.services.embeddings(env.context).embed(parts)
    best = (vectors @ passage_vectors.T).max(axis=1)
    low, high = env.context.groundedness.support_low, env.context.groundedness.support_high
    scaled = np.clip((best - low) / (high - low), 0.0, 1.0)
    return float(scaled.mean())


def weighted_score(parts: dict[str, float], weights: dict[str, float]) -> float:
    """Weighted mean of the signals present, weights renormalised over them."""
    used = {name: weights.get(name, 0.0) for name in parts}
    total = sum(used.values()) or 1.0
    return sum(parts[name] * weight for name, weight in used.items()) / total


def cited_texts(reply: str, texts: list[str]) -> list[str]:
    """The passages the reply cites by number ("[2]"), or all of them when it cites none (or a number it was
    not given: then which passage it meant is unknown, and all of them are the fair reading)."""
    numbers = cited_numbers(reply)
    if not numbers or any(not 1 <= n <= len(texts) for n in numbers):
        return texts
    return [texts[n - 1] for n in sorted(numbers)]


def figure_problems(draft: Draft, texts: list[str], missing: list[str]) -> list[str]:
    """The figures of the reply its cited passages do not hold, as unsupported claims.

    A partial reply names the question's words the documents lack ("do not mention '2025'"): those are not claims.
    """
    exempt = {f.value for word in missing for f in extract_figures(word, number_words="all")}
    if draft["kind"] != "partial":
        exempt = set()
    absent = [f for f in unsupported_figures(draft["text"], cited_texts(draft["text"], texts)) if f.value not in exempt]
    return [f"the figure '{f}' is not in the cited passages" for f in absent]


def code_problems(draft: Draft, texts: list[str], state: State) -> list[str]:
    """The calls, names and flags the reply writes as code that its cited passages (and the conversation) lack."""
    conversation = [state.get("question", ""), *(str(t.get("text", "")) for t in state.get("history", []))]
    absent = unsupported_code(draft["text"], cited_texts(draft["text"], texts), conversation)
    return [f"the code '{name}' is not in the cited passages" for name in absent]


def contact_problems(draft: Draft, passages: list[Passage]) -> list[str]:
    """The links, addresses and phone numbers of the reply that no unflagged sentence of its cited passages holds:
    checked here, so the loops can mend the reply, and again on the final reply in finalize."""
    cited = cited_texts(draft["text"], [p["text"] for p in passages])
    return [f"the contact '{c}' is not in the cited passages" for c in unsupported_contacts(draft["text"], cited, [])]


def hard_failures(
    draft: Draft, state: State, passages: list[Passage], texts: list[str], env: NodeEnv, *, verbatim: bool
) -> Iterator[tuple[str, list[str]]]:
    """(groundedness part, unsupported claims) of each check that fails a reply outright, cheapest first; the
    caller stops at the first with claims. A reply copied word for word from the passages holds its own figures and
    contacts (and a page's own footnote marker, "Call Center [2].", is no citation), so only the injection check
    reads it (`verbatim`: quoted_verbatim of the reply, which the caller also needs)."""
    if not verbatim:
        yield "figures", figure_problems(draft, texts, list(state.get("missing", [])))
        yield "code", code_problems(draft, texts, state)
    if only_flagged(draft["text"], passages):
        # A reply that only restates an injected instruction is not an answer, however grounded its words are.
        yield FLAGGED_ONLY, ["the reply only restates text flagged as an injected instruction"]
    if verbatim:
        return
    yield "contacts", contact_problems(draft, passages)
    echoed = prompt_echo(
        draft["text"], [answer_prompts.SHARED_PREFIX, env.context.prompts.answer_prompt, answer_prompts.EVIDENCE]
    )
    if echoed:
        yield "prompt_echo", [f"the reply repeats the prompt's own words ('{echoed}')"]


def check_groundedness(state: State, env: NodeEnv) -> dict[str, Any]:
    """Score how well the draft is grounded in the passages: exact checks first (figures, contacts, code, injected
    text, prompt echo), then the weighted signals and, inside the judge band, the LLM judge."""
    context = env.context
    draft = current_draft(state, "check_groundedness")
    passages = list(state.get("passages", []))
    if draft["kind"] == "not_found" or not passages:
        # An honest "not in the documents" is not a hallucination.
        return {
            "draft": Draft(**{**draft, "groundedness": 1.0, "groundedness_parts": {}, "unsupported_claims": []}),
            "draft_checked": True,
        }
    env.progress("check_groundedness", "checking the answer against the passages")
    texts = [p["text"] for p in passages]
    # A reply from one tab names the others' calls ("In JavaScript: `getState()`"): quoted when those calls are.
    verbatim = quoted_verbatim(without_named_variants(draft["text"], passages), texts)
    for part, problems in hard_failures(draft, state, passages, texts, env, verbatim=verbatim):
        if problems:
            # Cheap and exact: no signal or judge can make a wrong amount, a foreign phone number or an echo of the
            # prompt grounded, so none is asked.
            env.stats.notes.append(f"groundedness 0.00: {'; '.join(problems)}")
            failed = {part: 0.0}
            return {
                "draft": Draft(
                    **{**draft, "groundedness": 0.0, "groundedness_parts": failed, "unsupported_claims": problems}
                ),
                "draft_checked": True,
            }
    if verbatim:
        env.stats.notes.append("groundedness 1.00: every sentence of the answer is quoted from a passage")
        verbatim = {"verbatim": 1.0}
        return {
            "draft": Draft(**{**draft, "groundedness": 1.0, "groundedness_parts": verbatim, "unsupported_claims": []}),
            "draft_checked": True,
        }
    knowledge = "\n".join(texts)
    store = env.services.passage_store(context)
    vectors = store.embeddings_for([p["chunk_id"] for p in passages])
    parts: dict[str, float] = {
        "k_precision": k_precision(draft["text"], knowledge),
        "rouge_l_precision": rouge_l(draft["text"], knowledge).precision,
        "embedding_support": embedding_support(draft["text"], vectors, env),
    }
    weights = dict(context.groundedness.weights)
    threshold = context.resolved_groundedness_threshold()
    cheap = weighted_score(parts, weights)
    unsupported: list[str] = []
    if context.groundedness.use_llm_groundedness_judge and abs(cheap - threshold) > context.groundedness.llm_judge_band:
        env.stats.notes.append(f"groundedness judge skipped: cheap signals {cheap:.2f} far from {threshold:.2f}")
    elif context.groundedness.use_llm_groundedness_judge:
        messages = grounded_messages(
            passages,
            state.get("history", []),
            state["question"],
            context.prompts.groundedness_prompt.format(answer=draft["text"]),
        )
        try:
            verdict = env.ask(
                "judge",
                messages,
                GroundednessVerdict,
                tags=["check_groundedness"],
                max_tokens=context.models.judge_max_tokens,
            )
            unsupported = [c.strip() for c in verdict.unsupported_claims if c.strip()]
            claims = max(1, len(sentences(draft["text"])))
            parts["llm_judge"] = 1.0 - min(1.0, len(unsupported) / claims)
        except LLMReplyError as exc:
            env.stats.notes.append(f"groundedness judge unusable ({exc}); cheap signals only")
        except LLMUnavailableError as exc:
            if context.answer_style == "write":
                raise  # a written reply's loops need the model: the turn fails, naming the server
            env.stats.notes.append(f"groundedness judge skipped: the chat model is down ({exc}); cheap signals only")
    score = weighted_score(parts, weights)
    env.stats.notes.append(f"groundedness {score:.2f} (threshold {threshold:.2f})")
    return {
        "draft": Draft(
            **{**draft, "groundedness": round(score, 4), "groundedness_parts": parts, "unsupported_claims": unsupported}
        ),
        "draft_checked": True,
    }
