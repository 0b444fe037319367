"""ReGround: after an ungrounded answer, retrieve again with a better query (+Force on the first retry); when
nothing retrieved supports the question, first search it as a new topic, away from the conversation's."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from reground.nodes.common import NodeEnv, format_history, rewrite_reply
from reground.nodes.state import State
from reground.tools.adapters.chat import LLMReplyError
from reground.tools.retrieval.keywords import lexical_keywords
from reground.tools.signals.answerability import stands_alone
from reground.tools.text.tokens import history_query


def re_ground(state: State, env: NodeEnv) -> dict[str, Any]:
    """After an ungrounded answer or an abstention: a new search query (a rewrite, the forced history, or the
    question alone as a new topic), counted against the re-ground cap."""
    attempt = state.get("reground_attempts", 0) + 1
    context = env.context
    question, history = state["question"], state.get("history", [])
    forced = history_query(question, history, context.budgets.history_token_budget)
    if attempt == 1 and history and state.get("decision") == "abstain" and stands_alone(question, history):
        # Nothing the conversation points to supports a question that reads on its own: the user may have changed
        # the subject ("How do I book a flight?" after parental leave). Search it as a topic of its own.
        query, mode = question, "new_topic"
    elif attempt == 1 and forced != state.get("retrieval_query"):
        # +Force: the question plus the recent dialogue is the query that retrieved best in ReGround (when the turn
        # already searched with it, the same query would bring back the same passages: rewrite instead).
        query, mode = forced, "forced_history"
    else:
        env.progress("re_ground", "rewriting the search query with the feedback")
        prompt = context.prompts.reground_prompt.format(
            history=format_history(history[-context.budgets.rewrite_history_messages :]),
            question=question,
            previous_query=state.get("retrieval_query", ""),
        )
        try:
            reply = env.ask(
                "refiner",
                [HumanMessage(prompt)],
                rewrite_reply(context.refinement.rewrite_max_chars),
                tags=["re_ground"],
                max_tokens=context.models.rewrite_max_tokens,
            )
            query = reply.question
            mode = "rewritten"
        except LLMReplyError as exc:
            env.stats.notes.append(f"query rewrite unusable ({exc}); widening the history instead")
            query, mode = (
                history_query(
                    question, history, context.budgets.forced_history_factor * context.budgets.history_token_budget
                ),
                "forced_history",
            )
    env.progress("re_ground", f"re-grounding (attempt {attempt})", query=query)
    keywords = lexical_keywords(query, question) if context.keyword_method != "off" else []
    update: dict[str, Any] = {"reground_attempts": attempt, "retrieval_query": query, "query_mode": mode}
    answerable = state.get("signals", {}).get("answerable")
    if answerable is not None and answerable > state.get("held_answerable", -1.0):
        # Kept in case the new search reads worse (triage compares them with the judge): after an abstention, and
        # after an ungrounded written reply, whose passages the judge may read as answering while a new query loses
        # them (qwen2.5-1.5b, doc2dial: 5 of 60 follow-ups abstained that way).
        update.update(held_passages=list(state.get("passages", [])), held_answerable=answerable)
    return {**update, "keywords": keywords}
