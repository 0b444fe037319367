"""The turn's decisions: how much it reads, when it answers, hedges, asks back or abstains, how its evidence is
ranked, when its answer counts as grounded and how it is refined. The run's Context takes its defaults from here
(nodes/context.py, where each one is described for Studio's form); figures are from evals/README.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True)
class BudgetTuning:
    """How much of the dialogue, the question and the store a turn reads and keeps."""

    # Dialogue tokens added to the retrieval query (ConvRAG's DH_tokens; doc2dial dev: retrieval table, README).
    history_token_budget: int = 100
    # What any prompt of a turn carries of the dialogue at most; older turns are cut (the 0.5B model's 4k context).
    history_token_cap: int = 3000
    # Longer questions are cut to this many tokens (a pasted page is not a question).
    question_token_budget: int = 512
    # A turn cut to fewer tokens than this at the history cap is dropped rather than kept as a fragment.
    min_cut_turn_tokens: int = 20
    # Documents kept by document-level hybrid search, and paragraphs kept by paragraph scoring before rerank.
    doc_candidates: int = 8
    paragraph_candidates: int = 8
    # Paragraphs kept after rerank (ConvRAG's n = 3; every table in README.md ran with it).
    top_n: int = 3
    # Earlier messages shown to a question rewrite (refine_question, re_ground) and to the LLM keyword call.
    rewrite_history_messages: int = 6
    keyword_history_messages: int = 4
    # Earlier messages whose words join the lexical keywords (the last exchange).
    keyword_recent_messages: int = 2
    # The forced-history re-ground query reads this many times the usual dialogue budget (ReGround +Force).
    forced_history_factor: int = 3
    # LangGraph recursion limit of a turn: a backstop far above the longest turn the loops' own counters allow.
    recursion_limit: int = 60


@dataclass(frozen=True)
class Triage:
    """Ask back, abstain, hedge or answer (nodes/triage.py)."""

    # Abstain below this evidence support until `reground eval calibrate` measures one: the 3rd percentile of the
    # support of 439 answerable dev cases (MTRAG-UN dev and 300 doc2dial dev; evals/results/calibration.json).
    support_threshold: float = 0.49
    # The largest evidence score (word overlap + MiniLM cosine + bonuses), the support threshold's upper bound.
    support_score_max: float = 3.0
    # Re-retrievals tried before abstaining on a question nothing covers.
    abstain_reground_attempts: int = 1
    # The most readings triage finds for an ambiguous reference (answerability.readings): a clarify count above
    # it could never be reached, so the context refuses one.
    max_readings: int = 4
    # Ask back when the ask-back model (tools/signals/ask_back.py, trained on MTRAG-UN dev's underspecified tasks)
    # finds the question too underspecified to answer; its threshold is calibrated with it (evals/train/ask_back.py).
    learned_ask_back: bool = True
    # The model reads at most this many unresolved references of a question (more say nothing more).
    ask_back_max_references: int = 3
    # Documents that must fit an ambiguous reference before the turn asks back, later in a dialogue and in its
    # opening question. Fewer at the opening asks back on more of MTRAG-UN dev's underspecified tasks but also on
    # more of doc2dial dev's answerable turns (evals/README.md, "Asking back").
    clarify_min_readings: int = 4
    clarify_min_readings_opening: int = 4
    # A document is a reading when its retrieval score is at least this share of the best: LLM-free, it asks back
    # on fewer doc2dial dev turns than a lower share, on the same underspecified MTRAG-UN dev tasks (evals/README.md,
    # "Asking back").
    reading_ratio: float = 0.8
    # Words of a document's text that name a reading when it has no title.
    reading_label_words: int = 8
    # A question of at least this many words with no anaphora stands alone (answerability.depends_on_dialogue).
    min_standalone_words: int = 6
    # Below this share of the question's content words in the passages the answer names the missing ones; 0: never.
    partial_coverage: float = 0.0
    # Missing words a partial answer names at most.
    partial_missing_named: int = 3
    # The judge's answerability: answer at or above the first, hedge between, abstain below the second; calibrated
    # out of fold on MTRAG-UN dev (at most 3% of answerable tasks abstain, at most 20% of unanswerable ones answered
    # confidently; evals/results/judge/summary.json).
    judge_answer_threshold: float = 0.7914
    judge_hedge_threshold: float = 0.2986
    # Documentation triage (signals/doc_triage.py): a page fits "about as well" as the best when its best unit's
    # score is within this many logits of the best one's (a reading the turn may ask back about).
    doc_reading_margin: float = 1.0
    # The documentation triage's readings offered when it asks back, at most.
    doc_readings_offered: int = 4


@dataclass(frozen=True)
class ExtractLength:
    """An extracted reply: at most `sentences`, each scoring at least `ratio` of the best, from the best sentence's
    passage only when `same_passage`."""

    sentences: int
    ratio: float
    same_passage: bool


@dataclass(frozen=True)
class EvidenceTuning:
    """How passage sentences rank as evidence and how an extracted reply is made of them (signals/evidence.py)."""

    # Weight of the question's MiniLM cosine beside its word overlap.
    dense_weight: float = 1.0
    # Weight of a follow-up's cosine with the question read in its dialogue: it lifts the LLM-free reply token F1 of
    # the doc2dial dev follow-ups that depend on the dialogue (evals/README.md, "Passages and replies without an LLM").
    dialogue_weight: float = 0.5
    # Continuity: the sentence after the previous reply's gains this much, fading over `continuity_window`
    # sentences; chosen on doc2dial dev's LLM-free reply token F1 (evals/README.md, "Passages and replies without an
    # LLM", which lists the weights and windows measured).
    continuity_weight: float = 0.2
    continuity_window: int = 8
    # A passage sentence restating a sentence of the previous reply at this token F1 or more is where it came from
    # (a verbatim extracted reply scores 1; doc2dial's human replies paraphrase their span).
    continuity_match: float = 0.5
    # Only a previous reply of at most this many sentences has a "next" (longer ones gather from several places).
    continuity_max_reply_sentences: int = 2
    # With the judge: evidence ranks by its score plus this x the judge's probability; on the doc2dial dialogues the
    # judge never saw this blend ranks answer sentences above the hand ranking (evals/results/judge/summary.json,
    # answer_sentence_mrr_graph_blend against answer_sentence_mrr_hand_ranking).
    judge_rank_weight: float = 1.0
    # With the judge: the reader's logit (adapters/cross_encoder.py) joins the judge's at this weight; 0 skips the
    # reader and its cost (evals/results/judge/cost.json). At 1 the held-out answer-sentence MRR rises over the judge
    # alone (evals/results/judge/summary.json, with_reader); weights 0.5-1 measured about equal on the validation
    # dialogues (docs/experiments.md, judge).
    reader_weight: float = 1.0
    # Which ranks answer units: the unit ranker (signals/units.py) "on", "off", or "auto" (when the candidates hold
    # a fenced code block: the documentation it was trained on).
    unit_ranking: str = "auto"
    # Units an extracted reply takes when the unit ranker ranked them (the best ones, from any passage): on techdocs
    # dev, leave-one-corpus-out, 3 beats 2 on each collection (evals/results/techdocs_dev/reground_loco/ against
    # reground_loco_two_units/), at about 25 more words a reply.
    unit_reply_units: int = 3
    # Sentences closest to the question shown to a written answer as evidence.
    answer_evidence: int = 2
    # Answers are cut to this many sentences (dialogue replies are short; the answer rules say 1-3).
    max_answer_sentences: int = 2
    # Extracted reply lengths (doc2dial dev for 'sentence', MTRAG-UN dev's ~75-word references for 'paragraph').
    # 'conversation' runs until the reply is as long as the conversation's assistant replies so far (their median
    # words), from the best passage's sentences scoring at least half the best, at most six; chosen on the doc2dial
    # validation dialogues (sha1 in [0.6, 0.8), replayed offline; six set a priori, the validation set cannot tell
    # four from six). 'conversation' is the default: evals/README.md, "Reply length".
    answer_lengths: Mapping[str, ExtractLength] = field(
        default_factory=lambda: MappingProxyType(
            {
                "conversation": ExtractLength(6, 0.5, True),
                "sentence": ExtractLength(2, 0.9, True),
                "paragraph": ExtractLength(3, 0.5, False),
            }
        )
    )
    # A line of at most this many words without closing punctuation is a heading, not a sentence that says something.
    max_heading_words: int = 12
    # The items of a list that an extracted sentence introduces ("... are available:") and that join it.
    list_items: int = 5
    # A code block in a reply longer than this many lines is cut to the lines that matter (text/code_blocks.py).
    max_code_lines: int = 16
    # An answer whose words are mostly the previous reply's (ROUGE-L precision at least this) repeats it.
    repeat_precision: float = 0.8
    # A fragment ('Plan the migration') of at most this many words is never a whole reply (a small gain in MTRAG-UN
    # dev ANSWERABLE token F1, run not kept).
    max_fragment_words: int = 5
    # A reply needs at least this many content words.
    min_reply_content_words: int = 2
    # Shorter pieces ("Yes.", "See below.") are not evidence sentences.
    min_sentence_words: int = 3


@dataclass(frozen=True)
class Groundedness:
    """When an answer counts as grounded (nodes/groundedness.py) and how often the turn re-grounds."""

    # Used until `reground eval calibrate` writes a measured threshold.
    threshold: float = 0.5
    # The signals and their weights (renormalised over the signals a turn has).
    weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {"llm_judge": 0.4, "k_precision": 0.25, "rouge_l_precision": 0.1, "embedding_support": 0.25}
        )
    )
    # Embedding support: a sentence whose best passage cosine is below `support_low` counts 0, above
    # `support_high` 1, linear between (MiniLM cosines of restated vs unrelated sentences).
    support_low: float = 0.35
    support_high: float = 0.75
    # The LLM judge runs only within this distance of the threshold, where it can change the verdict.
    llm_judge_band: float = 0.15
    # Re-retrievals after an ungrounded answer (ReGround's loop cap).
    max_reground_attempts: int = 2


@dataclass(frozen=True)
class Refinement:
    """The two refine nodes: the follow-up rewrite and ProMiSe's principle-wise refinement of a written answer."""

    # Rewrite a follow-up only when the history-aware document ranking's top document leads the second by less
    # than this share of its score (0: never, 1: always).
    rewrite_below_margin: float = 0.25
    # A rewrite may only use words of the conversation: one with fewer than this share of them is a copied few-shot
    # example or an invention (a 0.5B model does both).
    min_grounded_word_share: float = 0.6
    # A rewrite longer than this many characters is not a question.
    rewrite_max_chars: int = 400
    # ProMiSe: refinement iterations J, and the sufficiency thresholds of its proxy metrics (ROUGE-1 recall,
    # ROUGE-L, token F1 against the passage sentences closest to the question).
    max_refine_iterations: int = 1
    specificity_threshold: float = 0.02
    faithfulness_threshold: float = 0.05
    relevance_threshold: float = 0.2
    # A refined answer replaces the old one only if its weighted improvement exceeds this (ProMiSe's lambda).
    improvement_lambda: float = 1.5


@dataclass(frozen=True)
class Citations:
    """What a finished turn cites (nodes/finalize.py)."""

    # A quote longer than this is cut to the one best sentence.
    max_quote_chars: int = 600
    # A passage is cited when it holds at least `min_share` of the answer's content words and `of_best` of the best
    # passage's share (a passage on another topic shares only common words).
    min_share: float = 0.5
    of_best: float = 0.8
    # A passage holding an answer unit's sentence word for word is cited too, when that sentence has this many words.
    min_quoted_words: int = 4


BUDGETS: Final = BudgetTuning()
TRIAGE: Final = Triage()
EVIDENCE: Final = EvidenceTuning()
GROUNDEDNESS: Final = Groundedness()
REFINEMENT: Final = Refinement()
CITATIONS: Final = Citations()
