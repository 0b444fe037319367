"""Runtime context: every setting of a turn, editable in LangGraph Studio's configuration form.

A pydantic model, so LangGraph renders its JSON schema (descriptions, ranges, choices) as Studio's form and
validates what a client sends. What a user changes is a top-level field (`chat_model`, `collection`, `top_n`,
`answer_style`, the `use_*` switches, ...); the expert settings sit in groups by stage (`models`, `budgets`,
`retrieval`, `index`, `triage`, `evidence`, `groundedness`, `refinement`, `citations`, `prompts`), each with one
name: `context.triage.judge_answer_threshold`. A tuned field is generated from its one declaration in tools/tuning/
(default and description; `retrieval` and `index` are those declarations' own dataclasses). The groups are declared
in context_groups.py and read through context_base.py; every name is importable from here. Nodes read every setting
from here, never from tools/tuning/.
- Who sets it: a field whose schema says `"user_settable": false` is one a user should not normally change (a reply
  schema's limit, a prompt's window); it is in the context so that every value a node uses is the run's.

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
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from typing import Any, Literal, Self

from pydantic import BaseModel, Field, model_validator
from reground.nodes.context_base import (
    ENV_PREFIX,
    GROUP_SEPARATOR,
    PROMPT_PLACEHOLDERS,
    VERBATIM_PROMPTS,
    CollectionName,
    ContextError,
    EnvSettings,
    Group,
    check_collection,
    check_prompt,
    tuned,
)
from reground.nodes.context_groups import (
    DEFAULT_GROUNDEDNESS_THRESHOLD,
    DEFAULT_GROUNDEDNESS_WEIGHTS,
    DEFAULT_SUPPORT_THRESHOLD,
    MAX_READINGS,
    Budgets,
    CitationSettings,
    EvidenceSettings,
    GroundednessSettings,
    ModelSettings,
    PromptSettings,
    RefinementSettings,
    TriageSettings,
)
from reground.tools.errors import InputError
from reground.tools.services import Role
from reground.tools.signals.reading import EvidenceWeights
from reground.tools.tuning.retrieval import RetrievalSettings
from reground.tools.tuning.stores import INGEST, IndexSettings
from reground.tools.tuning.turn import BUDGETS, TRIAGE

# Where users and the rest of the package import them from: every name the context module held before its split.
__all__ = [
    "DEFAULT_GROUNDEDNESS_THRESHOLD",
    "DEFAULT_GROUNDEDNESS_WEIGHTS",
    "DEFAULT_SUPPORT_THRESHOLD",
    "ENV_PREFIX",
    "GROUP_SEPARATOR",
    "MAX_READINGS",
    "PROMPT_PLACEHOLDERS",
    "VERBATIM_PROMPTS",
    "AnswerLength",
    "AnswerStyle",
    "Budgets",
    "CitationSettings",
    "CollectionName",
    "Context",
    "ContextError",
    "EnvSettings",
    "EvidenceSettings",
    "GroundednessSettings",
    "Group",
    "IngestContext",
    "ModelSettings",
    "PromptSettings",
    "RefinementSettings",
    "TriageSettings",
    "check_collection",
    "check_prompt",
    "setting_names",
]

# How a reply is made, and how long an extracted one is (nodes/answer.py).
AnswerStyle = Literal["extract", "write"]
AnswerLength = Literal["conversation", "sentence", "paragraph"]


def _group_field(group: type[Group], description: str) -> Any:
    return Field(default_factory=group, description=description)


class Context(EnvSettings):
    """Settings of one reground run: what a user changes at the top, the expert settings in groups by stage.
    Tuned defaults and their descriptions are declared once, in tools/tuning/."""

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
    top_n: int = tuned(BUDGETS, "top_n")
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
            "How long an extracted reply is (each length's shape: evidence.answer_lengths). 'conversation': about "
            "as long as the assistant's replies so far (their median words), from the best passage's sentences; a "
            "first turn is answered as 'sentence'. A conversation sets its own register (doc2dial's agents reply "
            "far shorter than MTRAG-UN's); where reground wrote the earlier replies it stays near 'sentence'. "
            "'sentence': the best sentence, plus the next-best one of the same passage when it scores nearly as "
            "well, in reading order. 'paragraph': a few sentences of any passage scoring well against the best."
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
    recursion_limit: int = tuned(BUDGETS, "recursion_limit")
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
        description="Retrieval weights and fusion (tools/tuning/retrieval.py RetrievalSettings, tuned on doc2dial).",
    )
    index: IndexSettings = Field(
        default_factory=IndexSettings,
        description=(
            "How dense search runs (tools/tuning/stores.py IndexSettings): 'exact' in memory, Chroma's 'hnsw', or "
            "'auto' (HNSW from `ann_min_chunks` live chunks on, where exact scoring stops paying: "
            "evals/results/bench.json, scale)."
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
    citations: CitationSettings = _group_field(
        CitationSettings, "Which passages a reply cites (their share of its words) and how long a quote is."
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
            reader_top=self.evidence.reader_top,
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


SET_EXAMPLE = "triage.reading_ratio=0.7"


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """FIELD=VALUE pairs (`--set`) → Context overrides, checked against the Context's fields (GROUP.FIELD for a
    group's field, or GROUP=JSON for several of them); VALUE is JSON when it parses as JSON. An unknown name is an
    InputError naming it. One parser for the CLI's `--set` and the evals' runs."""
    known = set(setting_names())
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise InputError(
                f"--set {item!r}: expected FIELD=VALUE with FIELD a Context field or GROUP.FIELD, e.g. {SET_EXAMPLE}"
            )
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError:
            out[name] = raw
    return out


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
    max_tokens: int = tuned(INGEST, "chunk_tokens")
    embedding_model: str = Field(
        default=_CONVERSATION["embedding_model"].default,
        description="Embedding spec; must match the one the conversation graph reads the collection with.",
    )
