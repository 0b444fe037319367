"""Answer units on documentation with code: the unit ranker, the documentation triage, the variant the user is in, and
the checks an extracted two-unit reply with a cut code block must pass (relevance, citations)."""

from __future__ import annotations

import numpy as np
from reground.nodes.context import Context
from reground.nodes.finalize import citations_for, quoting_passages
from reground.tools.retrieval.variants import competing_variants, label_words, prefer_named_variant
from reground.tools.signals.doc_triage import (
    FEATURE_NAMES,
    doc_triage_features,
    heading_match,
    page_scores,
    shipped_doc_triage,
)
from reground.tools.signals.evidence import Evidence, relevance_parts
from reground.tools.signals.reading import read_turn
from reground.tools.signals.units import rank_units, shipped_unit_ranker, structured_turn, unit_feature_rows
from reground.tools.text.code_blocks import trim_code_blocks
from reground.tools.text.sentences import strip_citations, text_sentences
from reground.tools.types import Passage

CODE = (
    "Add `Query` and set `max_length` to `50`:\n```python\nasync def read(q: Annotated[str, Query(max_length=50)]):\n"
    "```"
)


def _passage(n: int, text: str, doc: str = "", section: str = "", variant: str = "") -> Passage:
    return Passage(
        chunk_id=f"c{n}",
        doc_id=doc or f"doc{n}",
        title=f"Title {n}",
        section=section,
        url="",
        position=n,
        text=text,
        metadata={"variant": variant} if variant else {},
    )


def _unit(text: str, passage: int = 1, dense: float = 0.5, lexical: float = 0.5, order: int = 0) -> Evidence:
    return Evidence(text=text, passage=passage, score=dense + lexical, lexical=lexical, dense=dense, order=order)


def test_the_unit_ranker_puts_the_unit_with_the_code_first_for_a_how_to_question() -> None:
    question = "how do I limit the query length to 50?"
    prose = _unit("The query parameter is optional and its length is not checked by default.", 1, 0.55, 0.5, 0)
    code = _unit(CODE, 2, 0.5, 0.45, 1)
    passages = [_passage(1, prose.text), _passage(2, code.text)]
    rows = unit_feature_rows(question, [prose, code], passages)
    assert rows.shape == (2, 6) and rows[1, 3] == 1.0 and rows[0, 3] == 0.0  # has_code
    ranked = rank_units(shipped_unit_ranker(), question, [prose, code], passages)
    assert ranked[0].text == CODE and all(u.unit_score is not None for u in ranked)


def _embed(texts: list[str]) -> np.ndarray:
    """A deterministic unit-vector embedder: words hashed into 16 dimensions."""
    rows = []
    for text in texts:
        v = np.zeros(16, dtype=np.float32)
        for word in text.lower().split():
            v[sum(map(ord, word)) % 16] += 1.0
        rows.append(v / (np.linalg.norm(v) or 1.0))
    return np.asarray(rows)


def test_the_unit_ranker_ranks_only_documentation_with_code_or_tables_by_default() -> None:
    prose = [_passage(1, "Full-time employees receive 30 days of annual leave per year.")]
    code = [_passage(1, "Install it with this command:\n\n```console\n$ uv add fastapi\n```")]
    weights = Context().evidence_weights()
    ranker = shipped_unit_ranker()
    plain = read_turn(
        "how many days of leave?", "how many days of leave?", [], prose, _embed, weights, unit_ranker=ranker
    )
    docs = read_turn("how do I add fastapi?", "how do I add fastapi?", [], code, _embed, weights, unit_ranker=ranker)
    assert not structured_turn(plain.evidence) and plain.evidence[0].unit_score is None
    assert structured_turn(docs.evidence) and docs.evidence[0].unit_score is not None
    forced = read_turn(
        "q?", "q?", [], prose, _embed, Context(evidence={"unit_ranking": "on"}).evidence_weights(), unit_ranker=ranker
    )
    assert forced.evidence[0].unit_score is not None


