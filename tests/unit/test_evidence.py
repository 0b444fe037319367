"""The extractive anchor and the relevance signal built on it (tools/signals/evidence.py), and the extract reply
(tools/signals/extract_reply.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from reground.tools.signals.evidence import (
    Evidence,
    asked_again,
    asked_figure,
    continuity,
    figure_first,
    rank_evidence,
    relevance_parts,
    repeats,
)
from reground.tools.signals.extract_reply import extractive_answer
from reground.tools.text.sentences import sentence_spans
from reground.tools.types import Passage

LEAVE = (
    "Full-time employees in Germany receive 30 working days of paid annual leave per calendar year. "
    "You can carry over up to 5 unused days of annual leave into the next calendar year. "
    "Carried-over days must be taken by 31 March."
)
TRAVEL = "Book trains in second class. Submit receipts within 30 days of the trip."


def passages(*texts: str) -> list[Passage]:
    return [
        Passage(chunk_id=f"c{i}", doc_id=f"d{i}", title="", section="", url="", position=0, text=t, metadata={})
        for i, t in enumerate(texts, start=1)
    ]


def test_the_sentence_holding_the_question_terms_ranks_first() -> None:
    ranked = rank_evidence("Until when must carried-over days be taken?", passages(LEAVE, TRAVEL))
    assert ranked[0].text == "Carried-over days must be taken by 31 March."
    assert ranked[0].passage == 1
    assert ranked[0].lexical > ranked[-1].lexical


def test_dense_vectors_break_a_lexical_tie() -> None:
    docs = passages("Alpha beta gamma delta.", "Alpha beta epsilon zeta.")
    question_vector = np.array([1.0, 0.0])
    sentence_vectors = np.array([[0.0, 1.0], [1.0, 0.0]])
    ranked = rank_evidence("alpha beta", docs, sentence_vectors=sentence_vectors, question_vector=question_vector)
    assert ranked[0].passage == 2 and ranked[0].dense == 1.0


def test_a_follow_up_is_ranked_with_its_dialogue_reading_only_when_weighted() -> None:
    docs = passages("Alpha beta gamma delta.", "Alpha beta epsilon zeta.")
    question_vector = np.array([0.6, 0.8])  # the follow-up alone leans to the first sentence
    dialogue_vector = np.array([1.0, 0.0])  # read in its dialogue, it is about the second
    sentence_vectors = np.array([[0.0, 1.0], [1.0, 0.0]])
    kwargs = {"sentence_vectors": sentence_vectors, "question_vector": question_vector}
    alone = rank_evidence("alpha beta", docs, **kwargs, dialogue_vector=dialogue_vector)
    assert alone[0].passage == 1, "weight 0 keeps the dialogue reading out of the score"
    assert sorted((e.passage, e.dense_dialogue) for e in alone) == [(1, 0.0), (2, 1.0)], "but keeps its cosines"
    read = rank_evidence("alpha beta", docs, **kwargs, dialogue_vector=dialogue_vector, dialogue_weight=0.5)
    assert read[0].passage == 2 and read[0].score == pytest.approx(read[0].lexical + read[0].dense + 0.5 * 1.0)


def test_short_fragments_are_not_evidence() -> None:
    assert rank_evidence("anything", passages("Yes. No.")) == []


def test_relevance_is_high_for_an_answer_that_restates_the_anchor_and_low_for_another_question() -> None:
    evidence = rank_evidence("How many days of paid annual leave do I get per year?", passages(LEAVE, TRAVEL))
    right = relevance_parts("You receive 30 working days of paid annual leave per calendar year [1].", evidence)
    other = relevance_parts("Submit receipts within 30 days of the trip.", evidence)
    assert right["relevance"] > 0.5 > other["relevance"]
    restates_another = relevance_parts("You can carry over up to 5 unused days of annual leave.", evidence)
    assert restates_another["elsewhere"] > restates_another["anchor"] and restates_another["relevance"] < 0.2
    assert right["novel"] == 1.0


def test_an_answer_repeating_the_previous_reply_has_no_relevance() -> None:
    previous = "You can carry over up to 5 unused days of annual leave into the next calendar year."
    evidence = rank_evidence("And is any of it paid?", passages(LEAVE))
    parts = relevance_parts(previous + " [1]", evidence, previous_reply=previous)
    assert parts["novel"] == 0.0 and parts["relevance"] == 0.0
    assert repeats(previous, previous) and not repeats("Something else entirely new here.", previous)


def test_the_extractive_answer_is_the_best_sentence_and_its_passage() -> None:
    evidence = rank_evidence("Until when must carried-over days be taken?", passages(TRAVEL, LEAVE))
    text, cited = extractive_answer(evidence)
    assert text == "Carried-over days must be taken by 31 March." and cited == [2]
    assert extractive_answer([]) == ("", [])


def test_an_extracted_reply_adds_a_close_sentence_of_the_same_passage_in_reading_order() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    exception = Evidence("If you were ill, carried-over days stay for 15 months.", 1, 0.51, 0.2, 0.3, order=3)
    rule = Evidence("Carried-over days must be taken by 31 March.", 1, 0.48, 0.2, 0.3, order=2)
    other = Evidence("Days beyond the limit expire in December.", 2, 0.47, 0.1, 0.3, order=7)
    text, passages = extractive_answer([exception, rule, other], 2, 0.9, same_passage=True)
    assert text == f"{rule.text} {exception.text}" and passages == [1], "both, the rule first as the passage has it"
    text, passages = extractive_answer([exception, other, rule], 2, 0.9, same_passage=True)
    assert text == f"{rule.text} {exception.text}", "a sentence of another passage is skipped, not an end"
    assert extractive_answer([exception, rule], 2, 0.99, same_passage=True)[0] == exception.text, "not close enough"
    text, passages = extractive_answer([exception, other], 3, 0.5)
    assert passages == [1, 2] and text.startswith(exception.text)


def test_relevance_is_the_best_answer_sentences_so_a_second_sentence_costs_nothing() -> None:
    from reground.tools.signals.evidence import Evidence, relevance_parts

    best = Evidence("Carried-over days must be taken by 31 March.", 1, 0.6, 0.3, 0.3)
    other = Evidence(
        "If you could not take your leave because of illness, the carried-over days do not expire on 31 March but "
        "stay available for 15 months.",
        1,
        0.5,
        0.3,
        0.2,
    )
    both = f"{best.text} {other.text}"
    assert relevance_parts(both, [best, other])["relevance"] == 1.0
    assert relevance_parts(other.text, [best, other])["relevance"] < 0.2, (
        "another sentence alone answers another question"
    )


def test_a_question_in_a_passage_is_never_the_extracted_answer() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    heading = Evidence("Should I bag my recyclables?", 1, 0.9, 0.5, 0.4, order=0)
    answer = Evidence("Keep recyclables loose in the recycling bins.", 1, 0.5, 0.2, 0.3, order=1)
    assert extractive_answer([heading, answer], 1)[0] == answer.text
    assert extractive_answer([heading], 1) == ("", [])


def test_a_sentence_that_introduces_a_list_brings_the_list() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    intro = Evidence("Two major types of keystores are available:", 1, 0.9, 0.5, 0.4, order=4)
    items = [Evidence(f"* Keystore type {n}: stores keys.", 1, 0.3, 0.1, 0.2, order=4 + n) for n in (1, 2)]
    elsewhere = Evidence("Another passage says something else.", 2, 0.2, 0.1, 0.1, order=7)
    text, _ = extractive_answer([intro, *items, elsewhere], 1)
    assert text == f"{intro.text} {items[0].text} {items[1].text}"


def test_a_sentence_that_its_passage_follows_with_list_items_brings_only_those_items() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    intro = Evidence("Calico policies add the following features.", 1, 0.9, 0.5, 0.4, order=2)
    items = [
        Evidence("* Allow or block traffic on specific network interfaces.", 1, 0.3, 0.1, 0.2, order=3),
        Evidence("* Allow or block traffic for pods across namespaces.", 1, 0.3, 0.1, 0.2, order=4),
    ]
    after = Evidence("Calico enforces these policies with iptables rules.", 1, 0.2, 0.1, 0.1, order=5)
    text, _ = extractive_answer([intro, *items, after], 1)
    assert text == f"{intro.text} {items[0].text} {items[1].text}"
    # A sentence whose passage goes on in prose stays alone; a list item does not pull in its neighbours.
    assert extractive_answer([intro, after], 1)[0] == intro.text
    first_item = Evidence(items[0].text, 1, 0.95, 0.5, 0.4, order=3)
    assert extractive_answer([first_item, items[1]], 1)[0] == first_item.text.removeprefix("* ")
    # An item's second sentence is inside the list, and a list of questions (an FAQ's index) answers nothing.
    second = Evidence("It needs a policy file.", 1, 0.95, 0.5, 0.4, order=4)
    assert extractive_answer([second, items[0], Evidence(items[1].text, 1, 0.3, 0.1, 0.2, order=5)], 1)[0] == (
        second.text
    )
    faq = Evidence("* Are there limits on backups?", 1, 0.3, 0.1, 0.2, order=3)
    assert extractive_answer([intro, faq], 1)[0] == intro.text


PLATES = (
    "How to surrender your plates\nYou can surrender plates at any DMV office. Bring the registration too.\n\n"
    "Refunds\nA refund needs the receipt."
)


def test_a_sentence_ends_at_a_blank_line_but_not_at_a_line_break() -> None:
    sentences = [text for _, _, text in sentence_spans(PLATES)]
    assert sentences == [
        "How to surrender your plates\nYou can surrender plates at any DMV office.",
        "Bring the registration too.",
        "Refunds\nA refund needs the receipt.",
    ]


def test_a_heading_line_ranks_with_its_sentence_but_the_reply_leaves_it_out() -> None:
    evidence = rank_evidence("How do I surrender my plates?", passages(PLATES))
    assert evidence[0].text.startswith("How to surrender your plates\n")  # its words ranked the sentence
    text, cited = extractive_answer(evidence)
    assert text == "You can surrender plates at any DMV office." and cited == [1]


def test_a_line_wrapped_mid_sentence_is_not_a_heading() -> None:
    wrapped = "Employees must send the signed form to\nHR within 7 days of the trip.\n\nNothing else is needed here."
    text, _ = extractive_answer(rank_evidence("When must the signed form reach HR?", passages(wrapped)))
    assert text == "Employees must send the signed form to HR within 7 days of the trip."
    lower = "The allowance is paid monthly\nand taxed as salary."
    assert extractive_answer(rank_evidence("Is the allowance paid monthly?", passages(lower)))[0] == (
        "The allowance is paid monthly and taxed as salary."
    )


def chunk(doc_id: str, position: int, text: str, section: str = "") -> Passage:
    return Passage(
        chunk_id=f"{doc_id}-{position}", doc_id=doc_id, title="", section=section, url="", position=position,
        text=text, metadata={},
    )  # fmt: skip


def test_continuity_favours_what_follows_the_previous_reply_in_its_document_and_section() -> None:
    said = "Each parent can take up to three years of leave."
    docs = [
        chunk("parental", 2, f"{said} Register it seven weeks ahead. The state pays an allowance."),
        chunk("parental", 3, "The partner gets four paid weeks."),  # the next chunk, same section
        chunk("parental", 4, "Part-time work is allowed.", section="Part-time"),  # another section
        chunk("travel", 3, "Book trains in second class."),  # another document
    ]
    bonus = continuity(docs, said)
    assert bonus[0] == 0.0, "the sentence said is not its own continuation"
    assert bonus[1] == 1.0 and 0.0 < bonus[3] < bonus[2] < 1.0, "the next sentences, fading, across the chunk end"
    assert bonus[4] == 0.0 and bonus[5] == 0.0, "never across a section heading or into another document"
    assert continuity(docs, "Something nobody wrote in any passage here.") == [0.0] * 6
    long_reply = f"{said} It is long. It gathers many places. From all over."
    assert continuity(docs, long_reply) == [0.0] * 6, "a reply of many sentences has no single place to follow"
    short = [chunk("d", 0, "No need to register it. Then pay the fee.")]
    assert continuity(short, "No") == [0.0, 0.0], "a reply under three words restates nothing"


def test_after_a_question_the_sentence_it_came_from_continues_the_dialogue_too() -> None:
    text = "If your vehicle is registered in New York, it must be insured. The plates follow it."
    docs = [chunk("insurance", 0, text)]
    assert continuity(docs, "Is your vehicle registered in New York?") == [1.0, 1.0]
    assert continuity(docs, "Your vehicle is registered in New York.") == [0.0, 1.0], "a statement: only what follows"


def test_continuity_moves_a_follow_up_to_the_sentence_after_the_previous_reply_only_when_weighted() -> None:
    said = "Each parent can take up to three years of leave."
    docs = [
        chunk("parental", 0, f"{said} The state pays an allowance."),
        chunk("partner", 0, "Partners get paid weeks."),
    ]
    question = "And is any of it paid?"
    vectors = {
        "sentence_vectors": np.array([[1.0, 0.0], [0.0, 1.0], [0.9, 0.1]]),
        "question_vector": np.array([0, 1.0]),
    }
    assert rank_evidence(question, docs, **vectors, previous_reply=said)[0].passage == 2, "weight 0: as before"
    ranked = rank_evidence(question, docs, **vectors, previous_reply=said, continuity_weight=0.5)
    assert ranked[0].text == "The state pays an allowance." and ranked[0].continuity == 1.0


def test_a_sentence_the_question_names_is_asked_again_only_if_no_other_sentence_holds_its_words() -> None:
    evidence = rank_evidence("What about partner leave?", passages(LEAVE, "Partner leave is four weeks at full pay."))
    (partner,) = [e for e in evidence if "Partner" in e.text]
    assert asked_again("What about partner leave?", evidence) == partner.order
    assert asked_again("And the relocation bonus?", evidence) is None, "no sentence holds its words"
    two = rank_evidence("carry over days", passages(LEAVE, "Days carry over at year end."))
    assert asked_again("carry over days", two) is None, "two sentences hold every word: the new one can answer"


def test_repeating_the_previous_reply_is_relevant_when_the_question_asks_for_it_again() -> None:
    previous = "Partner leave is four weeks at full pay."
    evidence = rank_evidence("What about partner leave?", passages(LEAVE, previous))
    assert evidence[0].text == previous
    assert relevance_parts(previous, evidence, previous_reply=previous)["novel"] == 1.0


def test_a_fragment_or_a_bare_link_is_never_a_whole_reply() -> None:
    """A list item or heading ("Plan the migration") and a pointer whose link is the message are skipped; the
    sentence after them answers."""
    from reground.tools.signals.evidence import Evidence, stands_as_reply
    from reground.tools.signals.extract_reply import extractive_answer

    pointer = "For more information, see [Tags for Block Storage for VPC snapshots](https://cloud.example/docs/tags)."
    assert not stands_as_reply("Plan the migration")
    assert not stands_as_reply(pointer)
    assert stands_as_reply("Read the [leave policy](https://hr.example/leave) before you apply in writing.")
    assert stands_as_reply("Full-time employees get 30 days of leave")  # a sentence that lacks only its full stop
    evidence = [
        Evidence(text="Plan the migration", passage=1, score=0.9, lexical=0.9, dense=0.9, order=0),
        Evidence(text=pointer, passage=1, score=0.8, lexical=0.8, dense=0.8, order=1),
        Evidence(
            text="Transfer your documents to the new project first.",
            passage=1,
            score=0.5,
            lexical=0.5,
            dense=0.5,
            order=2,
        ),
    ]
    text, passages = extractive_answer(evidence)
    assert text == "Transfer your documents to the new project first." and passages == [1]


def test_a_reply_runs_as_long_as_the_conversations_replies_so_far() -> None:
    from reground.nodes.answer import extracted_sentences
    from reground.tools.signals.evidence import Evidence, reply_words

    best = Evidence("Carried-over days must be taken by 31 March of the next year.", 1, 0.6, 0.3, 0.3, order=1)
    second = Evidence("Days you could not take because of illness stay for 15 months.", 1, 0.5, 0.3, 0.2, order=2)
    third = Evidence("Ask your manager to approve the carry-over in the HR portal.", 1, 0.4, 0.2, 0.2, order=3)
    weak = Evidence("The canteen opens at eight.", 1, 0.2, 0.1, 0.1, order=4)
    elsewhere = Evidence("Another country's carry-over ends in April for every employee.", 2, 0.55, 0.3, 0.2, order=9)
    evidence = [best, elsewhere, second, third, weak]
    short = [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello, how can I help?"}]
    long = [{"role": "agent", "text": " ".join(["word"] * n)} for n in (30, 8, 40)]
    assert reply_words([]) == 0.0 and reply_words(short) == 5.0 and reply_words(long) == 30.0

    from reground.nodes.context import Context

    settings = Context().evidence
    first_turn, _ = extracted_sentences(evidence, settings, "conversation", [])
    assert first_turn == extracted_sentences(evidence, settings, "sentence")[0] == best.text, (
        "a first turn: one sentence"
    )
    assert extracted_sentences(evidence, settings, "conversation", short)[0] == best.text, (
        "short replies so far: one sentence"
    )
    text, passages = extracted_sentences(evidence, settings, "conversation", long)
    assert text == f"{best.text} {second.text} {third.text}" and passages == [1], (
        "long replies so far: sentences of the best passage until about 30 words, in reading order; another "
        "passage's sentence and one scoring under half the best never join"
    )
    assert extracted_sentences(evidence, settings, Context().answer_length, long)[0] == text, (
        "the default follows the register"
    )


def test_a_sentence_announcing_a_list_that_was_cut_off_is_never_the_reply() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    dangling = Evidence("Two major types of keystores are available:", 1, 0.9, 0.5, 0.4, order=9)
    earlier = Evidence("Keystores hold the keys that sign your builds.", 1, 0.6, 0.3, 0.3, order=8)
    assert extractive_answer([dangling, earlier], 1)[0] == earlier.text


def test_a_page_title_repeated_on_two_lines_is_never_the_reply() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    title = Evidence("Sharps Disposal | Madison County, NY\nSharps Disposal | Madison County, NY", 1, 0.9, 0.5, 0.4)
    answer = Evidence("Sharps containers are free at any of the county's transfer stations.", 1, 0.6, 0.3, 0.3, order=1)
    assert extractive_answer([title, answer], 1)[0] == answer.text


def test_a_reply_never_opens_with_a_list_marker() -> None:
    from reground.tools.signals.evidence import Evidence
    from reground.tools.signals.extract_reply import extractive_answer

    item = Evidence("* Storage is limited to 200 TB for each storage policy.", 1, 0.9, 0.5, 0.4, order=3)
    assert extractive_answer([item], 1)[0] == "Storage is limited to 200 TB for each storage policy."


def test_a_sentence_copied_with_its_pages_own_footnote_marker_is_quoted_word_for_word() -> None:
    """doc2dial's pages carry footnote markers ("the DMV Call Center [2]."): an extracted reply copies them, and the
    groundedness check must not read them as citations of passage 2 (8 doc2dial dev turns abstained that way)."""
    from reground.nodes.groundedness import hard_failures
    from reground.tools.signals.evidence import quoted_verbatim

    page = "Mail them to Albany, NY 12228. If you have questions, please contact the DMV Call Center [2]."
    other = "Insurance cards are issued by your insurance company."
    reply = "Mail them to Albany, NY 12228. If you have questions, please contact the DMV Call Center [2]."
    copied = quoted_verbatim(reply, [page, other])
    assert copied
    assert not quoted_verbatim("Mail them to Albany, NY 12229 [1].", [page, other])
    draft: Any = {"text": reply, "kind": "answer"}
    passages: Any = [{"text": page, "metadata": {}}, {"text": other, "metadata": {}}]
    env: Any = None  # a copied reply never reaches the checks that read the context's prompts
    failures = [
        part for part, problems in hard_failures(draft, {}, passages, [page, other], env, verbatim=copied) if problems
    ]
    assert failures == [], "a copied sentence holds its own figures; '[2]' is the page's footnote"


@pytest.mark.parametrize(
    "page",
    [
        "To create a key, complete these steps:\n1. Go to the Manage page.\n2. Click Create key.\n3. Name the key.",
        "To create a key, complete these steps:\n\n1) Go to the Manage page.\n2) Click Create key.\n3) Name the key.",
        "To create a key, complete these steps:\n* Go to the Manage page\n* Click Create key\n* Name the key",
    ],
)
def test_a_how_to_reply_brings_the_numbered_or_bulleted_steps_its_sentence_announces(page: str) -> None:
    """The sentence split kept a numbered item's marker with the sentence before it ("steps:\\n1." / "Go to the Manage
    page."), so the announcing sentence no longer ended in a colon and the steps lost their markers: the reply was
    the announcement alone. Each item's line now starts a sentence of its own, marker included."""
    from reground.tools.signals.evidence import rank_evidence
    from reground.tools.signals.extract_reply import extractive_answer
    from reground.tools.text.sentences import is_list_item, text_sentences

    sentences = text_sentences(page)
    assert sentences[0] == "To create a key, complete these steps:"
    assert len(sentences) == 4 and all(is_list_item(s) for s in sentences[1:])
    passages = [
        Passage(chunk_id="c1", doc_id="keys", title="Keys", section="", url="", position=0, text=page, metadata={})
    ]
    text, _ = extractive_answer(rank_evidence("How do I create a key?", passages), 1)
    assert text.startswith("To create a key, complete these steps:") and "Go to the Manage page" in text
    assert "Name the key" in text


