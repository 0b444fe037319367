"""Ask, abstain or answer: decide from measured signals what the retrieved passages allow, before any answer call.

MTRAG-UN's three behaviours. The passages' sentences are ranked against the question once (signals/evidence.py) and
kept in state for the answer; from them and the candidates come three LLM-free signals (tools/signals/answerability.py):
**support** (how well the best sentence matches the question), **coverage** (the share of the question's words the
passages hold) and **readings** (distinct documents that fit a reference the dialogue never introduced). The turn
asks back when the question is ambiguous, abstains when nothing supports it (after at most
`abstain_reground_attempts` re-retrievals), and answers otherwise. Thresholds are context fields calibrated on
MTRAG-UN and doc2dial dev (evals/README.md, "Ask, abstain or answer").
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from reground.nodes.common import NodeEnv, answerable_of, evidence_for, question_of
from reground.nodes.state import ClarifyOption, EvidenceItem, State
from reground.tools.signals.answerability import (
    Reading,
    coverage,
    dangling_referent,
    readings,
    support,
    unresolved_references,
)
from reground.tools.signals.ask_back import ask_back_features
from reground.tools.signals.doc_triage import (
    doc_triage_features,
    heading_match,
    page_scores,
    pages_answer_differently,
)
from reground.tools.signals.reading import TurnReading, read_turn

MIN_OPTIONS = 2  # fact: a choice needs two
OPENING_MESSAGES = 2  # a question with at most the first exchange before it opens the conversation


def triage(state: State, env: NodeEnv) -> dict[str, Any]:
    """Decide what the passages allow before any answer call: ask back, abstain, hedge or answer, from the
    evidence read once for these passages and the support, coverage and readings signals."""
    context = env.context
    passages = list(state.get("passages", []))
    reading = evidence_for(state, passages, env) if passages else None
    held = list(state.get("held_passages", []))
    restored: dict[str, Any] = {}
    if held and reading is not None and (reading.answerable or 0.0) < state.get("held_answerable", -1.0):
        # The search before re-grounding read better: answer (or abstain) from its passages.
        env.stats.notes.append(
            f"the earlier search reads better (answerable {state.get('held_answerable', -1.0):.2f} > "
            f"{reading.answerable or 0.0:.2f}): its passages are kept"
        )
        passages, reading = held, evidence_for(state, held, env)
        restored = {"passages": held}
    evidence = reading.evidence if reading else []
    supported = support(evidence, context.evidence.dense_weight)
    covered, missing = (reading.coverage, list(reading.missing)) if reading else coverage(question_of(state), [])
    # A reply to the turn's own clarifying question is never asked back again.
    clarified = state.get("query_mode") == "clarified"
    references = [] if clarified else unresolved_references(state["question"], state.get("history", []))
    near = readings(state.get("candidates", []), context.triage.reading_ratio)  # documents about as close as the best
    # On documentation with code the heads trained on developer docs decide whether to ask back (they read how many
    # pages fit): a definite reference there is mostly generic ("the request fails", "the difference between").
    documentation = bool(evidence) and evidence[0].unit_score is not None
    found = near if references and not documentation else []
    signals = {
        "support": round(supported, 4),
        "coverage": round(covered, 4),
        "unresolved_references": float(len(references)),
        "readings": float(len(found)),
    }
    update: dict[str, Any] = {
        **restored,
        "evidence": [EvidenceItem(**asdict(e)) for e in evidence],
        "signals": signals,
        "missing": missing,
        "options": [],
        "referent": "",
    }
    opening = len(state.get("history", [])) <= OPENING_MESSAGES
    needed = context.triage.clarify_min_readings_opening if opening else context.triage.clarify_min_readings
    if context.use_clarify and found:
        found = answering_readings(state, found, env)
        signals["answering_readings"] = float(len(found))
    if context.use_clarify and len(found) >= needed:
        env.stats.notes.append(
            f"ambiguous: {references[0]!r} fits {len(found)} documents ({', '.join(r.label for r in found)})"
        )
        options = [ClarifyOption(label=r.label, doc_id=r.doc_id, chunk_id=r.chunk_id) for r in found]
        return {**update, "decision": "clarify", "options": options}
    # Passages that answer once per language or platform are no reason to ask: the answer replies from one variant
    # and names the others (signals/variants_named.py).
    if reading is not None and documentation:
        return {**update, **documentation_decision(state, reading, clarified, signals, env)}
    if reading is not None and reading.answerable is not None:
        asked_back = (
            learned_ask_back(state, references, near, found, signals, reading.answerable, env)
            if context.use_clarify and not clarified
            else None
        )
        if asked_back is not None:
            return {**update, **asked_back}
        decision = judged_decision(reading.answerable, signals, env)
        asked = ask_what_it_refers_to(state, references, found, env) if decision != "answer" else None
        if asked is not None and context.use_clarify:
            return {**update, **asked}
        return {**update, "decision": decision}
    threshold = context.resolved_support_threshold()
    signals["support_threshold"] = threshold
    if supported < threshold:
        env.stats.notes.append(f"no passage supports the question (support {supported:.2f} < {threshold:.2f})")
        return {**update, "decision": "abstain"}
    env.stats.notes.append(f"support {supported:.2f}, coverage {covered:.2f}")
    return {**update, "decision": "answer"}


def documentation_decision(
    state: State, reading: TurnReading, clarified: bool, signals: dict[str, float], env: NodeEnv
) -> dict[str, Any]:
    """Documentation with code (the unit ranker ranked the units): ask, abstain, hedge or answer by the heads trained
    on developer docs (signals/doc_triage.py). Asking back names the pages whose best units fit about as well as the
    best one (at least two, the closest first)."""
    context = env.context
    candidates = list(state.get("candidates", []))
    history = state.get("history", [])
    units = read_turn(
        question_of(state),
        state["question"],
        history,
        candidates,
        env.services.retriever(context).embed,
        context.evidence_weights(),
        unit_ranker=env.services.unit_ranker(context),
    ).evidence
    pages = page_scores(units, [c["doc_id"] for c in candidates])
    # The heads read the question as the user asked it (as they were trained): a rewrite that adds the dialogue's
    # words to it would read as covered by passages that only share the conversation's topic.
    asked = state["question"]
    covered = coverage(asked, [p["text"] for p in state.get("passages", [])])[0]
    kept = [p["chunk_id"] for p in state.get("passages", [])]
    heading = heading_match(question_of(state), candidates, kept)
    row = doc_triage_features(asked, history, reading.evidence, pages, covered, heading)
    model = env.services.doc_triage()
    decision, answerable, underspecified = model.decide(row, may_ask_back=context.use_clarify and not clarified)
    signals.update(doc_answerable=round(answerable, 4), doc_underspecified=round(underspecified, 4))
    if decision == "clarify" and not pages_answer_differently(row):
        env.stats.notes.append("one page answers best and the question names enough: no reason to ask back")
        decision, answerable, _ = model.decide(row, may_ask_back=False)
    if decision == "clarify":
        best = sorted(pages, key=lambda doc: -pages[doc])[: context.triage.doc_readings_offered]
        first = {c["doc_id"]: c for c in reversed(candidates)}
        options = [ClarifyOption(label=first[d]["title"], doc_id=d, chunk_id=first[d]["chunk_id"]) for d in best]
        if len(options) >= MIN_OPTIONS:
            env.stats.notes.append(f"the question reads as underspecified ({underspecified:.2f}) on these docs")
            return {"decision": "clarify", "options": options}
        decision, answerable, _ = model.decide(row, may_ask_back=False)
    env.stats.notes.append(f"documentation triage: {decision} (answerable {answerable:.2f})")
    return {"decision": decision}


def learned_ask_back(
    state: State,
    references: list[str],
    near: list[Reading],
    answering: list[Reading],
    signals: dict[str, float],
    answerable: float,
    env: NodeEnv,
) -> dict[str, Any] | None:
    """Ask back when the ask-back model (tools/signals/ask_back.py) finds the question too underspecified to answer,
    naming what it may refer to: the documents that fit about as well as the best one and whose own passages the judge
    reads as answering (for an opening pronoun, the best ones). Fewer than two is no choice to offer ("Police dog" and
    "Celtic Britons" for an Apple product): the judge's decision stands."""
    context = env.context
    if not context.triage.learned_ask_back:
        return None
    question, history = state["question"], state.get("history", [])
    candidates = state.get("candidates", [])
    model = env.services.ask_back()
    probability = model.probability(
        ask_back_features(
            question,
            history,
            references=len(references),
            readings=len(near),
            answerable=answerable,
            support=signals["support"],
            coverage=signals["coverage"],
        )
    )
    signals["underspecified"] = round(probability, 4)
    if probability < model.threshold:
        return None
    referent = dangling_referent(question, history)
    if len(answering) >= 2:
        offered = answering
    elif referent:  # an opening pronoun ("How do I configure it?"): name what the documents cover
        offered = readings(candidates, ratio=0.0)
    elif len(near) >= 2:  # the documents that fit about as well as the best one and that the judge reads as answering
        offered = answering_readings(state, near, env)
    else:
        return None  # one document fits: no choice to offer
    if len(offered) < 2:
        return None
    env.stats.notes.append(f"the question reads as underspecified ({probability:.2f} >= {model.threshold:.2f})")
    options = [ClarifyOption(label=r.label, doc_id=r.doc_id, chunk_id=r.chunk_id) for r in offered]
    return {"decision": "clarify", "options": options, "referent": referent}


