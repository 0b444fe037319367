"""Runtime context: every setting of a turn, editable in LangGraph Studio's configuration form.

A pydantic model, so LangGraph renders its JSON schema (descriptions, ranges, choices) as Studio's form and
validates what a client sends. Each field not given explicitly falls back to an environment variable of the
same name in upper case with a `REGROUND_` prefix (e.g. `REGROUND_CHAT_MODEL`); a value given explicitly always
wins, even when it equals the default. To change a few fields of a context, use `context.with_(top_n=5)`: it
validates, and keeps the other values as they are.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from reground.prompts import answer as answer_prompts
from reground.prompts import groundedness as groundedness_prompts
from reground.prompts import keywords as keyword_prompts
from reground.prompts import refine as refine_prompts
from reground.prompts import refine_question as refine_question_prompts
from reground.prompts import rerank as rerank_prompts
from reground.tools.errors import InputError
from reground.tools.retrieval.search import RetrievalSettings
from reground.tools.services import Role
from reground.tools.signals.reading import EvidenceWeights
from reground.tools.stores.search_index import IndexSettings

DEFAULT_GROUNDEDNESS_THRESHOLD = 0.5  # used until `reground eval calibrate` writes a measured one
# The groundedness signals and their weights (renormalised over the signals a turn has).
DEFAULT_GROUNDEDNESS_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"llm_judge": 0.4, "k_precision": 0.25, "rouge_l_precision": 0.1, "embedding_support": 0.25}
)
# The support under which a turn abstains, until `reground eval calibrate` measures one on the user's own cases:
# the 3rd percentile of the support of 439 answerable dev cases (MTRAG-UN dev and 300 doc2dial dev cases;
# evals/results/calibration.json, evals/README.md "Ask, abstain or answer").
DEFAULT_SUPPORT_THRESHOLD = 0.49
# The most readings triage finds for an ambiguous reference (tools/answerability.readings(), its `limit`): a
# clarify count above it could never be reached, so the context refuses one instead of silently never asking back.
MAX_READINGS = 4
ENV_PREFIX = "REGROUND_"


Principle = Literal["specificity", "faithfulness", "relevance"]
# How a reply is made, and how long an extracted one is (nodes/answer.py).
AnswerStyle = Literal["extract", "write"]
AnswerLength = Literal["sentence", "paragraph"]

# Value domains several fields share: the bounds live in the type, and Studio's form shows them as min/max.
Share = Annotated[float, Field(ge=0.0, le=1.0)]  # a score, a margin or a share on a 0-1 scale
Cosine = Annotated[float, Field(ge=-1.0, le=1.0)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Count = Annotated[int, Field(ge=0)]  # 0 = none (no history, no retry, no evidence)
AtLeastOne = Annotated[int, Field(ge=1)]
ReplyTokens = Annotated[int, Field(ge=8)]  # the token cap of a short reply: a rewrite, keywords, a verdict

# Placeholders of the prompts the nodes fill with str.format: (required, allowed). A prompt missing a required
# one, or naming one the node does not fill, is refused when the context is built, not mid-turn.
PROMPT_PLACEHOLDERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "rerank_prompt": (frozenset({"question"}), frozenset({"question"})),
    "answer_prompt": (frozenset({"question"}), frozenset({"question", "evidence", "escalation"})),
    "groundedness_prompt": (frozenset({"answer"}), frozenset({"answer"})),
    "reground_prompt": (frozenset({"question"}), frozenset({"history", "question", "previous_query"})),
    "refine_prompts": (frozenset({"answer"}), frozenset({"answer", "question"})),
}
# System prompts sent as written (never formatted): a {name} in them would reach the model unfilled.
VERBATIM_PROMPTS = ("refine_question_prompt", "keywords_prompt")


class ContextError(InputError):
    """A context value is invalid; the message names the field and the accepted values."""


class EnvSettings(BaseModel):
    """Settings with REGROUND_<FIELD> fallbacks for the fields not given, and one-line ContextErrors.

    Explicit values are never replaced (the fallback looks at which fields were passed, not at their values).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _environment_fallbacks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        filled = dict(data)
        for name, info in cls.model_fields.items():
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if name not in data and raw is not None:
                filled[name] = _env_value(name, raw, info.annotation)
        return filled

    if not TYPE_CHECKING:  # mypy keeps pydantic's typed keyword signature

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ContextError(_one_line(exc, data)) from None

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied and validated; every other value is kept (environment not re-read)."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**current, **changes})


