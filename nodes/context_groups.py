"""The expert settings of a run, one group per stage (`context.triage`, `context.evidence`, ...): each field's
default is its measured value in tools/tuning/, its description what Studio's form shows, its bounds the type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator
from reground.nodes.context_base import (
    PROMPT_PLACEHOLDERS,
    VERBATIM_PROMPTS,
    Group,
    check_prompt,
    group_named,
    in_order,
)
from reground.prompts import answer as answer_prompts
from reground.prompts import groundedness as groundedness_prompts
from reground.prompts import keywords as keyword_prompts
from reground.prompts import refine as refine_prompts
from reground.prompts import refine_question as refine_question_prompts
from reground.prompts import rerank as rerank_prompts
from reground.tools.tuning.models import CHAT
from reground.tools.tuning.turn import BUDGETS, EVIDENCE, GROUNDEDNESS, REFINEMENT, TRIAGE

# The values in force until `reground eval calibrate` measures the user's own (tools/tuning/turn.py says how these
# were measured).
DEFAULT_GROUNDEDNESS_THRESHOLD = GROUNDEDNESS.threshold
DEFAULT_GROUNDEDNESS_WEIGHTS: Mapping[str, float] = GROUNDEDNESS.weights
DEFAULT_SUPPORT_THRESHOLD = TRIAGE.support_threshold
# The most readings triage finds for an ambiguous reference (answerability.readings): a clarify count above it
# could never be reached, so the context refuses one instead of silently never asking back.
MAX_READINGS = TRIAGE.max_readings


Principle = Literal["specificity", "faithfulness", "relevance"]

# Value domains several fields share: the bounds live in the type, and Studio's form shows them as min/max.
Share = Annotated[float, Field(ge=0.0, le=1.0)]  # a score, a margin or a share on a 0-1 scale
Cosine = Annotated[float, Field(ge=-1.0, le=1.0)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Count = Annotated[int, Field(ge=0)]  # 0 = none (no history, no retry, no evidence)
AtLeastOne = Annotated[int, Field(ge=1)]
ReplyTokens = Annotated[int, Field(ge=8)]  # the token cap of a short reply: a rewrite, keywords, a verdict


@group_named("models")
class ModelSettings(Group):
    """The models of each role, the cross-encoder endpoint, sampling, timeouts and token caps."""

    refiner_model: str = Field(
        default="", description="Model spec for question refinement and keywords; empty = chat_model."
    )
    answer_model: str = Field(
        default="", description="Model spec for the self-check and the answer; empty = chat_model."
    )
    judge_model: str = Field(
        default="", description="Model spec for rerank and groundedness judging; empty = chat_model."
    )
    rerank_url: str = Field(default="", description="URL of a /rerank endpoint (Cohere/TEI/Jina style).")
    temperature: Temperature = Field(
        default=CHAT.temperature, description="Sampling temperature of the first answer sample."
    )
    sample_temperature: Temperature = Field(
        default=CHAT.sample_temperature,
        description="Sampling temperature of the answer samples after the first (ProMiSe best-of-N).",
    )
    n_samples: AtLeastOne = Field(default=CHAT.n_samples, description="Initial answer samples N (ProMiSe best-of-N).")
    llm_timeout_s: float = Field(default=CHAT.timeout_s, gt=0.0, description="Timeout of one LLM call, seconds.")
    max_answer_tokens: AtLeastOne = Field(default=CHAT.max_answer_tokens, description="Token cap of one answer.")
    rewrite_max_tokens: ReplyTokens = Field(
        default=CHAT.rewrite_max_tokens, description="Token cap of a rewritten question (refine_question, re_ground)."
    )
    keywords_max_tokens: ReplyTokens = Field(
        default=CHAT.keywords_max_tokens, description="Token cap of the LLM keyword reply."
    )
    judge_max_tokens: ReplyTokens = Field(
        default=CHAT.judge_max_tokens, description="Token cap of the groundedness judge's reply."
    )


@group_named("budgets")
class Budgets(Group):
    """How much of the dialogue, the question and the store a turn reads and keeps."""

    history_token_budget: Count = Field(
        default=BUDGETS.history_token_budget,
        description="Dialogue history (tokens) added to the retrieval query (DH_tokens).",
    )
    history_token_cap: AtLeastOne = Field(
        default=BUDGETS.history_token_cap,
        description="What any prompt of a turn carries of the dialogue at most (tokens); older turns are cut.",
    )
    question_token_budget: AtLeastOne = Field(
        default=BUDGETS.question_token_budget,
        description="Longer questions are cut to this many tokens (noted in the trace).",
    )
    doc_candidates: AtLeastOne = Field(
        default=BUDGETS.doc_candidates, description="Documents kept by document-level hybrid search."
    )
    use_paragraph_scoring: bool = Field(
        default=True,
        description="Score paragraphs by cos(q', p) + sum of cos(keyword, p) (ConvRAG fine-grained retrieval).",
    )
    paragraph_candidates: AtLeastOne = Field(
        default=BUDGETS.paragraph_candidates, description="Paragraphs kept by paragraph-level scoring, before rerank."
    )


@group_named("triage")
class TriageSettings(Group):
    """Ask back, abstain, hedge or answer: the support and judge thresholds, asking back, partial answers."""

    support_threshold: Annotated[float, Field(ge=0.0, le=3.0)] | None = Field(
        default=None,
        description=(
            "Abstain when the best passage sentence matches the question less than this (its evidence score: word "
            "overlap + MiniLM cosine); after at most `abstain_reground_attempts` re-retrievals the turn says the "
            "documents do not cover it; 0 = never abstain early. Empty: the value `reground eval calibrate` wrote "
            "to <data_dir>/calibration.json (its entry for this collection when calibrated with --for-collection), "
            f"else {DEFAULT_SUPPORT_THRESHOLD} (calibrated on MTRAG-UN and doc2dial dev, evals/README.md)."
        ),
    )
    abstain_reground_attempts: Count = Field(
        default=TRIAGE.abstain_reground_attempts,
        description="Re-retrievals tried before abstaining on a question nothing covers (each with another query).",
    )
    clarify_min_readings: int = Field(
        default=TRIAGE.clarify_min_readings,
        ge=2,
        json_schema_extra={"maximum": MAX_READINGS},
        description=(
            f"Documents (distinct titles) that must fit an ambiguous reference before the turn asks back "
            f"(2 to {MAX_READINGS}: triage finds at most {MAX_READINGS} readings)."
        ),
    )
    doc_readings_offered: int = Field(
        default=TRIAGE.doc_readings_offered,
        ge=2,
        description=(
            "On documentation with code, the pages a clarifying question names at most (those whose best answer "
            "unit fits about as well as the best one's, closest first)."
        ),
    )
    clarify_min_readings_opening: int = Field(
        default=TRIAGE.clarify_min_readings_opening,
        ge=2,
        json_schema_extra={"maximum": MAX_READINGS},
        description=(
            "The same count for a question that opens the conversation (at most one exchange before it), where "
            "nothing said yet can have named what 'the actor' is. 2 suits collections of many similar entities "
            "(on MTRAG-UN dev it asks back on more underspecified tasks, no new false one) but asks back more on "
            "single-topic pages (doc2dial dev's answerable turns); evals/README.md, 'Asking back'."
        ),
    )
    learned_ask_back: bool = Field(
        default=TRIAGE.learned_ask_back,
        description=(
            "With the judge: also ask back when the ask-back model trained on MTRAG-UN dev's underspecified tasks "
            "finds the question too underspecified (its out-of-fold rates: evals/results/judge/ask_back.json), "
            "naming the documents the judge reads as answering it (two at least). "
            "Off: the readings rules alone."
        ),
    )
    reading_ratio: float = Field(
        default=TRIAGE.reading_ratio,
        gt=0.0,
        le=1.0,
        description=(
            "A document counts as a reading when its retrieval score is at least this share of the best one. "
            "A higher share asks back on fewer doc2dial dev turns, on the same underspecified MTRAG-UN dev tasks "
            "(evals/README.md, 'Asking back')."
        ),
    )
    partial_coverage: Share = Field(
        default=TRIAGE.partial_coverage,
        description=(
            "When the passages hold less than this share of the question's content words, the answer says which "
            "ones the documents do not mention (a partial answer); 0 = never."
        ),
    )
    judge_answer_threshold: Share = Field(
        default=TRIAGE.judge_answer_threshold,
        description=(
            "With the judge: answer confidently when its answerability is at least this; between the hedge "
            "threshold and this, the reply says the documents do not say it exactly and quotes the closest passage."
        ),
    )
    judge_hedge_threshold: Share = Field(
        default=TRIAGE.judge_hedge_threshold,
        description=(
            "With the judge: abstain (after the re-retrieval) when its answerability is below this. Both thresholds "
            "are calibrated out of fold on MTRAG-UN dev: at most 3% of answerable tasks abstain, at most 20% of "
            "unanswerable ones are answered confidently (evals/results/judge/summary.json)."
        ),
    )

    @field_validator("clarify_min_readings", "clarify_min_readings_opening", mode="after")
    @classmethod
    def _reachable_reading_count(cls, value: int) -> int:
        if value > MAX_READINGS:
            raise ValueError(
                f"at most {MAX_READINGS}, got {value}: triage finds at most {MAX_READINGS} readings of a reference, "
                "so a larger count would never ask back (use_clarify=False turns asking back off)"
            )
        return value

    @model_validator(mode="after")
    def _thresholds_in_order(self) -> Self:
        in_order(self, "triage", "judge_hedge_threshold", "judge_answer_threshold", strict=False)
        return self


@group_named("evidence")
class EvidenceSettings(Group):
    """How passage sentences rank as evidence, what the answer is shown and cut to, and which passages help."""

    dense_weight: float = Field(
        default=EVIDENCE.dense_weight,
        description=(
            "Weight of the question's MiniLM cosine beside its word overlap when passage sentences are ranked as "
            "evidence (the answer's hint, the relevance anchor and the extractive refinement)."
        ),
    )
    dialogue_weight: float = Field(
        default=EVIDENCE.dialogue_weight,
        ge=0.0,
        description=(
            "Weight of a follow-up's MiniLM cosine with the question read in its dialogue, beside its own, when "
            "passage sentences are ranked as evidence (only for a follow-up that depends on the dialogue). On "
            "doc2dial dev it lifts the graph's LLM-free reply token F1 on those follow-ups (evals/README.md)."
        ),
    )
    continuity_weight: float = Field(
        default=EVIDENCE.continuity_weight,
        ge=0.0,
        description=(
            "Weight of continuity when a follow-up's passage sentences are ranked as evidence: a sentence right "
            "after the one the previous reply came from (same document and section) gains this much, fading over "
            f"the next {EVIDENCE.continuity_window} sentences (only after a reply of at most "
            f"{EVIDENCE.continuity_max_reply_sentences} sentences). On doc2dial dev it lifts the graph's LLM-free "
            "reply token F1 (evals/README.md lists the weights and windows measured)."
        ),
    )
    judge_rank_weight: float = Field(
        default=EVIDENCE.judge_rank_weight,
        ge=0.0,
        description=(
            "With the judge: evidence sentences rank by their hand-made score plus this x the judge's probability "
            "that they answer: on the doc2dial dialogues the judge never saw it ranks answer sentences above the "
            "hand-made score alone (evals/results/judge/summary.json)."
        ),
    )
    reader_weight: float = Field(
        default=EVIDENCE.reader_weight,
        ge=0.0,
        description=(
            "With the judge: weight of the reader (a MiniLM cross-encoder trained here that reads the question and "
            "each sentence together) beside the judge's score; 0 turns it off and saves its cost "
            "(evals/results/judge/cost.json), at some held-out answer-sentence MRR (evals/results/judge/summary.json)."
        ),
    )
    unit_ranking: Literal["auto", "on", "off"] = Field(
        default=EVIDENCE.unit_ranking,
        description=(
            "Which ranks a turn's answer units and reranks its passages: the unit ranker trained on documentation "
            "with code (tools/signals/units.py) or the judge and the hand-made score. 'auto': the unit ranker when "
            "the candidates hold a fenced code block; 'on': always; 'off': never."
        ),
    )
    answer_evidence: Count = Field(
        default=EVIDENCE.answer_evidence,
        description=(
            "Passage sentences closest to the question (LLM-free) shown to the answer call as evidence; 0 = none."
        ),
    )
    max_answer_sentences: AtLeastOne = Field(
        default=EVIDENCE.max_answer_sentences,
        description="Answers are cut to this many sentences (dialogue replies are short; the rules say 1-3).",
    )
    max_code_lines: AtLeastOne = Field(
        default=EVIDENCE.max_code_lines,
        description=(
            "A code block in an extracted reply longer than this many lines is cut to the lines that carry what the "
            "question and the reply's sentence name, each cut marked with a '...' line."
        ),
    )
    use_self_check: bool = Field(
        default=False,
        description=(
            "Ask the model which passages help (ConvRAG self-check, a field of one JSON-schema answer reply); "
            "off: the passages holding the evidence sentences count as helpful and the answer is plain text."
        ),
    )
    injection_model_check: bool = Field(
        default=False,
        description="Also ask the judge model about retrieved sentences the injection rules call borderline "
        "(one call each; off: the 0.5B default flags most of them, evals/results/injection/model_check.json).",
    )


@group_named("groundedness")
class GroundednessSettings(Group):
    """When an answer counts as grounded, and how often the turn re-grounds it."""

    threshold: Share | None = Field(
        default=None,
        description=(
            "Answers scoring below this are re-grounded. Empty: the value `reground eval calibrate` wrote to "
            f"<data_dir>/calibration.json, else {DEFAULT_GROUNDEDNESS_THRESHOLD}."
        ),
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_GROUNDEDNESS_WEIGHTS),
        description="Weights of the groundedness signals (renormalised over those available).",
    )
    use_llm_groundedness_judge: bool = Field(
        default=True, description="Include the LLM judge in the groundedness score."
    )
    support_low: Cosine = Field(
        default=GROUNDEDNESS.support_low,
        description="Embedding support: an answer sentence whose best passage cosine is below this counts 0.",
    )
    support_high: Cosine = Field(
        default=GROUNDEDNESS.support_high,
        description="Embedding support: a best passage cosine above this counts 1 (restated); linear between.",
    )
    llm_judge_band: Share = Field(
        default=GROUNDEDNESS.llm_judge_band,
        description=(
            "The LLM judge runs only when the cheap signals' score is within this distance of the threshold "
            "(where it can change the verdict); 1 = on every answer."
        ),
    )
    max_reground_attempts: Count = Field(
        default=GROUNDEDNESS.max_reground_attempts,
        description="Re-retrievals after an ungrounded answer (ReGround loop cap).",
    )
    check_sensitive_requests: bool = Field(
        default=True,
        description=(
            "A reply asking the user to send a secret, hand over personal data, pay to an account or use a contact "
            "off the collection's trusted domains carries a warning and lists it in the result's `cautions`."
        ),
    )
    trusted_domains: list[str] = Field(
        default_factory=list,
        description=(
            "Domains trusted besides the collection's own (learned at ingest; edit them with `reground "
            "collections NAME --trust DOMAIN`)."
        ),
    )
    surface_conflicts: bool = Field(
        default=True,
        description=(
            "When the passages hold two statements of the reply's fact that disagree (a figure, a date, yes or no), "
            "the reply says both with their sources and lists them in the result's `conflicts`."
        ),
    )

    @model_validator(mode="after")
    def _support_band(self) -> Self:
        in_order(self, "groundedness", "support_low", "support_high", strict=True)
        return self


@group_named("refinement")
class RefinementSettings(Group):
    """The two refine nodes: when a follow-up is rewritten, and ProMiSe's refinement of a written answer."""

    rewrite_below_margin: Share = Field(
        default=REFINEMENT.rewrite_below_margin,
        description=(
            "Rewrite a follow-up (one LLM call) only when the history-aware document ranking's top document "
            "leads the second by less than this share of its score; 0 = never rewrite, 1 = always."
        ),
    )
    max_refine_iterations: Count = Field(
        default=REFINEMENT.max_refine_iterations,
        description="Principle-wise refinement iterations J (ProMiSe loop cap).",
    )
    specificity_threshold: float = Field(
        default=REFINEMENT.specificity_threshold,
        description="Sufficiency: ROUGE-1 recall of the answer vs the passages.",
    )
    faithfulness_threshold: float = Field(
        default=REFINEMENT.faithfulness_threshold, description="Sufficiency: ROUGE-L of the answer vs the passages."
    )
    relevance_threshold: float = Field(
        default=REFINEMENT.relevance_threshold,
        description=(
            "Sufficiency of relevance: token F1 of the answer against the passage sentences closest to the "
            "question (0 when it repeats the previous reply). Below it the answer is refined on relevance."
        ),
    )
    relevance_refinement: Literal["extractive", "llm"] = Field(
        default="extractive",
        description=(
            "How an answer under the relevance threshold is refined: 'extractive' (the closest passage "
            "sentence, in the documents' own words; no LLM call) or 'llm' (ProMiSe's relevance prompt)."
        ),
    )
    principle_weights: dict[Principle, float] = Field(
        default_factory=lambda: dict.fromkeys(get_args(Principle), 1.0),
        description="Weights w of the proxy metrics in the improvement test.",
    )
    improvement_lambda: float = Field(
        default=REFINEMENT.improvement_lambda,
        description="A refined answer replaces the old one only if its weighted improvement exceeds this.",
    )
    quote_when_unchecked: bool = Field(
        default=True,
        description=(
            "With answer_style 'write': a written reply that still fails the groundedness or relevance check when "
            "the loops are spent, or says the passages do not cover a question triage found them answering, is "
            "replaced by the extracted reply (the passages' own sentences) instead of an abstention."
        ),
    )


