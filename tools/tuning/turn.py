"""The turn's decisions: how much it reads, when it answers, hedges, asks back or abstains, how its evidence is
ranked, when its answer counts as grounded and how it is refined. A value the run's Context exposes is declared with
`setting` (its meaning is the description Studio's form shows; declared.py); the rest are read by tools only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from reground.tools.tuning.declared import DESCRIPTION, setting


@dataclass(frozen=True)
class BudgetTuning:
    """How much of the dialogue, the question and the store a turn reads and keeps."""

    history_token_budget: int = setting(
        100,
        meaning="Dialogue history (tokens) added to the retrieval query (ConvRAG's DH_tokens; README.md, Retrieval).",
        ge=0,
    )
    history_token_cap: int = setting(
        3000,
        meaning=(
            "What any prompt of a turn carries of the dialogue at most (tokens); older turns are cut (the 0.5B "
            "model's context window)."
        ),
        ge=1,
    )
    question_token_budget: int = setting(
        512,
        meaning="Longer questions are cut to this many tokens (noted in the trace; a pasted page is no question).",
        ge=1,
    )
    min_cut_turn_tokens: int = setting(
        20,
        meaning="A turn cut to fewer tokens than this at the history cap is dropped rather than kept as a fragment.",
        user_settable=False,
        ge=0,
    )
    doc_candidates: int = setting(8, meaning="Documents kept by document-level hybrid search.", ge=1)
    paragraph_candidates: int = setting(8, meaning="Paragraphs kept by paragraph-level scoring, before rerank.", ge=1)
    top_n: int = setting(
        3,
        meaning="Paragraphs kept after rerank (ConvRAG's n; every results table in README.md ran with it).",
        ge=1,
    )
    rewrite_history_messages: int = setting(
        6,
        meaning="Earlier messages shown to a question rewrite (refine_question, re_ground).",
        user_settable=False,
        ge=0,
    )
    keyword_history_messages: int = setting(
        4,
        meaning="Earlier messages shown to the LLM keyword call.",
        user_settable=False,
        ge=0,
    )
    keyword_recent_messages: int = setting(
        2,
        meaning="Earlier messages whose words join the lexical keywords (the last exchange).",
        user_settable=False,
        ge=0,
    )
    forced_history_factor: int = setting(
        3,
        meaning="The forced-history re-ground query reads this many times the usual dialogue budget (ReGround +Force).",
        user_settable=False,
        ge=1,
    )
    recursion_limit: int = setting(
        60,
        meaning=(
            "LangGraph recursion limit of a turn: a backstop far above the longest turn the loops' own caps allow."
        ),
        ge=1,
    )


@dataclass(frozen=True)
class Triage:
    """Ask back, abstain, hedge or answer (nodes/triage.py)."""

    # The largest evidence score (word overlap + MiniLM cosine + bonuses), the support threshold's upper bound.
    support_score_max: float = 3.0
    support_threshold: float = setting(
        0.49,
        meaning=(
            "Abstain when the best passage sentence matches the question less than this (its evidence score: word "
            "overlap + MiniLM cosine); after at most `abstain_reground_attempts` re-retrievals the turn says the "
            "documents do not cover it; 0 = never abstain early. Empty: the value `reground eval calibrate` wrote to "
            "<data_dir>/calibration.json (its entry for this collection when calibrated with --for-collection), else "
            "the fallback, a low percentile of the support of answerable MTRAG-UN and doc2dial dev cases "
            "(evals/results/calibration.json)."
        ),
        ge=0.0,
        le=support_score_max,
    )
    abstain_reground_attempts: int = setting(
        1,
        meaning="Re-retrievals tried before abstaining on a question nothing covers (each with another query).",
        ge=0,
    )
    # The most readings triage finds for an ambiguous reference (answerability.readings): a clarify count above
    # it could never be reached, so the context refuses one.
    max_readings: int = 4
    learned_ask_back: bool = setting(
        True,
        meaning=(
            "With the judge: also ask back when the ask-back model trained on MTRAG-UN dev's underspecified tasks "
            "(tools/signals/ask_back.py; its threshold calibrated with it, evals/results/judge/ask_back.json) finds "
            "the question too underspecified, naming the documents the judge reads as answering it (two at least). "
            "Off: the readings rules alone."
        ),
    )
    # The model reads at most this many unresolved references of a question (more say nothing more).
    ask_back_max_references: int = 3
    clarify_min_readings: int = setting(
        4,
        meaning=(
            "Documents (distinct titles) that must fit an ambiguous reference before the turn asks back (2 to "
            "`max_readings`, the most readings triage finds)."
        ),
        ge=2,
        shown_maximum=max_readings,
    )
    clarify_min_readings_opening: int = setting(
        4,
        meaning=(
            "The same count for a question that opens the conversation (at most one exchange before it), where "
            "nothing said yet can have named what 'the actor' is. Fewer suits collections of many similar entities "
            "(on MTRAG-UN dev it asks back on more underspecified tasks) but asks back more on single-topic pages "
            "(doc2dial dev's answerable turns); evals/README.md, 'Asking back'."
        ),
        ge=2,
        shown_maximum=max_readings,
    )
    reading_ratio: float = setting(
        0.8,
        meaning=(
            "A document counts as a reading when its retrieval score is at least this share of the best one. A "
            "higher share asks back on fewer doc2dial dev turns, on the same underspecified MTRAG-UN dev tasks "
            "(evals/README.md, 'Asking back')."
        ),
        gt=0.0,
        le=1.0,
    )
    # Words of a document's text that name a reading when it has no title.
    reading_label_words: int = 8
    # A question of at least this many words with no anaphora stands alone (answerability.depends_on_dialogue).
    min_standalone_words: int = 6
    partial_coverage: float = setting(
        0.0,
        meaning=(
            "When the passages hold less than this share of the question's content words, the answer says which "
            "ones the documents do not mention (a partial answer); 0 = never."
        ),
        ge=0.0,
        le=1.0,
    )
    partial_missing_named: int = setting(
        3,
        meaning="Missing words a partial answer names at most.",
        user_settable=False,
        ge=1,
    )
    # Both judge thresholds are fitted out of fold on MTRAG-UN dev by `reground judge train`; a test ties them to
    # evals/results/judge/summary.json (tests/unit/test_figures_from_results.py), which holds the rates they keep.
    judge_answer_threshold: float = setting(
        0.7914,
        meaning=(
            "With the judge: answer confidently when its answerability is at least this; between the hedge "
            "threshold and this, the reply says the documents do not say it exactly and quotes the closest passage."
        ),
        ge=0.0,
        le=1.0,
    )
    judge_hedge_threshold: float = setting(
        0.2986,
        meaning=(
            "With the judge: abstain (after the re-retrieval) when its answerability is below this; calibrated out of "
            "fold on MTRAG-UN dev with the answer threshold (evals/results/judge/summary.json)."
        ),
        ge=0.0,
        le=1.0,
    )
    # Documentation triage (signals/doc_triage.py): a page fits "about as well" as the best when its best unit's
    # score is within this many logits of the best one's (a reading the turn may ask back about).
    doc_reading_margin: float = 1.0
    # On documentation, an opening question of at most this many content words names too little to answer ("how do
    # I configure it?", "how do I send a file?"): it may be asked back with one page fitting best. Longer ones, and
    # follow-ups (the conversation narrows them), are asked back only when pages answer them differently.
    doc_vague_content_words: int = 3
    doc_readings_offered: int = setting(
        4,
        meaning=(
            "On documentation with code, the pages a clarifying question names at most (those whose best answer "
            "unit fits about as well as the best one's, closest first)."
        ),
        ge=2,
    )


@dataclass(frozen=True)
class ExtractLength:
    """An extracted reply: at most `sentences`, each scoring at least `ratio` of the best, from the best sentence's
    passage only when `same_passage`."""

    sentences: int = field(metadata={DESCRIPTION: "Sentences (units) the reply takes at most.", "ge": 1})
    ratio: float = field(
        metadata={DESCRIPTION: "A sentence after the best joins while it scores at least this share of it.", "ge": 0.0}
    )
    same_passage: bool = field(metadata={DESCRIPTION: "Only sentences of the best sentence's passage join it."})


@dataclass(frozen=True)
class EvidenceTuning:
    """How passage sentences rank as evidence and how an extracted reply is made of them (signals/evidence.py)."""

    dense_weight: float = setting(
        1.0,
        meaning=(
            "Weight of the question's MiniLM cosine beside its word overlap when passage sentences are ranked as "
            "evidence (the answer's hint, the relevance anchor and the extractive refinement)."
        ),
    )
    dialogue_weight: float = setting(
        0.5,
        meaning=(
            "Weight of a follow-up's MiniLM cosine with the question read in its dialogue, beside its own, when "
            "passage sentences are ranked as evidence (only for a follow-up that depends on the dialogue). On "
            "doc2dial dev it lifts the graph's LLM-free reply token F1 on those follow-ups (evals/README.md, "
            "'Passages and replies without an LLM')."
        ),
        ge=0.0,
    )
    continuity_weight: float = setting(
        0.2,
        meaning=(
            "Weight of continuity when a follow-up's passage sentences are ranked as evidence: a sentence right "
            "after the one the previous reply came from (same document and section) gains this much, fading over "
            "the next `continuity_window` sentences (only after a reply of at most `continuity_max_reply_sentences` "
            "sentences; tools/tuning/turn.py). Chosen on doc2dial dev's LLM-free reply token F1 (evals/README.md "
            "lists the weights and windows measured)."
        ),
        ge=0.0,
    )
    continuity_window: int = 8
    # A passage sentence restating a sentence of the previous reply at this token F1 or more is where it came from
    # (a verbatim extracted reply scores 1; doc2dial's human replies paraphrase their span).
    continuity_match: float = 0.5
    # Only a previous reply of at most this many sentences has a "next" (longer ones gather from several places).
    continuity_max_reply_sentences: int = 2
    judge_rank_weight: float = setting(
        1.0,
        meaning=(
            "With the judge: evidence sentences rank by their hand-made score plus this x the judge's probability "
            "that they answer: on the doc2dial dialogues the judge never saw it ranks answer sentences above the "
            "hand-made score alone (evals/results/judge/summary.json, answer_sentence_mrr_graph_blend against "
            "answer_sentence_mrr_hand_ranking)."
        ),
        ge=0.0,
    )
    reader_weight: float = setting(
        1.0,
        meaning=(
            "With the judge: weight of the reader (a MiniLM cross-encoder trained here that reads the question and "
            "each sentence together) beside the judge's score; 0 turns it off and saves its cost "
            "(evals/results/judge/cost.json), at some held-out answer-sentence MRR (evals/results/judge/summary.json, "
            "with_reader; docs/experiments.md compares weights)."
        ),
        ge=0.0,
    )
    reader_top: int = setting(
        8,
        meaning=(
            "With the reader: it reads only the this many sentences the judge scores best (0: every sentence). A "
            "sentence is one ONNX call, most of a turn's cost outside retrieval; the ones it skips are assumed no "
            "better read than the worst it read. At 8 a doc2dial turn costs about 22 ms less; MTRAG-UN dev "
            "ANSWERABLE reply F1 0.3323 -> 0.3293, doc2dial's LLM-free reply F1 unchanged (evals/README.md, 'Cost')."
        ),
        ge=0,
    )
    unit_ranking: str = setting(
        "auto",
        meaning=(
            "Which ranks a turn's answer units and reranks its passages: the unit ranker trained on documentation "
            "with code (tools/signals/units.py) or the judge and the hand-made score. 'auto': the unit ranker when "
            "the candidates hold a fenced code block; 'on': always; 'off': never."
        ),
    )
    unit_reply_units: int = setting(
        3,
        meaning=(
            "Units an extracted reply takes when the unit ranker ranked them (the best ones, from any passage; "
            "techdocs dev leave-one-corpus-out: evals/results/techdocs_dev/reground_loco/ against "
            "reground_loco_two_units/)."
        ),
        user_settable=False,
        ge=1,
    )
    answer_evidence: int = setting(
        2,
        meaning=(
            "Passage sentences closest to the question (LLM-free) shown to the answer call as evidence; 0 = none."
        ),
        ge=0,
    )
    max_answer_sentences: int = setting(
        2,
        meaning="Answers are cut to this many sentences (dialogue replies are short; the answer rules say 1-3).",
        ge=1,
    )
    answer_lengths: Mapping[str, ExtractLength] = setting(
        meaning=(
            "Each `answer_length`'s extracted reply: at most `sentences`, each scoring at least `ratio` of the best, "
            "from the best sentence's passage only when `same_passage`. 'conversation' runs until the reply is as "
            "long as the assistant's replies so far (their median words); chosen on the doc2dial validation "
            "dialogues, 'paragraph' on MTRAG-UN dev's references (evals/README.md, 'Reply length')."
        ),
        user_settable=False,
        factory=lambda: MappingProxyType(
            {
                "conversation": ExtractLength(6, 0.5, True),
                "sentence": ExtractLength(2, 0.9, True),
                "paragraph": ExtractLength(3, 0.5, False),
            }
        ),
    )
    # A line of at most this many words without closing punctuation is a heading, not a sentence that says something.
    max_heading_words: int = 12
    # The items of a list that an extracted sentence introduces ("... are available:") and that join it.
    list_items: int = 5
    max_code_lines: int = setting(
        16,
        meaning=(
            "A code block in an extracted reply longer than this many lines is cut to the lines that carry what the "
            "question and the reply's sentence name, each cut marked with a '...' line (tools/text/code_blocks.py)."
        ),
        ge=1,
    )
    # An answer whose words are mostly the previous reply's (ROUGE-L precision at least this) repeats it.
    repeat_precision: float = 0.8
    # A fragment ('Plan the migration') of at most this many words is never a whole reply.
    max_fragment_words: int = 5
    # A reply needs at least this many content words.
    min_reply_content_words: int = 2
    # Shorter pieces ("Yes.", "See below.") are not evidence sentences.
    min_sentence_words: int = 3
    # A question asking "how many X" or "how much X" is answered by the sentences that state a figure of X: those
    # scoring at least this share of the best evidence sentence lead the extracted reply (the demo's "How much leave
    # do I get?": the entitlement scores 0.71 of the pro-rata hours rule; doc2dial dev: evals/README.md).
    figure_ratio: float = 0.6
    # A figure states X when X follows the number within this many words ("30 working days of paid annual leave").
    figure_window: int = 6
    # A reply from one of a page's variants (tabs) names at most this many others with their call, each at most this
    # many characters (signals/variants_named.py).
    variants_named: int = 2
    variant_named_chars: int = 80


@dataclass(frozen=True)
class Groundedness:
    """When an answer counts as grounded (nodes/groundedness.py) and how often the turn re-grounds."""

    threshold: float = setting(
        0.5,
        meaning=(
            "Answers scoring below this are re-grounded. Empty: the value `reground eval calibrate` wrote to "
            "<data_dir>/calibration.json, else the fallback."
        ),
        ge=0.0,
        le=1.0,
    )
    weights: Mapping[str, float] = setting(
        meaning="Weights of the groundedness signals (renormalised over those a turn has).",
        factory=lambda: MappingProxyType(
            {"llm_judge": 0.4, "k_precision": 0.25, "rouge_l_precision": 0.1, "embedding_support": 0.25}
        ),
    )
    support_low: float = setting(
        0.35,
        meaning="Embedding support: an answer sentence whose best passage cosine is below this counts 0.",
        ge=-1.0,
        le=1.0,
    )
    support_high: float = setting(
        0.75,
        meaning=(
            "Embedding support: a best passage cosine above this counts 1 (restated); linear between (MiniLM "
            "cosines of restated vs unrelated sentences)."
        ),
        ge=-1.0,
        le=1.0,
    )
    llm_judge_band: float = setting(
        0.15,
        meaning=(
            "The LLM judge runs only when the cheap signals' score is within this distance of the threshold "
            "(where it can change the verdict); 1 = on every answer."
        ),
        ge=0.0,
        le=1.0,
    )
    max_reground_attempts: int = setting(
        2, meaning="Re-retrievals after an ungrounded answer (ReGround loop cap).", ge=0
    )


@dataclass(frozen=True)
class Refinement:
    """The two refine nodes: the follow-up rewrite and ProMiSe's principle-wise refinement of a written answer."""

    rewrite_below_margin: float = setting(
        0.25,
        meaning=(
            "Rewrite a follow-up (one LLM call) only when the history-aware document ranking's top document "
            "leads the second by less than this share of its score; 0 = never rewrite, 1 = always."
        ),
        ge=0.0,
        le=1.0,
    )
    min_grounded_word_share: float = setting(
        0.6,
        meaning=(
            "A rewrite may only use words of the conversation: one with fewer than this share of them is a copied "
            "few-shot example or an invention (a 0.5B model does both)."
        ),
        user_settable=False,
        ge=0.0,
        le=1.0,
    )
    rewrite_max_chars: int = setting(
        400,
        meaning="A rewrite longer than this many characters is not a question.",
        user_settable=False,
        ge=1,
    )
    max_refine_iterations: int = setting(1, meaning="Principle-wise refinement iterations J (ProMiSe loop cap).", ge=0)
    specificity_threshold: float = setting(0.02, meaning="Sufficiency: ROUGE-1 recall of the answer vs the passages.")
    faithfulness_threshold: float = setting(0.05, meaning="Sufficiency: ROUGE-L of the answer vs the passages.")
    relevance_threshold: float = setting(
        0.2,
        meaning=(
            "Sufficiency of relevance: token F1 of the answer against the passage sentences closest to the "
            "question (0 when it repeats the previous reply). Below it the answer is refined on relevance."
        ),
    )
    principle_weights: Mapping[str, float] = setting(
        meaning="Weights w of the proxy metrics in the improvement test.",
        factory=lambda: MappingProxyType(dict.fromkeys(("specificity", "faithfulness", "relevance"), 1.0)),
    )
    improvement_lambda: float = setting(
        1.5,
        meaning="A refined answer replaces the old one only if its weighted gain exceeds this (ProMiSe's lambda).",
    )


@dataclass(frozen=True)
class Citations:
    """What a finished turn cites (nodes/finalize.py)."""

    max_quote_chars: int = setting(
        600,
        meaning="A citation's quote longer than this is cut to the one best sentence.",
        user_settable=False,
        ge=1,
    )
    min_share: float = setting(
        0.5,
        meaning=(
            "A passage is cited when it holds at least this share of the answer's content words (and `of_best` of "
            "the best passage's share)."
        ),
        user_settable=False,
        ge=0.0,
        le=1.0,
    )
    of_best: float = setting(
        0.8,
        meaning=(
            "A passage is cited only when its share of the answer's content words is at least this part of the best "
            "passage's (a passage on another topic shares only common words)."
        ),
        user_settable=False,
        ge=0.0,
        le=1.0,
    )
    min_quoted_words: int = setting(
        4,
        meaning="A passage holding an answer unit's sentence word for word is cited too, when it has this many words.",
        user_settable=False,
        ge=1,
    )


BUDGETS: Final = BudgetTuning()
TRIAGE: Final = Triage()
EVIDENCE: Final = EvidenceTuning()
GROUNDEDNESS: Final = Groundedness()
REFINEMENT: Final = Refinement()
CITATIONS: Final = Citations()