def _env_value(name: str, raw: str, annotation: Any) -> Any:
    """The environment's text for a field: JSON for objects, else the text (pydantic converts it)."""
    structured = get_origin(annotation) in (dict, Mapping) or (
        isinstance(annotation, type) and not issubclass(annotation, str | int | float | bool)
    )
    if not structured:
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ContextError(f"environment variable {ENV_PREFIX}{name.upper()}={raw!r}: not JSON ({exc})") from exc


def _one_line(exc: ValidationError, given: Mapping[str, Any]) -> str:
    """'context field 'top_n': Input should be greater than or equal to 1, got 0' (and where a value came from)."""
    parts = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        field_name = str(error["loc"][0]) if error["loc"] else ""
        source = ""
        if field_name and field_name not in given and ENV_PREFIX + field_name.upper() in os.environ:
            source = f" (from the environment variable {ENV_PREFIX}{field_name.upper()})"
        if loc:
            got = f", got {error['input']!r}" if error["type"] != "value_error" else ""
            parts.append(f"context field {loc!r}{source}: {message}{got}")
        else:
            parts.append(message)
    return "; ".join(parts)


def _placeholders(name: str, text: str) -> set[str]:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise ValueError(f"{exc}; write {{{{ and }}}} for literal braces") from None
    roots = {f.split(".")[0].split("[")[0] for f in fields}
    if "" in roots or any(r.isdigit() for r in roots):
        raise ValueError("positional placeholders ({} or {0}) are not filled; name them")
    return roots


def check_prompt(name: str, text: str) -> None:
    """Raise ValueError if a prompt misses a required placeholder or names one its node does not fill."""
    if name in VERBATIM_PROMPTS:
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        except ValueError:
            return  # unbalanced braces are fine in text sent as written
        names = sorted(f for f in fields if f.isidentifier())
        if names:
            raise ValueError(f"is sent as written, so {{{names[0]}}} would reach the model unfilled; remove it")
        return
    required, allowed = PROMPT_PLACEHOLDERS[name]
    found = _placeholders(name, text)
    if missing := sorted(required - found):
        raise ValueError(f"misses the placeholder {{{missing[0]}}} (required: {', '.join(sorted(required))})")
    if unknown := sorted(found - allowed):
        raise ValueError(f"names the unknown placeholder {{{unknown[0]}}} (known: {', '.join(sorted(allowed))})")


def check_collection(collection: str) -> None:
    """The store's naming rule (a ValueError naming the problem), checked before any run starts."""
    from reground.tools.stores.store import collection_name_problem

    problem = collection_name_problem(str(collection))
    if problem:
        raise ValueError(problem)


def _checked_collection(collection: str) -> str:
    check_collection(collection)
    return collection


# A collection name the store accepts, checked when a context is built (a bad one fails before any run starts).
CollectionName = Annotated[str, AfterValidator(_checked_collection)]


