"""Rerank the candidate paragraphs and keep the top n: by their sentence closest to the question (the default, no
LLM), score fusion, an LLM listwise judge, or an HTTP cross-encoder."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from reground.nodes.common import NodeEnv, evidence_for, grounded_messages, question_of
from reground.nodes.state import State
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.adapters.rerank_http import rerank_over_http
from reground.tools.retrieval.search import fuse_rerank, sentence_rerank
from reground.tools.retrieval.variants import prefer_named_variant
from reground.tools.signals.evidence import best_sentence_cosines
from reground.tools.signals.reading import read_turn
from reground.tools.text.sentences import has_code_block
from reground.tools.types import Passage


class PassageScores(BaseModel):
    """The listwise rerank's reply: a 1-10 usefulness score per passage, in the passages' order."""

    scores: list[int] = Field(description="one score from 1 to 10 per passage, in order")


def scores_by_number(reply: PassageScores, count: int, max_score: float) -> dict[int, float]:
    """{passage number: score in [0, max_score]} for the passages the reply scored (extra scores are ignored)."""
    return {i: min(max_score, max(0.0, float(s))) for i, s in enumerate(reply.scores[:count], start=1)}


def _with_scores(passages: list[Passage], scores: dict[int, float], n: int) -> list[Passage]:
    # Unscored passages keep their retrieval order below the scored ones' equal scores.
    ranked = sorted(range(len(passages)), key=lambda i: (-scores.get(i + 1, 0.0), i))
    kept = []
    for rank, index in enumerate(ranked[:n], start=1):
        passage = Passage(**passages[index])
        passage["rerank_score"] = scores.get(index + 1, 0.0)
        passage["rank"] = rank
        kept.append(passage)
    return kept


def rerank(state: State, env: NodeEnv) -> dict[str, Any]:
    """Keep the `top_n` candidates by the context's rerank method, with the conversation's named variant preferred
    and, on a new-topic search, the conversation's best passage kept."""
    conversation = [state["question"], *(str(t.get("text", "")) for t in state.get("history", []))]
    candidates, named = prefer_named_variant(list(state.get("candidates", [])), conversation)
    if named:  # a page's other language or platform tabs are not what this user runs
        env.stats.notes.append(f"the conversation is about {' / '.join(named)}: other variants left out")
        state = {**state, "candidates": candidates}
    update = _rerank(state, env)
    if state.get("query_mode") == "new_topic":
        update["passages"] = keep_conversation_passage(update["passages"], state.get("passages", []))
    return update


def keep_conversation_passage(passages: list[Passage], conversation: list[Passage]) -> list[Passage]:
    """A change of subject is a guess made from a failed support check: the conversation's best passage keeps the
    last slot (unless its document is already kept), so the sentence-level evidence ranking chooses between the
    new topic and the old. On 100 doc2dial dev cases, "What requirements do I need to meet?" and "What can you do
    for careers and employment?" re-grounded as new topics and lost the dialogue's document from every slot."""
    if not passages or not conversation or conversation[0]["doc_id"] in {p["doc_id"] for p in passages}:
        return passages
    kept = (
        [*passages[:-1], Passage(**conversation[0])] if len(passages) > 1 else [*passages, Passage(**conversation[0])]
    )
    return [Passage(**{**p, "rank": rank}) for rank, p in enumerate(kept, start=1)]


