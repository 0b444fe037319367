"""The expert settings of a run, one group per stage (`context.triage`, `context.evidence`, ...): a tuned field is
generated from its one declaration in tools/tuning/ (`tuned`: default, description and bounds); a field declared
here is a switch, a model spec or a prompt, which no tuning declares.
A field marked `"user_settable": false` in the schema is one a user should not normally change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from reground.nodes.context_base import (
    PROMPT_PLACEHOLDERS,
    VERBATIM_PROMPTS,
    Group,
    check_prompt,
    group_named,
    in_order,
    tuned,
)
from reground.prompts import answer as answer_prompts
from reground.prompts import groundedness as groundedness_prompts
from reground.prompts import keywords as keyword_prompts
from reground.prompts import refine as refine_prompts
from reground.prompts import refine_question as refine_question_prompts
from reground.prompts import rerank as rerank_prompts
from reground.tools.tuning.models import CHAT
from reground.tools.tuning.turn import BUDGETS, CITATIONS, EVIDENCE, GROUNDEDNESS, REFINEMENT, TRIAGE, ExtractLength

# The values in force until `reground eval calibrate` measures the user's own.
DEFAULT_GROUNDEDNESS_THRESHOLD = GROUNDEDNESS.threshold
DEFAULT_GROUNDEDNESS_WEIGHTS: Mapping[str, float] = GROUNDEDNESS.weights
DEFAULT_SUPPORT_THRESHOLD = TRIAGE.support_threshold
# The most readings triage finds for an ambiguous reference (answerability.readings): a clarify count above it
# could never be reached, so the context refuses one instead of silently never asking back.
MAX_READINGS = TRIAGE.max_readings


Principle = Literal["specificity", "faithfulness", "relevance"]


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
    temperature: float = tuned(CHAT, "temperature")
    sample_temperature: float = tuned(CHAT, "sample_temperature")
    n_samples: int = tuned(CHAT, "n_samples")
    llm_timeout_s: float = tuned(CHAT, "timeout_s")
    max_answer_tokens: int = tuned(CHAT, "max_answer_tokens")
    rewrite_max_tokens: int = tuned(CHAT, "rewrite_max_tokens")
    keywords_max_tokens: int = tuned(CHAT, "keywords_max_tokens")
    judge_max_tokens: int = tuned(CHAT, "judge_max_tokens")
    answer_json_overhead_tokens: int = tuned(CHAT, "answer_json_overhead_tokens")
    rerank_tokens_per_passage: int = tuned(CHAT, "rerank_tokens_per_passage")
    rerank_reply_frame_tokens: int = tuned(CHAT, "rerank_reply_frame_tokens")
    rerank_max_score: float = tuned(CHAT, "rerank_max_score")
    max_keywords: int = tuned(CHAT, "max_keywords")
    keyword_max_chars: int = tuned(CHAT, "keyword_max_chars")


@group_named("budgets")
class Budgets(Group):
    """How much of the dialogue, the question and the store a turn reads and keeps."""

    history_token_budget: int = tuned(BUDGETS, "history_token_budget")
    history_token_cap: int = tuned(BUDGETS, "history_token_cap")
    question_token_budget: int = tuned(BUDGETS, "question_token_budget")
    doc_candidates: int = tuned(BUDGETS, "doc_candidates")
    use_paragraph_scoring: bool = Field(
        default=True,
        description="Score paragraphs by cos(q', p) + sum of cos(keyword, p) (ConvRAG fine-grained retrieval).",
    )
    paragraph_candidates: int = tuned(BUDGETS, "paragraph_candidates")
    min_cut_turn_tokens: int = tuned(BUDGETS, "min_cut_turn_tokens")
    rewrite_history_messages: int = tuned(BUDGETS, "rewrite_history_messages")
    keyword_history_messages: int = tuned(BUDGETS, "keyword_history_messages")
    keyword_recent_messages: int = tuned(BUDGETS, "keyword_recent_messages")
    forced_history_factor: int = tuned(BUDGETS, "forced_history_factor")


@group_named("triage")
class TriageSettings(Group):
    """Ask back, abstain, hedge or answer: the support and judge thresholds, asking back, partial answers."""

    support_threshold: float | None = tuned(TRIAGE, "support_threshold", optional=True)
    abstain_reground_attempts: int = tuned(TRIAGE, "abstain_reground_attempts")
    clarify_min_readings: int = tuned(TRIAGE, "clarify_min_readings")
    doc_readings_offered: int = tuned(TRIAGE, "doc_readings_offered")
    clarify_min_readings_opening: int = tuned(TRIAGE, "clarify_min_readings_opening")
    learned_ask_back: bool = tuned(TRIAGE, "learned_ask_back")
    reading_ratio: float = tuned(TRIAGE, "reading_ratio")
    partial_coverage: float = tuned(TRIAGE, "partial_coverage")
    partial_missing_named: int = tuned(TRIAGE, "partial_missing_named")
    judge_answer_threshold: float = tuned(TRIAGE, "judge_answer_threshold")
    judge_hedge_threshold: float = tuned(TRIAGE, "judge_hedge_threshold")

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

    dense_weight: float = tuned(EVIDENCE, "dense_weight")
    dialogue_weight: float = tuned(EVIDENCE, "dialogue_weight")
    continuity_weight: float = tuned(EVIDENCE, "continuity_weight")
    judge_rank_weight: float = tuned(EVIDENCE, "judge_rank_weight")
    reader_weight: float = tuned(EVIDENCE, "reader_weight")
    reader_top: int = tuned(EVIDENCE, "reader_top")
    unit_ranking: Literal["auto", "on", "off"] = tuned(EVIDENCE, "unit_ranking")
    unit_reply_units: int = tuned(EVIDENCE, "unit_reply_units")
    answer_evidence: int = tuned(EVIDENCE, "answer_evidence")
    max_answer_sentences: int = tuned(EVIDENCE, "max_answer_sentences")
    answer_lengths: dict[str, ExtractLength] = tuned(EVIDENCE, "answer_lengths")
    max_code_lines: int = tuned(EVIDENCE, "max_code_lines")
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

    @field_validator("answer_lengths", mode="after")
    @classmethod
    def _every_length_has_a_shape(cls, value: dict[str, ExtractLength]) -> dict[str, ExtractLength]:
        # Lengths left out keep their declared shape, so a user can change one.
        return {**EVIDENCE.answer_lengths, **value}


@group_named("groundedness")
class GroundednessSettings(Group):
    """When an answer counts as grounded, and how often the turn re-grounds it."""

    threshold: float | None = tuned(GROUNDEDNESS, "threshold", optional=True)
    weights: dict[str, float] = tuned(GROUNDEDNESS, "weights")
    use_llm_groundedness_judge: bool = Field(
        default=True, description="Include the LLM judge in the groundedness score."
    )
    support_low: float = tuned(GROUNDEDNESS, "support_low")
    support_high: float = tuned(GROUNDEDNESS, "support_high")
    llm_judge_band: float = tuned(GROUNDEDNESS, "llm_judge_band")
    max_reground_attempts: int = tuned(GROUNDEDNESS, "max_reground_attempts")
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

    rewrite_below_margin: float = tuned(REFINEMENT, "rewrite_below_margin")
    min_grounded_word_share: float = tuned(REFINEMENT, "min_grounded_word_share")
    rewrite_max_chars: int = tuned(REFINEMENT, "rewrite_max_chars")
    max_refine_iterations: int = tuned(REFINEMENT, "max_refine_iterations")
    specificity_threshold: float = tuned(REFINEMENT, "specificity_threshold")
    faithfulness_threshold: float = tuned(REFINEMENT, "faithfulness_threshold")
    relevance_threshold: float = tuned(REFINEMENT, "relevance_threshold")
    relevance_refinement: Literal["extractive", "llm"] = Field(
        default="extractive",
        description=(
            "How an answer under the relevance threshold is refined: 'extractive' (the closest passage "
            "sentence, in the documents' own words; no LLM call) or 'llm' (ProMiSe's relevance prompt)."
        ),
    )
    principle_weights: dict[Principle, float] = tuned(REFINEMENT, "principle_weights")
    improvement_lambda: float = tuned(REFINEMENT, "improvement_lambda")
    quote_when_unchecked: bool = Field(
        default=True,
        description=(
            "With answer_style 'write': a written reply that still fails the groundedness or relevance check when "
            "the loops are spent, or says the passages do not cover a question triage found them answering, is "
            "replaced by the extracted reply (the passages' own sentences) instead of an abstention."
        ),
    )


@group_named("citations")
class CitationSettings(Group):
    """What a finished turn cites, and how long a citation's quote is."""

    max_quote_chars: int = tuned(CITATIONS, "max_quote_chars")
    min_share: float = tuned(CITATIONS, "min_share")
    of_best: float = tuned(CITATIONS, "of_best")
    min_quoted_words: int = tuned(CITATIONS, "min_quoted_words")


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