def test_an_inline_numbered_list_keeps_each_items_marker_and_a_version_number_is_no_marker() -> None:
    from reground.tools.text.sentences import is_list_item, text_sentences

    inline = "1. [Plan the migration](https://x.example/a). 2. [Transfer your documents](https://x.example/b)."
    assert text_sentences(inline) == [
        "1. [Plan the migration](https://x.example/a).",
        "2. [Transfer your documents](https://x.example/b).",
    ]
    prose = "We released version 2. Then the service moved to the new region."
    assert text_sentences(prose) == ["We released version 2.", "Then the service moved to the new region."]
    assert not any(is_list_item(s) for s in text_sentences(prose))


def test_a_question_asking_for_a_figure_names_what_it_counts() -> None:
    assert asked_figure("How many days of annual leave do I get?") == "days"
    assert asked_figure("How much leave do I get?") == "leave"
    assert asked_figure("how much does it cost?") == ""
    assert asked_figure("How do I book leave?") is None


def test_the_first_figure_a_page_states_of_what_is_asked_leads_the_reply() -> None:
    entitlement = "Full-time employees receive 30 working days of paid annual leave per calendar year."
    carry = "You can carry over up to 5 unused days of annual leave into the next calendar year."
    hours = "If your working days vary, your leave is calculated in hours: 11.5% of your contracted hours."
    pages = [
        Passage(chunk_id="c1", doc_id="leave", title="", section="", url="", position=1, text=carry, metadata={}),
        Passage(chunk_id="c2", doc_id="leave", title="", section="", url="", position=0, text=entitlement, metadata={}),
        Passage(chunk_id="c3", doc_id="part-time", title="", section="", url="", position=0, text=hours, metadata={}),
    ]
    ranked = [
        Evidence(carry, 1, 2.5, 1.0, 0.7, order=0),
        Evidence(hours, 3, 2.3, 1.0, 0.6, order=2),
        Evidence(entitlement, 2, 1.9, 1.0, 0.6, order=1),
    ]
    led = figure_first("How many days of annual leave do I get?", ranked, pages)
    assert [e.text for e in led] == [entitlement, carry, hours], "both state days; the page states 30 first"
    assert extractive_answer(led, 1)[0] == entitlement
    assert figure_first("How much leave do I get?", ranked[1:], pages)[0].text == entitlement, "hours state no leave"
    assert figure_first("How do I book leave?", ranked, pages) == ranked, "no figure asked: the ranking stands"
    far = [ranked[0], Evidence(entitlement, 2, 1.0, 0.3, 0.3, order=1)]
    assert figure_first("How many days of annual leave do I get?", far, pages)[0].text == carry, "too far below"