def test_the_documentation_triage_asks_back_on_a_vague_opening_and_answers_a_specific_follow_up() -> None:
    model = shipped_doc_triage()
    pages = {"a": 2.0, "b": 1.8, "c": 1.7}
    units = [_unit(CODE, 1, 0.4, 0.3)]
    vague = doc_triage_features("how do I configure it?", [], units, pages, 1.0, 0.0)
    specific_units = [_unit(CODE, 1, 0.9, 1.0)]
    history = [{"role": "user", "text": "query params"}, {"role": "assistant", "text": "Use Query."}]
    specific = doc_triage_features(
        "how do I cap the query parameter q at 50 characters with Query max_length?",
        history,
        specific_units,
        {"a": 4.0, "b": 1.0},
        1.0,
        0.5,
    )
    assert vague.shape == (len(FEATURE_NAMES),)
    assert model.decide(vague)[0] == "clarify"
    assert model.decide(vague, may_ask_back=False)[0] != "clarify"
    assert model.decide(specific)[0] == "answer"
    assert page_scores([_unit(CODE, 2)], ["x", "y"]) == {"y": 0.0}


def test_the_heading_match_reads_the_kept_passages_headings_only() -> None:
    """ "set up uv in github actions" is a page's heading: the triage reads how much of the question the kept
    passages' title and heading path hold (it asked this opening back, naming that very page)."""
    candidates = [
        {"chunk_id": "g", "title": "Using uv in GitHub Actions", "section": "Installation"},
        {"chunk_id": "p", "title": "Building and publishing a package", "section": "Publishing"},
    ]
    question = "set up uv in github actions"
    assert heading_match(question, candidates, ["g"]) > heading_match(question, candidates, ["p"])
    assert heading_match(question, candidates, []) == 0.0
    assert heading_match("how do I set the version?", candidates, ["g", "p"]) < heading_match(
        question, candidates, ["g"]
    )


def test_the_named_variant_keeps_its_passages_and_an_unnamed_one_is_a_choice() -> None:
    mac = _passage(1, "Use curl.", doc="install", section="Installer", variant="macOS and Linux")
    win = _passage(2, "Use irm.", doc="install", section="Installer", variant="Windows")
    plain = _passage(3, "uv is fast.", doc="intro")
    kept, named = prefer_named_variant([mac, win, plain], ["how do I install it with powershell?"])
    assert named == ["Windows"] and [p["chunk_id"] for p in kept] == ["c2", "c3"]
    unchanged, none = prefer_named_variant([mac, win, plain], ["how do I install it?"])
    assert none == [] and len(unchanged) == 3
    assert [p["chunk_id"] for p in competing_variants([mac, win, plain])] == ["c1", "c2"]
    assert competing_variants([plain, mac]) == []
    assert {"js", "npm"} <= label_words("JavaScript")


def test_a_reply_with_a_cut_code_block_still_reads_as_relevant_and_keeps_its_lines() -> None:
    long_code = "Set it up like this:\n```python\n" + "\n".join(f"x_{i} = {i}" for i in range(40)) + "\n```"
    units = [_unit(long_code, 1), _unit("Another sentence about something else entirely here.", 2, order=1)]
    reply = trim_code_blocks(long_code, ["set it up"], max_lines=5)
    assert reply.count("\n") < long_code.count("\n")
    assert relevance_parts(reply, units)["relevance"] == 1.0
    marked = reply.replace("like this:", "like this: [1]")
    assert "\n```python" in strip_citations(marked) and "[1]" not in strip_citations(marked)
    assert text_sentences(strip_citations(marked))[0].startswith("Set it up like this:\n```python")
    assert strip_citations("Plain [2] reply   here.") == "Plain reply here."


def test_a_two_unit_reply_cites_both_pages_it_quotes() -> None:
    first = _passage(1, f"Intro text about the query.\n\n{CODE}\n\nMore words here about other things.")
    second = _passage(2, "Validation errors are returned as a 422 response with the details.")
    reply = f"{CODE}\nValidation errors are returned as a 422 response with the details."
    settings = Context().citations
    assert quoting_passages(reply, [first, second], settings.min_quoted_words) == [1, 2]
    cited = {c["chunk_id"] for c in citations_for(reply, [first, second], [1, 2], settings)}
    assert cited == {"c1", "c2"}


