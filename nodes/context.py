"""Runtime context: every setting of a turn, editable in LangGraph Studio's configuration form.

A pydantic model, so LangGraph renders its JSON schema (descriptions, ranges, choices) as Studio's form and
validates what a client sends. What a user changes is a top-level field (`chat_model`, `collection`, `top_n`,
`answer_style`, the `use_*` switches, ...); the expert settings sit in groups by stage (`models`, `budgets`,
`retrieval`, `index`, `triage`, `evidence`, `groundedness`, `refinement`, `prompts`), each with one name:
`context.triage.judge_answer_threshold`. Their defaults are the measured values of tools/tuning/.

- Given: `Context(top_n=5, triage={"judge_answer_threshold": 0.8})` (a group's mapping sets the fields it names,
  the others keep their defaults), or with dotted keys: `Context(**{"triage.judge_answer_threshold": 0.8})`.
- Environment: a field not given falls back to `REGROUND_<FIELD>` (`REGROUND_CHAT_MODEL`), a group's field to
  `REGROUND_<GROUP>__<FIELD>` (`REGROUND_TRIAGE__JUDGE_ANSWER_THRESHOLD=0.8`), a whole group to JSON
  (`REGROUND_TRIAGE='{"judge_answer_threshold": 0.8}'`; its per-field variables fill what the JSON leaves out).
  A value given explicitly always wins, even when it equals the default.
- Changed: `context.with_(top_n=5)`, `context.with_(triage={"judge_answer_threshold": 0.8})` or
  `context.with_(**{"triage.judge_answer_threshold": 0.8})`: validated; every value not named is kept (a group's
  mapping changes only the fields it names).
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import asdict, fields, is_dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self, get_args, get_origin

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
from reground.tools.tuning.models import CHAT
from reground.tools.tuning.stores import INGEST
from reground.tools.tuning.turn import BUDGETS, EVIDENCE, GROUNDEDNESS, REFINEMENT, TRIAGE

# The values in force until `reground eval calibrate` measures the user's own (tools/tuning/turn.py says how these
# were measured).
DEFAULT_GROUNDEDNESS_THRESHOLD = GROUNDEDNESS.threshold
DEFAULT_GROUNDEDNESS_WEIGHTS: Mapping[str, float] = GROUNDEDNESS.weights
DEFAULT_SUPPORT_THRESHOLD = TRIAGE.support_threshold
# The most readings triage finds for an ambiguous reference (answerability.readings): a clarify count above it
# could never be reached, so the context refuses one instead of silently never asking back.
MAX_READINGS = TRIAGE.max_readings
ENV_PREFIX = "REGROUND_"
GROUP_SEPARATOR = "__"  # REGROUND_<GROUP>__<FIELD>


Principle = Literal["specificity", "faithfulness", "relevance"]
# How a reply is made, and how long an extracted one is (nodes/answer.py).
AnswerStyle = Literal["extract", "write"]
AnswerLength = Literal["conversation", "sentence", "paragraph"]

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
    A group of a larger context (`Group`) reads REGROUND_<GROUP>__<FIELD>.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    env_prefix: ClassVar[str] = ENV_PREFIX
    location: ClassVar[tuple[str, ...]] = ()  # where the settings sit in a context, for error messages

    @model_validator(mode="before")
    @classmethod
    def _environment_fallbacks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        filled = _nested(cls, data)
        for name, info in cls.model_fields.items():
            variable = cls.env_prefix + name.upper()
            raw = os.environ.get(variable)
            if name not in filled and raw is not None:
                filled[name] = _env_value(variable, raw, info.annotation)
            elif raw is not None and _is_group(info.annotation) and isinstance(filled[name], Mapping):
                # A group given in part: the group's JSON variable fills the fields it leaves out.
                filled[name] = {**_env_value(variable, raw, info.annotation), **filled[name]}
            if is_dataclass(info.annotation):  # retrieval, index: REGROUND_RETRIEVAL__RRF_K fills that field
                _dataclass_fallbacks(filled, name, variable + GROUP_SEPARATOR)
        return filled

    if not TYPE_CHECKING:  # mypy keeps pydantic's typed keyword signature

        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ContextError(_one_line(exc, data, type(self).location)) from None

    def with_(self, **changes: Any) -> Self:
        """A copy with `changes` applied and validated; every other value is kept (environment not re-read).
        A group's mapping or a dotted key (`**{"triage.judge_answer_threshold": 0.8}`) changes only the group
        fields it names."""
        values: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        for name, value in _nested(type(self), changes).items():
            current = values.get(name)
            if isinstance(value, Mapping) and (isinstance(current, BaseModel) or is_dataclass(current)):
                value = {**_fields_of(current), **value}
            values[name] = value
        return type(self)(**values)


class Group(EnvSettings):
    """A group of expert settings inside the Context (`context.triage`, ...); its fields fall back to
    REGROUND_<GROUP>__<FIELD>."""

    if not TYPE_CHECKING:

        def __init__(self, **data: Any) -> None:
            try:
                BaseModel.__init__(self, **data)
            except ValidationError as exc:
                raise ContextError(_one_line(exc, data, type(self).location)) from None

        # Inside a Context, pydantic validates a group without this __init__, so the Context's one error line names
        # the group's field ('triage.reading_ratio') instead of nesting a second message.
        __init__.__pydantic_base_init__ = True


def _group(name: str) -> Any:
    """A class decorator: the group's name in the context, for its environment variables and error messages."""

    def mark(cls: type[Group]) -> type[Group]:
        cls.env_prefix = f"{ENV_PREFIX}{name.upper()}{GROUP_SEPARATOR}"
        cls.location = (name,)
        return cls

    return mark