class Context(EnvSettings):
    """Settings of one reground run. Defaults are the measured, recommended values."""

    # --- models -------------------------------------------------------------------------
    chat_model: str = Field(
        default="local:default",
        description=(
            "Chat model spec for every role without its own: 'local:<name>' (the llama.cpp server "
            "started by `reground llm serve`), 'openai:<model>' (OPENAI_API_KEY, OPENAI_BASE_URL), "
            "or 'openai-compatible:<model>@<base_url>'."
        ),
    )
    refiner_model: str = Field(
        default="", description="Model spec for question refinement and keywords; empty = chat_model."
    )
    answer_model: str = Field(
        default="", description="Model spec for the self-check and the answer; empty = chat_model."
    )
    judge_model: str = Field(
        default="", description="Model spec for rerank and groundedness judging; empty = chat_model."
    )
    embedding_model: str = Field(
        default="local:all-MiniLM-L6-v2",
        description="Embedding spec: 'local:all-MiniLM-L6-v2' (ONNX, offline) or 'openai:<model>'.",
    )
    temperature: Temperature = Field(default=0.0, description="Sampling temperature of the first answer sample.")
    sample_temperature: Temperature = Field(
        default=0.7,
        description="Sampling temperature of the answer samples after the first (ProMiSe best-of-N).",
    )
    llm_timeout_s: float = Field(default=120.0, gt=0.0, description="Timeout of one LLM call, seconds.")
    max_answer_tokens: AtLeastOne = Field(default=120, description="Token cap of one answer.")
    rewrite_max_tokens: ReplyTokens = Field(
        default=60, description="Token cap of a rewritten question (refine_question, re_ground)."
    )
    keywords_max_tokens: ReplyTokens = Field(default=60, description="Token cap of the LLM keyword reply.")
    judge_max_tokens: ReplyTokens = Field(default=120, description="Token cap of the groundedness judge's reply.")

    # --- the document store -------------------------------------------------------------
    collection: CollectionName = Field(default="demo-hr", description="Chroma collection to answer from.")
    data_dir: str = Field(
        default="",
        description="Directory of the persistent store; empty = $REGROUND_DATA_DIR or ~/.local/share/reground.",
    )
    chroma_url: str = Field(
        default="", description="URL of a Chroma server (chroma run); empty = the embedded store in data_dir."
    )
    store: str = Field(
        default="",
        description=(
            "Vector store spec: 'chroma:<dir>', 'chroma-http://host:port' or a registered scheme "
            "(tools/stores/vector_store.py); empty = from data_dir and chroma_url."
        ),
    )
    metadata_filter: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "The user's scope, applied to every retrieval stage: {field: value} or {field: [values]}, "
            'e.g. {"country": "DE", "employment_type": "full-time"}. A document whose field is '
            "'all' matches any value."
        ),
    )

    # --- refinement and retrieval -------------------------------------------------------
    use_question_refiner: bool = Field(
        default=True, description="Rewrite follow-ups into standalone questions (ConvRAG refiner)."
    )
    rewrite_below_margin: Share = Field(
        default=0.25,
        description=(
            "Rewrite a follow-up (one LLM call) only when the history-aware document ranking's top document "
            "leads the second by less than this share of its score; 0 = never rewrite, 1 = always."
        ),
    )
    keyword_method: Literal["llm", "lexical", "off"] = Field(
        default="lexical",
        description="Keywords: 'llm' (structured output), 'lexical' (no LLM call) or 'off'.",
    )
    history_token_budget: Count = Field(
        default=100, description="Dialogue history (tokens) added to the retrieval query (DH_tokens)."
    )
    history_token_cap: AtLeastOne = Field(
        default=3000,
        description="What any prompt of a turn carries of the dialogue at most (tokens); older turns are cut.",
    )
    question_token_budget: AtLeastOne = Field(
        default=512, description="Longer questions are cut to this many tokens (noted in the trace)."
    )
    doc_candidates: AtLeastOne = Field(default=8, description="Documents kept by document-level hybrid search.")
    use_paragraph_scoring: bool = Field(
        default=True,
        description="Score paragraphs by cos(q', p) + sum of cos(keyword, p) (ConvRAG fine-grained retrieval).",
    )
    paragraph_candidates: AtLeastOne = Field(
        default=8, description="Paragraphs kept by paragraph-level scoring, before rerank."
    )
    injection_model_check: bool = Field(
        default=False,
        description="Also ask the judge model about retrieved sentences the injection rules call borderline "
        "(one call each; off: the 0.5B default flags most of them, evals/results/injection/model_check.json).",
    )
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings,
        description="Retrieval weights and fusion (tools/retrieval/search.py RetrievalSettings, tuned on doc2dial).",
    )
    index: IndexSettings = Field(
        default_factory=IndexSettings,
        description=(
            "How dense search runs (search_index.IndexSettings): 'exact' in memory, Chroma's 'hnsw', or "
            "'auto' (HNSW from 50,000 chunks, where exact scoring stops paying: evals/results/bench.json, scale)."
        ),
    )
    top_n: AtLeastOne = Field(default=3, description="Paragraphs kept after rerank (ConvRAG n = 3).")
    rerank_method: Literal["sentence", "fusion", "llm", "http", "off"] = Field(
        default="sentence",
        description=(
            "'sentence' (retrieval score plus the paragraph's best sentence cosine with the question, no LLM; "
            "the best measured on doc2dial dev), 'fusion' (rank fusion of the retrieval scores, no LLM), 'llm' "
            "(listwise 1-10 relevance), 'http' (a cross-encoder rerank endpoint at rerank_url), 'off' (retrieval "
            "order)."
        ),
    )
    rerank_url: str = Field(default="", description="URL of a /rerank endpoint (Cohere/TEI/Jina style).")

    # --- ask, abstain or answer ------------------------------------------------------------
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
        default=1,
        description="Re-retrievals tried before abstaining on a question nothing covers (each with another query).",
    )
    use_clarify: bool = Field(
        default=True,
        description=(
            "Ask which one the user means when the question refers to something the dialogue never named and "
            "retrieval finds several documents that fit it about equally (the readings are named in the question)."
        ),
    )
    clarify_min_readings: int = Field(
        default=4,
        ge=2,
        json_schema_extra={"maximum": MAX_READINGS},
        description=(
            f"Documents (distinct titles) that must fit an ambiguous reference before the turn asks back "
            f"(2 to {MAX_READINGS}: triage finds at most {MAX_READINGS} readings)."
        ),
    )
    clarify_min_readings_opening: int = Field(
        default=4,
        ge=2,
        json_schema_extra={"maximum": MAX_READINGS},
        description=(
            "The same count for a question that opens the conversation (at most one exchange before it), where "
            "nothing said yet can have named what 'the actor' is. 2 suits collections of many similar entities "
            "(MTRAG-UN dev: asks back on 67% of underspecified tasks instead of 44%, no new false one) but asks "
            "back more on single-topic pages (doc2dial dev: 151 of 2,456 answerable turns instead of 107); "
            "evals/README.md."
        ),
    )
    reading_ratio: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description=(
            "A document counts as a reading when its retrieval score is at least this share of the best one. "
            "LLM-free, 0.8 asks back on 85 of 2,945 doc2dial dev turns instead of 116 at 0.7 and on the same 11 "
            "underspecified MTRAG-UN dev tasks; with the 0.5B model's rewrites on 10 of those 27 instead of 12 "
            "(evals/README.md)."
        ),
    )
    partial_coverage: Share = Field(
        default=0.0,
        description=(
            "When the passages hold less than this share of the question's content words, the answer says which "
            "ones the documents do not mention (a partial answer); 0 = never."
        ),
    )
    use_trained_judge: bool = Field(
        default=True,
        description=(
            "Let the judge trained here (reground/data/judge/) rank the evidence sentences by whether "
            "they answer the question and decide answer / hedge / abstain from its answerability; off: the "
            "hand-made evidence score and the support threshold decide (evals/results/judge/)."
        ),
    )
    judge_rank_weight: float = Field(
        default=1.0,
        ge=0.0,
        description=(
            "With the judge: evidence sentences rank by their hand-made score plus this x the judge's probability "
            "that they answer (doc2dial dev dialogues not trained on: answer-sentence MRR 0.536 -> 0.600, the "
            "top sentence's token F1 unchanged; the judge alone 0.615 but lower F1)."
        ),
    )
    judge_answer_threshold: Share = Field(
        default=0.7919,
        description=(
            "With the judge: answer confidently when its answerability is at least this; between the hedge "
            "threshold and this, the reply says the documents do not say it exactly and quotes the closest passage."
        ),
    )
    judge_hedge_threshold: Share = Field(
        default=0.3002,
        description=(
            "With the judge: abstain (after the re-retrieval) when its answerability is below this. Both thresholds "
            "are calibrated out of fold on MTRAG-UN dev: at most 3% of answerable tasks abstain, at most 20% of "
            "unanswerable ones are answered confidently (evals/results/judge/summary.json)."
        ),
    )

    # --- answer --------------------------------------------------------------------------
    answer_style: AnswerStyle = Field(
        default="extract",
        description=(
            "'extract': the reply is the passage sentences that match the question best, in the documents' own "
            "words (no LLM call; what the embedded 0.5B model scores best with, evals/README.md); 'write': the "
            "chat model writes the reply from the passages and those sentences (a capable model)."
        ),
    )
    answer_length: AnswerLength = Field(
        default="sentence",
        description=(
            "How long an extracted reply is. 'sentence' (chat replies, like doc2dial's agents): the best sentence, "
            "plus the next-best one of the same passage when it scores at least 90% as well, in reading order. "
            "'paragraph' (answers like MTRAG-UN's ~75-word references): up to 3 sentences of the passages that score "
            "at least half as well as the best."
        ),
    )
    quote_when_unchecked: bool = Field(
        default=True,
        description=(
            "With answer_style 'write': a written reply that still fails the groundedness or relevance check when "
            "the loops are spent is replaced by the extracted reply (the passages' own sentences) instead of an "
            "abstention, when triage measured support for the question."
        ),
    )
    use_self_check: bool = Field(
        default=False,
        description=(
            "Ask the model which passages help (ConvRAG self-check, a field of one JSON-schema answer reply); "
            "off: the passages holding the evidence sentences count as helpful and the answer is plain text."
        ),
    )
    answer_evidence: Count = Field(
        default=2,
        description=(
            "Passage sentences closest to the question (LLM-free) shown to the answer call as evidence; 0 = none."
        ),
    )
    max_answer_sentences: AtLeastOne = Field(
        default=2,
        description="Answers are cut to this many sentences (dialogue replies are short; the rules say 1-3).",
    )
    n_samples: AtLeastOne = Field(default=1, description="Initial answer samples N (ProMiSe best-of-N).")
    escalation: str = Field(
        default="please ask the people who maintain these documents",
        description=(
            "What to tell the user when the documents do not contain the answer (a deployment names its own "
            "channel, e.g. 'please open a ticket with the HR team')."
        ),
    )

    # --- groundedness and loops --------------------------------------------------------
    groundedness_threshold: Share | None = Field(
        default=None,
        description=(
            "Answers scoring below this are re-grounded. Empty: the value `reground eval calibrate` wrote to "
            f"<data_dir>/calibration.json, else {DEFAULT_GROUNDEDNESS_THRESHOLD}."
        ),
    )
    groundedness_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_GROUNDEDNESS_WEIGHTS),
        description="Weights of the groundedness signals (renormalised over those available).",
    )
    use_llm_groundedness_judge: bool = Field(
        default=True, description="Include the LLM judge in the groundedness score."
    )
    support_low: Cosine = Field(
        default=0.35,
        description="Embedding support: an answer sentence whose best passage cosine is below this counts 0.",
    )
    support_high: Cosine = Field(
        default=0.75,
        description="Embedding support: a best passage cosine above this counts 1 (restated); linear between.",
    )
    llm_judge_band: Share = Field(
        default=0.15,
        description=(
            "The LLM judge runs only when the cheap signals' score is within this distance of the threshold "
            "(where it can change the verdict); 1 = on every answer."
        ),
    )
    max_reground_attempts: Count = Field(
        default=2, description="Re-retrievals after an ungrounded answer (ReGround loop cap)."
    )
    max_refine_iterations: Count = Field(
        default=1, description="Principle-wise refinement iterations J (ProMiSe loop cap)."
    )
    specificity_threshold: float = Field(
        default=0.02, description="Sufficiency: ROUGE-1 recall of the answer vs the passages."
    )
    faithfulness_threshold: float = Field(
        default=0.05, description="Sufficiency: ROUGE-L of the answer vs the passages."
    )
    relevance_threshold: float = Field(
        default=0.2,
        description=(
            "Sufficiency of relevance: token F1 of the answer against the passage sentences closest to the "
            "question (0 when it repeats the previous reply). Below it the answer is refined on relevance."
        ),
    )
    evidence_dense_weight: float = Field(
        default=1.0,
        description=(
            "Weight of the question's MiniLM cosine beside its word overlap when passage sentences are ranked as "
            "evidence (the answer's hint, the relevance anchor and the extractive refinement)."
        ),
    )
    evidence_dialogue_weight: float = Field(
        default=0.5,
        ge=0.0,
        description=(
            "Weight of a follow-up's MiniLM cosine with the question read in its dialogue, beside its own, when "
            "passage sentences are ranked as evidence (only for a follow-up that depends on the dialogue). On "
            "doc2dial dev it lifts the graph's LLM-free reply token F1 on those 1,068 follow-ups from 0.257 to 0.264."
        ),
    )
    evidence_continuity_weight: float = Field(
        default=0.2,
        ge=0.0,
        description=(
            "Weight of continuity when a follow-up's passage sentences are ranked as evidence: a sentence right "
            "after the one the previous reply came from (same document and section) gains this much, fading over "
            "the next 8 sentences (only after a reply of at most two sentences). On doc2dial dev it lifts the "
            "graph's LLM-free reply token F1 from 0.2844 to 0.2888 (weights 0.1-0.3, windows 4-16 measured)."
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
        default=1.5,
        description="A refined answer replaces the old one only if its weighted improvement exceeds this.",
    )
    use_reground: bool = Field(default=True, description="Enable the re-grounding loop.")
    use_principle_refinement: bool = Field(default=True, description="Enable the ProMiSe refinement loop.")
    recursion_limit: AtLeastOne = Field(
        default=60, description="LangGraph recursion limit of a turn (the loops' own caps are far below it)."
    )

    # --- human review ------------------------------------------------------------------
    review_mode: Literal["off", "failed", "all"] = Field(
        default="off",
        description="Pause for a human before finalizing: 'off', only 'failed' answers, or 'all'.",
    )

    # --- prompts -----------------------------------------------------------------------
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
    def _consistent(self) -> Self:
        if self.rerank_method == "http" and not self.rerank_url:
            raise ValueError("context field 'rerank_url' is required when rerank_method is 'http'")
        if self.judge_hedge_threshold > self.judge_answer_threshold:
            raise ValueError(
                f"context field 'judge_hedge_threshold' ({self.judge_hedge_threshold}) must not be above "
                f"'judge_answer_threshold' ({self.judge_answer_threshold})"
            )
        if self.support_low >= self.support_high:
            raise ValueError(
                f"context field 'support_low' ({self.support_low}) must be below 'support_high' ({self.support_high})"
            )
        return self

    def resolved_groundedness_threshold(self) -> float:
        """The threshold in force. Reads the calibration file, so only nodes and routes (worker threads) call it:
        the server builds contexts on its event loop, where file I/O is refused."""
        if self.groundedness_threshold is not None:
            return float(self.groundedness_threshold)
        from reground.tools.adapters.paths import CALIBRATION_FILE, data_dir, read_calibrated_threshold

        calibrated = read_calibrated_threshold(data_dir(self.data_dir or None) / CALIBRATION_FILE, self.collection)
        return DEFAULT_GROUNDEDNESS_THRESHOLD if calibrated is None else calibrated

    def resolved_support_threshold(self) -> float:
        """The support threshold in force: the explicit value, else the one calibrated for this collection, else the
        calibration file's own, else the default (reads the calibration file: call it from nodes and routes only,
        like the groundedness threshold)."""
        if self.support_threshold is not None:
            return float(self.support_threshold)
        from reground.tools.adapters.paths import CALIBRATION_FILE, data_dir, read_calibrated_value

        path = data_dir(self.data_dir or None) / CALIBRATION_FILE
        calibrated = read_calibrated_value("support_threshold", path, high=3.0, collection=self.collection)
        return DEFAULT_SUPPORT_THRESHOLD if calibrated is None else calibrated

    def evidence_weights(self) -> EvidenceWeights:
        """How the hand-made evidence score weighs its parts (tools/signals/reading.py)."""
        return EvidenceWeights(
            dense=self.evidence_dense_weight,
            dialogue=self.evidence_dialogue_weight,
            continuity=self.evidence_continuity_weight,
            history_token_budget=self.history_token_budget,
            judge=self.judge_rank_weight,
        )

    def model_for(self, role: Role) -> str:
        """The model spec a role uses: its own if set, else the shared chat_model."""
        own = {"refiner": self.refiner_model, "answer": self.answer_model, "judge": self.judge_model}[role]
        return own or self.chat_model


_CONVERSATION = Context.model_fields  # the ingestion graph writes where the conversation reads


def _conversation_field(name: str) -> Any:
    """A fresh copy of the conversation's declaration of a field (pydantic completes a FieldInfo it is given, so
    one is never shared between models)."""
    declared = _CONVERSATION[name]
    return Field(default=declared.default, description=declared.description)


class IngestContext(EnvSettings):
    """Where the ingestion graph writes; unset fields fall back to REGROUND_<FIELD>."""

    collection: CollectionName = Field(
        default=_CONVERSATION["collection"].default,
        description="Chroma collection to write into (created if missing), 3-200 characters.",
    )
    data_dir: str = _conversation_field("data_dir")
    chroma_url: str = _conversation_field("chroma_url")
    max_tokens: int = Field(
        default=160, ge=16, description="Maximum tokens per chunk (chunks follow headings and paragraphs)."
    )
    embedding_model: str = Field(
        default=_CONVERSATION["embedding_model"].default,
        description="Embedding spec; must match the one the conversation graph reads the collection with.",
    )