def _rerank(state: State, env: NodeEnv) -> dict[str, Any]:
    context = env.context
    candidates = list(state.get("candidates", []))
    n = context.top_n
    if context.rerank_method == "off" or len(candidates) <= 1:
        return {"passages": [Passage(**{**p, "rank": i + 1}) for i, p in enumerate(candidates[:n])]}
    by_unit = by_units(state, env, candidates) if context.rerank_method in ("sentence", "judge") else None
    if by_unit is not None:
        return {"passages": by_unit}
    if context.rerank_method == "sentence":
        return {"passages": by_sentence(state, env, candidates)}
    if context.rerank_method == "judge":
        return {"passages": by_judge(state, env, candidates)}
    if context.rerank_method == "fusion":
        return {"passages": fuse_rerank(candidates, n, context.retrieval.same_document_penalty)}
    query = state.get("retrieval_query") or state["question"]
    if context.rerank_method == "http":
        env.progress("rerank", "reranking with the cross-encoder endpoint")
        scores = rerank_over_http(context.models.rerank_url, query, [p["text"] for p in candidates])
        return {"passages": _with_scores(candidates, dict(enumerate(scores, start=1)), n)}
    env.progress("rerank", "asking the LLM which passages are relevant")
    messages = grounded_messages(
        candidates, state.get("history", []), state["question"], context.prompts.rerank_prompt.format(question=query)
    )
    try:
        reply = env.ask(
            "judge",
            messages,
            PassageScores,
            tags=["rerank"],
            max_tokens=context.models.rerank_tokens_per_passage * len(candidates)
            + context.models.rerank_reply_frame_tokens,
        )
        parsed = scores_by_number(reply, len(candidates), context.models.rerank_max_score)
    except LLMReplyError as exc:
        env.stats.notes.append(f"rerank reply unusable ({exc}); ranking by sentence instead")
        return {"passages": by_sentence(state, env, candidates)}
    return {"passages": _with_scores(candidates, parsed, n)}


def by_units(state: State, env: NodeEnv, candidates: list[Passage]) -> list[Passage] | None:
    """Documentation with code: the candidates whose best answer unit the unit ranker scores highest (signals/units.py;
    the passages then hold the units the reply is made of), plus the chunk ranker's score where it chose them. Used
    in place of the in-process rerankers ("sentence", "judge"); None when it does not rank this turn's units (`auto`
    and no code block among them, `off`, or a collection embedded by another model)."""
    context = env.context
    mode = context.evidence.unit_ranking
    if mode == "off" or (mode == "auto" and not any(has_code_block(c["text"]) for c in candidates)):
        return None
    ranker = env.services.unit_ranker(context)
    if ranker is None:
        return None
    reading = read_turn(
        question_of(state),
        state["question"],
        state.get("history", []),
        candidates,
        env.services.retriever(context).embed,
        context.evidence_weights(),
        unit_ranker=ranker,
    )
    if not reading.evidence or reading.evidence[0].unit_score is None:
        return None
    env.progress("rerank", "ranking the answer units")
    best = [float("-inf")] * len(candidates)
    for unit in reading.evidence:
        best[unit.passage - 1] = max(best[unit.passage - 1], unit.unit_score or 0.0)
    # Both are conditional logits over the turn's items: their sum weighs a passage by both models' odds.
    best = [score + float(candidates[i].get("chunk_score", 0.0)) for i, score in enumerate(best)]
    ranked = sorted(range(len(candidates)), key=lambda i: (-best[i], i))[: context.top_n]
    return [
        Passage(**{**candidates[i], "rerank_score": round(best[i], 6), "rank": rank})
        for rank, i in enumerate(ranked, start=1)
    ]


def by_judge(state: State, env: NodeEnv, candidates: list[Passage]) -> list[Passage]:
    """The trained judge as the in-process cross-encoder: retrieval score plus the probability that the candidate's
    best sentence answers the question (the judge reads every candidate's sentences in one pass). Without the judge
    (`use_trained_judge` off, or a collection embedded by another model), the sentence cosine rerank."""
    if not env.context.use_trained_judge or env.services.judge(env.context) is None:
        return by_sentence(state, env, candidates)
    env.progress("rerank", "reranking with the judge")
    best = [0.0] * len(candidates)
    for sentence in evidence_for(state, candidates, env).evidence:
        best[sentence.passage - 1] = max(best[sentence.passage - 1], sentence.judge)
    settings = env.context.retrieval
    return sentence_rerank(
        candidates, best, env.context.top_n, settings.sentence_rerank_weight, settings.same_document_penalty
    )


def by_sentence(state: State, env: NodeEnv, candidates: list[Passage]) -> list[Passage]:
    """The LLM-free rerank: retrieval score plus the candidate's best sentence cosine with the turn's question."""
    settings = env.context.retrieval
    cosines = best_sentence_cosines(env.services.retriever(env.context).embed, question_of(state), candidates)
    return sentence_rerank(
        candidates, cosines, env.context.top_n, settings.sentence_rerank_weight, settings.same_document_penalty
    )