def test_an_extracted_unit_with_a_cut_code_block_is_still_quoted_word_for_word() -> None:
    from reground.tools.signals.evidence import quoted_verbatim

    page = "Set it up like this:\n\n```python\n" + "\n".join(f"    x_{i} = compute({i})" for i in range(40)) + "\n```"
    reply = trim_code_blocks(page.replace("\n\n```", "\n```"), ["x_7"], max_lines=4)
    assert "..." in reply and quoted_verbatim(reply, [page])
    assert not quoted_verbatim(reply.replace("compute(7)", "compute(8)"), [page])


def test_an_extracted_reply_does_not_show_the_same_code_block_twice() -> None:
    """A page that shows one file under two sentences: the second unit with the same block is passed over for the
    next one."""
    from reground.tools.signals.extract_reply import extractive_answer

    block = "```python\napp.include_router(items.router)\n```"
    texts = [f"Now include the routers:\n{block}", f"We can declare all that in one place:\n{block}", "Use a prefix."]
    evidence = [
        Evidence(text=t, passage=i + 1, order=i, score=3.0 - i, lexical=0.0, dense=0.0) for i, t in enumerate(texts)
    ]
    reply, _ = extractive_answer(evidence, 2, 0.0)
    assert reply.count("app.include_router(items.router)") == 1 and "Use a prefix." in reply


def test_a_cut_code_block_marks_only_real_cuts_not_the_blank_lines_it_keeps() -> None:
    """`...` stands where lines were left out; a blank line between two kept lines is shown as it is."""
    from reground.tools.text.code_blocks import trim_code

    lines = [
        "from enum import Enum",
        "",
        "from fastapi import FastAPI",
        "",
        "x = 1",
        "y = 2",
        "z = 3",
        "class M(str, Enum):",
    ]
    out = trim_code(lines, {"enum", "fastapi"}, set(), max_lines=4)
    assert out[:3] == ["from enum import Enum", "", "from fastapi import FastAPI"]
    assert out.count("...") == 1 and out[-1] == "class M(str, Enum):"


def test_pages_are_offered_only_when_they_answer_differently_or_the_opening_names_too_little() -> None:
    import math

    from reground.tools.signals.doc_triage import FEATURE_NAMES, pages_answer_differently

    def row(readings: float, opening: float, content_words: int) -> np.ndarray:
        values = dict.fromkeys(FEATURE_NAMES, 0.0)
        values.update(readings=readings, opening=opening, log_content_words=math.log1p(content_words))
        return np.asarray([values[name] for name in FEATURE_NAMES], dtype=np.float32)

    assert pages_answer_differently(row(2, 0, 6)), "two pages fit about as well"
    assert pages_answer_differently(row(1, 1, 2)), "'how do I configure it?' opens the conversation"
    assert not pages_answer_differently(row(1, 0, 2)), "a follow-up: the conversation narrows it"
    assert not pages_answer_differently(row(1, 1, 6)), "'generate a typescript client from my fastapi api'"


def test_a_best_unit_holding_the_question_s_words_answers_whatever_the_head_says() -> None:
    from reground.tools.signals.doc_triage import FEATURE_NAMES, DocTriage

    n = len(FEATURE_NAMES)
    doubtful = (np.zeros(n, dtype=np.float32), -3.0, np.zeros(n, dtype=np.float32), np.ones(n, dtype=np.float32))
    triage = DocTriage(doubtful, doubtful, 0.01, 0.9, 0.99, 0.4)
    row = np.zeros(n, dtype=np.float32)
    assert triage.decide(row)[0] == "hedge", "the head finds it only close"
    row[FEATURE_NAMES.index("best_lexical")] = 0.5
    assert triage.decide(row)[0] == "answer", "the best unit holds the question's words"
    older = DocTriage.from_json({**triage.to_json(), "thresholds": {"hedge": 0.01, "answer": 0.9, "ask_back": 0.99}})
    assert older.held_words_threshold is None and older.decide(row)[0] == "hedge", "weights trained before the rule"
    assert DocTriage.from_json(triage.to_json()).held_words_threshold == 0.4