@group_named("prompts")
class PromptSettings(Group):
    """The prompts (defaults in prompts/), checked for their placeholders when the context is built."""

    refine_question_prompt: str = Field(
        default=refine_question_prompts.SYSTEM,
        description="Prompt: rewrite a follow-up as a standalone question.",
    )
    keywords_prompt: str = Field(default=keyword_prompts.SYSTEM, description="Prompt: extract keywords.")
    rerank_prompt: str = Field(default=rerank_prompts.TASK, description="Prompt: listwise LLM rerank.")
    answer_prompt: str = Field(default=answer_prompts.TASK, description="Prompt: the answer rules.")
    groundedness_prompt: str = Field(default=groundedness_prompts.TASK, description="Prompt: list unsupported claims.")
    reground_prompt: str = Field(
        default=refine_question_prompts.REGROUND_TASK,
        description="Prompt: rewrite the query after an ungrounded answer (ReGround feedback).",
    )
    refine_prompts: dict[Principle, str] = Field(
        default_factory=lambda: dict(refine_prompts.PRINCIPLE_TASKS),
        description="Prompts: one per principle for ProMiSe refinement (specificity, faithfulness, relevance).",
    )

    @field_validator(*PROMPT_PLACEHOLDERS, *VERBATIM_PROMPTS, mode="before")
    @classmethod
    def _prompt_placeholders(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            check_prompt(str(info.field_name), value)
        elif isinstance(value, Mapping):  # refine_prompts: one per principle
            for principle, text in value.items():
                if isinstance(text, str):
                    try:
                        check_prompt(str(info.field_name), text)
                    except ValueError as exc:
                        raise ValueError(f"the {principle!r} prompt {exc}") from None
        return value

    @field_validator("refine_prompts", mode="after")
    @classmethod
    def _every_principle_has_a_prompt(cls, value: dict[Principle, str]) -> dict[Principle, str]:
        # Principles left out keep their default prompt, so a user can override one.
        return {**refine_prompts.PRINCIPLE_TASKS, **value}