def test_a_hedge_quotes_no_code_from_a_page_about_something_else() -> None:
    from reground.tools.signals.evidence import hedge_units

    code = "Configure the saver:\n```python\nsaver = PostgresSaver(conn)\n```"
    on_topic = Passage(
        chunk_id="c1",
        doc_id="a",
        title="What a checkpointer is",
        section="",
        url="",
        position=0,
        text=code,
        metadata={},
    )
    other = Passage(
        chunk_id="c2",
        doc_id="b",
        title="Integrations",
        section="Vector stores",
        url="",
        position=0,
        text=code,
        metadata={},
    )
    units = [Evidence(code, 2, 1.0, 0.5, 0.5), Evidence(code, 1, 0.9, 0.5, 0.5)]
    kept = hedge_units("What is a checkpointer exactly?", units, [on_topic, other])
    assert [e.text for e in kept] == ["Configure the saver:", code], "the other page's sentence only; its code goes"


def test_a_unit_whose_every_call_the_previous_reply_gave_is_not_given_again() -> None:
    from reground.tools.signals.evidence import gives_again

    previous = "Use `item.model_dump(exclude_unset=True)` to get only the fields the client sent."
    same_call = "Pass `exclude_unset=True` to `model_dump`:\n```python\ndata = item.model_dump(exclude_unset=True)\n```"
    next_call = "Then copy the stored model with `stored.model_copy(update=data)`."
    assert gives_again(same_call, previous)
    assert not gives_again(next_call, previous), "model_copy is new"
    assert not gives_again("Partial updates send only some fields.", previous), "no code: the sentence check decides"
    assert not gives_again(same_call, ""), "a first turn has no previous reply"