def ask_what_it_refers_to(
    state: State, references: list[str], answering: list[Reading], env: NodeEnv
) -> dict[str, Any] | None:
    """The documents do not answer a question that leans on something the dialogue never named: ask what it is
    rather than hedge or abstain. An opening pronoun ("How do I configure it?") is asked about naming what the
    documents cover; a definite reference ("this burger") when several readings answer the question (the judge read
    each one's own passages), naming them. One answering reading is no ambiguity, and the reference itself is not
    quoted: the words that find it ("the secret", "the end") are often not what the user has in mind."""
    referent = dangling_referent(state["question"], state.get("history", []))
    if referent:
        offered = readings(state.get("candidates", []), ratio=0.0)
    elif references and len(answering) >= 2:  # several: an ambiguity
        offered = answering
    else:
        return None
    if not offered:
        return None
    env.stats.notes.append(f"{referent or references[0]!r} names nothing said yet and the documents do not answer it")
    options = [ClarifyOption(label=r.label, doc_id=r.doc_id, chunk_id=r.chunk_id) for r in offered]
    return {"decision": "clarify", "options": options, "referent": referent}


def answering_readings(state: State, found: list[Reading], env: NodeEnv) -> list[Reading]:
    """The readings worth offering: those whose own passages the judge reads as answering the question, at least
    closely (its hedge band). A document that only shares the question's words ("Gossip Girl" for a question
    about a state's name) is not one of them. Without the judge, all of them."""
    if not env.context.use_trained_judge:
        return found
    candidates = state.get("candidates", [])
    kept = []
    for reading in found:
        own = [c for c in candidates if c["doc_id"] == reading.doc_id]
        answerable = answerable_of(state, own, env) if own else 0.0
        if answerable is None or answerable >= env.context.triage.judge_hedge_threshold:
            kept.append(reading)
    if len(kept) < len(found):
        dropped = [r.label for r in found if r not in kept]
        env.stats.notes.append(f"readings the judge finds no answer in: {', '.join(dropped)}")
    return kept


def judged_decision(answerable: float, signals: dict[str, float], env: NodeEnv) -> str:
    """The judge's three bands (ReGround's rule, CRAG's three grades): answer when it finds an answer, hedge when it
    finds only something close, abstain when it finds nothing (thresholds calibrated on MTRAG-UN dev,
    evals/results/judge/)."""
    context = env.context
    signals["answerable"] = round(answerable, 4)
    signals["answer_threshold"] = context.triage.judge_answer_threshold
    signals["hedge_threshold"] = context.triage.judge_hedge_threshold
    if answerable < context.triage.judge_hedge_threshold:
        threshold = context.triage.judge_hedge_threshold
        env.stats.notes.append(
            f"the judge finds no answer in the passages (answerable {answerable:.2f} < {threshold:.2f})"
        )
        return "abstain"
    if answerable < context.triage.judge_answer_threshold:
        env.stats.notes.append(f"the judge finds only a close passage (answerable {answerable:.2f}): hedging")
        return "hedge"
    env.stats.notes.append(f"the judge finds an answer (answerable {answerable:.2f})")
    return "answer"