def _is_group(annotation: Any) -> bool:
    """Whether a field holds a group of settings (a pydantic group or a settings dataclass), not a plain value."""
    return is_dataclass(annotation) or (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def _fields_of(value: Any) -> dict[str, Any]:
    """A group's current values by field name (a pydantic group or a settings dataclass)."""
    if isinstance(value, BaseModel):
        return {name: getattr(value, name) for name in type(value).model_fields}
    return {name: getattr(value, name) for name in asdict(value)}


def _nested(cls: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with each dotted key ('triage.judge_answer_threshold') moved into its group's mapping. A key whose
    first part is not a field is left as it is (validation then names it as unknown)."""
    out = dict(data)
    for key in [k for k in data if isinstance(k, str) and "." in k]:
        group, _, name = key.partition(".")
        if group not in cls.model_fields:
            continue
        value = out.pop(key)
        current = out.get(group, {})
        if isinstance(current, BaseModel) or is_dataclass(current):
            current = _fields_of(current)
        out[group] = {**current, name: value}
    return out


def _dataclass_fallbacks(filled: dict[str, Any], name: str, prefix: str) -> None:
    """Fill a settings dataclass's fields that were not given from PREFIX<FIELD> variables (JSON, else text)."""
    found = {k[len(prefix) :].lower(): v for k, v in os.environ.items() if k.startswith(prefix)}
    if not found:
        return
    current = filled.get(name, {})
    current = _fields_of(current) if is_dataclass(current) else dict(current)
    for key, raw in found.items():
        if key not in current:
            try:
                current[key] = json.loads(raw)
            except ValueError:
                current[key] = raw
    filled[name] = current


def _env_value(variable: str, raw: str, annotation: Any) -> Any:
    """The environment's text for a field: JSON for objects, else the text (pydantic converts it)."""
    structured = get_origin(annotation) in (dict, Mapping) or (
        isinstance(annotation, type) and not issubclass(annotation, str | int | float | bool)
    )
    if not structured:
        return raw
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ContextError(f"environment variable {variable}={raw!r}: not JSON ({exc})") from exc


def _given(given: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the caller's values name the field at `path` (a dotted key or inside a group's mapping)."""
    if ".".join(path) in given:
        return True
    value: Any = given
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def _one_line(exc: ValidationError, given: Mapping[str, Any], location: tuple[str, ...] = ()) -> str:
    """'context field 'top_n': Input should be greater than or equal to 1, got 0' (and where a value came from);
    a group's field is named with its group: 'triage.judge_answer_threshold'."""
    parts = []
    for error in exc.errors():
        path = tuple(str(part) for part in error["loc"])
        loc = ".".join((*location, *path))
        message = str(error["msg"]).removeprefix("Value error, ")
        source = ""
        field_path = (*location, *path[: 2 - len(location)])
        variable = ENV_PREFIX + GROUP_SEPARATOR.join(part.upper() for part in field_path)
        if path and not _given(given, path[: 2 - len(location)]) and variable in os.environ:
            source = f" (from the environment variable {variable})"
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


def _in_order(group: BaseModel, name: str, low: str, high: str, *, strict: bool) -> None:
    """Two fields of a group that bound a band: `low` below `high` (or not above it, when equal is allowed)."""
    low_value, high_value = getattr(group, low), getattr(group, high)
    if low_value > high_value or (strict and low_value == high_value):
        relation = "be below" if strict else "not be above"
        raise ValueError(f"context field '{name}.{low}' ({low_value}) must {relation} '{name}.{high}' ({high_value})")


def _checked_collection(collection: str) -> str:
    check_collection(collection)
    return collection


# A collection name the store accepts, checked when a context is built (a bad one fails before any run starts).
CollectionName = Annotated[str, AfterValidator(_checked_collection)]


@_group("models")
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


@_group("budgets")
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


@_group("triage")
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
        _in_order(self, "triage", "judge_hedge_threshold", "judge_answer_threshold", strict=False)
        return self


@_group("evidence")
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
            "the candidates hold a code block or a table; 'on': always; 'off': never."
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


@_group("groundedness")
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
        _in_order(self, "groundedness", "support_low", "support_high", strict=True)
        return self


@_group("refinement")
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


@_group("prompts")
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


def _group_field(group: type[Group], description: str) -> Any:
    return Field(default_factory=group, description=description)


class Context(EnvSettings):
    """Settings of one reground run: what a user changes at the top, the expert settings in groups by stage.
    Defaults are the measured, recommended values (tools/tuning/)."""

    # --- models and the document store -----------------------------------------------------
    chat_model: str = Field(
        default="local:default",
        description=(
            "Chat model spec for every role without its own: 'local:<name>' (the llama.cpp server "
            "started by `reground llm serve`), 'openai:<model>' (OPENAI_API_KEY, OPENAI_BASE_URL), "
            "or 'openai-compatible:<model>@<base_url>'."
        ),
    )
    embedding_model: str = Field(
        default="local:all-MiniLM-L6-v2",
        description="Embedding spec: 'local:all-MiniLM-L6-v2' (ONNX, offline) or 'openai:<model>'.",
    )
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
            "Vector store spec: 'chroma:<dir>', 'chroma-http://host:port', a search engine "
            "('postgresql://user@host/db', or 'pgserver:<dir>' for the bundled one: search runs in the engine) or a "
            "registered scheme (tools/stores/vector_store.py); empty = from data_dir and chroma_url."
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

    # --- the turn's stages ------------------------------------------------------------------
    use_question_refiner: bool = Field(
        default=True, description="Rewrite follow-ups into standalone questions (ConvRAG refiner)."
    )
    keyword_method: Literal["llm", "lexical", "off"] = Field(
        default="lexical",
        description="Keywords: 'llm' (structured output), 'lexical' (no LLM call) or 'off'.",
    )
    rerank_method: Literal["sentence", "judge", "fusion", "llm", "http", "off"] = Field(
        default="sentence",
        description=(
            "'sentence' (retrieval score plus the paragraph's best sentence cosine with the question, no LLM; "
            "the best measured on doc2dial dev), 'judge' (the same with the trained judge's probability that the "
            "paragraph's best sentence answers the question: an in-process cross-encoder, no LLM), 'fusion' (rank "
            "fusion of the retrieval scores, no LLM), 'llm' "
            "(listwise 1-10 relevance), 'http' (a cross-encoder rerank endpoint at rerank_url), 'off' (retrieval "
            "order)."
        ),
    )
    top_n: AtLeastOne = Field(default=BUDGETS.top_n, description="Paragraphs kept after rerank (ConvRAG n = 3).")
    use_clarify: bool = Field(
        default=True,
        description=(
            "Ask which one the user means when the question refers to something the dialogue never named and "
            "retrieval finds several documents that fit it about equally (the readings are named in the question)."
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
    answer_style: AnswerStyle = Field(
        default="extract",
        description=(
            "'extract': the reply is the passage sentences that match the question best, in the documents' own "
            "words (no LLM call; what the embedded 0.5B model scores best with, evals/README.md); 'write': the "
            "chat model writes the reply from the passages and those sentences (a capable model)."
        ),
    )
    answer_length: AnswerLength = Field(
        default="conversation",
        description=(
            "How long an extracted reply is. 'conversation': about as long as the assistant's replies so far (their "
            "median words), from the best passage's sentences scoring at least half as well as the best (at most 6); "
            "a first turn is answered as 'sentence'. A conversation sets its own register (doc2dial's agents reply "
            "far shorter than MTRAG-UN's); where reground wrote the earlier replies it stays near 'sentence'. "
            "'sentence': the best sentence, plus the next-best one of the same passage when it scores at least 90% "
            "as well, in reading order. 'paragraph': up to 3 sentences of the passages that score at least half as "
            "well as the best."
        ),
    )
    escalation: str = Field(
        default="please ask the people who maintain these documents",
        description=(
            "What to tell the user when the documents do not contain the answer (a deployment names its own "
            "channel, e.g. 'please open a ticket with the HR team')."
        ),
    )
    use_reground: bool = Field(default=True, description="Enable the re-grounding loop.")
    use_principle_refinement: bool = Field(default=True, description="Enable the ProMiSe refinement loop.")
    recursion_limit: AtLeastOne = Field(
        default=BUDGETS.recursion_limit,
        description="LangGraph recursion limit of a turn (the loops' own caps are far below it).",
    )
    review_mode: Literal["off", "failed", "all"] = Field(
        default="off",
        description="Pause for a human before finalizing: 'off', only 'failed' answers, or 'all'.",
    )

    # --- expert settings, by stage ----------------------------------------------------------
    models: ModelSettings = _group_field(
        ModelSettings,
        "The model of each role (empty: chat_model), the rerank endpoint, sampling, timeouts, token caps.",
    )
    budgets: Budgets = _group_field(
        Budgets, "Dialogue and question token budgets, candidate documents and paragraphs, paragraph scoring."
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
    triage: TriageSettings = _group_field(
        TriageSettings, "Ask back, abstain, hedge or answer: support and judge thresholds, readings, partial answers."
    )
    evidence: EvidenceSettings = _group_field(
        EvidenceSettings, "How evidence sentences rank, what the answer is shown and cut to, the self-check."
    )
    groundedness: GroundednessSettings = _group_field(
        GroundednessSettings, "The groundedness score, its threshold, signals and LLM judge, and the re-ground cap."
    )
    refinement: RefinementSettings = _group_field(
        RefinementSettings, "When a follow-up is rewritten; ProMiSe's thresholds, weights and loop cap."
    )
    prompts: PromptSettings = _group_field(PromptSettings, "The prompts, checked for their placeholders.")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.rerank_method == "http" and not self.models.rerank_url:
            raise ValueError("context field 'models.rerank_url' is required when rerank_method is 'http'")
        return self

    def resolved_groundedness_threshold(self) -> float:
        """The threshold in force. Reads the calibration file, so only nodes and routes (worker threads) call it:
        the server builds contexts on its event loop, where file I/O is refused."""
        if self.groundedness.threshold is not None:
            return float(self.groundedness.threshold)
        from reground.tools.adapters.paths import CALIBRATION_FILE, data_dir, read_calibrated_threshold

        calibrated = read_calibrated_threshold(data_dir(self.data_dir or None) / CALIBRATION_FILE, self.collection)
        return DEFAULT_GROUNDEDNESS_THRESHOLD if calibrated is None else calibrated

    def resolved_support_threshold(self) -> float:
        """The support threshold in force: the explicit value, else the one calibrated for this collection, else the
        calibration file's own, else the default (reads the calibration file: call it from nodes and routes only,
        like the groundedness threshold)."""
        if self.triage.support_threshold is not None:
            return float(self.triage.support_threshold)
        from reground.tools.adapters.paths import CALIBRATION_FILE, data_dir, read_calibrated_value

        path = data_dir(self.data_dir or None) / CALIBRATION_FILE
        calibrated = read_calibrated_value(
            "support_threshold", path, high=TRIAGE.support_score_max, collection=self.collection
        )
        return DEFAULT_SUPPORT_THRESHOLD if calibrated is None else calibrated

    def evidence_weights(self) -> EvidenceWeights:
        """How the hand-made evidence score weighs its parts (tools/signals/reading.py)."""
        return EvidenceWeights(
            dense=self.evidence.dense_weight,
            dialogue=self.evidence.dialogue_weight,
            continuity=self.evidence.continuity_weight,
            history_token_budget=self.budgets.history_token_budget,
            judge=self.evidence.judge_rank_weight,
            reader=self.evidence.reader_weight,
            units=self.evidence.unit_ranking,
        )

    def model_for(self, role: Role) -> str:
        """The model spec a role uses: its own if set, else the shared chat_model."""
        models = self.models
        own = {"refiner": models.refiner_model, "answer": models.answer_model, "judge": models.judge_model}[role]
        return own or self.chat_model


def setting_names() -> list[str]:
    """Every name `--set` and dotted keys accept: the top-level fields, and `group.field` for each group's field."""
    names: list[str] = []
    for name, info in Context.model_fields.items():
        names.append(name)
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            names += [f"{name}.{sub}" for sub in kind.model_fields]
        elif is_dataclass(kind):
            names += [f"{name}.{sub.name}" for sub in fields(kind)]
    return names


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
    store: str = _conversation_field("store")
    max_tokens: int = Field(
        default=INGEST.chunk_tokens,
        ge=16,
        description="Maximum tokens per chunk (chunks follow headings and paragraphs).",
    )
    embedding_model: str = Field(
        default=_CONVERSATION["embedding_model"].default,
        description="Embedding spec; must match the one the conversation graph reads the collection with.",
    )
