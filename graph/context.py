"""Runtime context: every setting of a turn, editable in LangGraph Studio's configuration form.

Each field falls back to an environment variable of the same name in upper case with a
`REGROUND_` prefix (e.g. `REGROUND_CHAT_MODEL`) when it is left at its default.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

from reground.prompts import answer as answer_prompts
from reground.prompts import groundedness as groundedness_prompts
from reground.prompts import keywords as keyword_prompts
from reground.prompts import refine as refine_prompts
from reground.prompts import refine_question as refine_question_prompts
from reground.prompts import rerank as rerank_prompts
from reground.tools.errors import InputError

DEFAULT_GROUNDEDNESS_THRESHOLD = 0.5  # used until `reground eval calibrate` writes a measured one
ENV_PREFIX = "REGROUND_"


class ContextError(InputError):
    """A context value is invalid; the message names the field and the accepted values."""


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class Context:
    """Settings of one reground run. Defaults are the measured, recommended values."""

    # --- models -------------------------------------------------------------------------
    chat_model: str = field(
        default="local:default",
        metadata=_describe(
            "Chat model spec for every role without its own: 'local:<name>' (the llama.cpp server "
            "started by `reground llm serve`), 'openai:<model>' (OPENAI_API_KEY, OPENAI_BASE_URL), "
            "or 'openai-compatible:<model>@<base_url>'."
        ),
    )
    refiner_model: str = field(
        default="", metadata=_describe("Model spec for question refinement and keywords; empty = chat_model.")
    )
    answer_model: str = field(
        default="", metadata=_describe("Model spec for the self-check and the answer; empty = chat_model.")
    )
    judge_model: str = field(
        default="", metadata=_describe("Model spec for rerank and groundedness judging; empty = chat_model.")
    )
    embedding_model: str = field(
        default="local:all-MiniLM-L6-v2",
        metadata=_describe("Embedding spec: 'local:all-MiniLM-L6-v2' (ONNX, offline) or 'openai:<model>'."),
    )
    temperature: float = field(
        default=0.0, metadata=_describe("Sampling temperature of the first answer sample (others use 0.7).")
    )
    llm_timeout_s: float = field(default=120.0, metadata=_describe("Timeout of one LLM call, seconds."))
    max_answer_tokens: int = field(default=120, metadata=_describe("Token cap of one answer."))

    # --- the document store -------------------------------------------------------------
    collection: str = field(default="demo-hr", metadata=_describe("Chroma collection to answer from."))
    data_dir: str = field(
        default="",
        metadata=_describe("Directory of the persistent store; empty = $REGROUND_DATA_DIR or ~/.local/share/reground."),
    )
    chroma_url: str = field(
        default="", metadata=_describe("URL of a Chroma server (chroma run); empty = the embedded store in data_dir.")
    )
    metadata_filter: dict[str, Any] = field(
        default_factory=dict,
        metadata=_describe(
            "The user's scope, applied to every retrieval stage: {field: value} or {field: [values]}, "
            'e.g. {"country": "DE", "employment_type": "full-time"}. A document whose field is '
            "'all' matches any value."
        ),
    )

    # --- refinement and retrieval -------------------------------------------------------
    use_question_refiner: bool = field(
        default=True, metadata=_describe("Rewrite follow-ups into standalone questions (ConvRAG refiner).")
    )
    rewrite_below_margin: float = field(
        default=0.25,
        metadata=_describe(
            "Rewrite a follow-up (one LLM call) only when the history-aware document ranking's top document "
            "leads the second by less than this share of its score; 0 = never rewrite, 1 = always."
        ),
    )
    keyword_method: Literal["llm", "lexical", "off"] = field(
        default="lexical",
        metadata=_describe("Keywords: 'llm' (structured output), 'lexical' (no LLM call) or 'off'."),
    )
    history_token_budget: int = field(
        default=100, metadata=_describe("Dialogue history (tokens) added to the retrieval query (DH_tokens).")
    )
    question_token_budget: int = field(
        default=512, metadata=_describe("Longer questions are cut to this many tokens (noted in the trace).")
    )
    doc_candidates: int = field(default=8, metadata=_describe("Documents kept by document-level hybrid search."))
    use_paragraph_scoring: bool = field(
        default=True,
        metadata=_describe("Score paragraphs by cos(q', p) + sum of cos(keyword, p) (ConvRAG fine-grained retrieval)."),
    )
    paragraph_candidates: int = field(
        default=8, metadata=_describe("Paragraphs kept by paragraph-level scoring, before rerank.")
    )
    top_n: int = field(default=3, metadata=_describe("Paragraphs kept after rerank (ConvRAG n = 3)."))
    rerank_method: Literal["fusion", "llm", "http", "off"] = field(
        default="fusion",
        metadata=_describe(
            "'fusion' (scores, no LLM), 'llm' (listwise 1-10 relevance), 'http' (a cross-encoder "
            "rerank endpoint at rerank_url), 'off'."
        ),
    )
    rerank_url: str = field(default="", metadata=_describe("URL of a /rerank endpoint (Cohere/TEI/Jina style)."))

    # --- answer --------------------------------------------------------------------------
    use_self_check: bool = field(
        default=True,
        metadata=_describe(
            "Use the answer call's verdicts on which passages help (ConvRAG self-check, a field of the same "
            "structured reply) to choose the citations."
        ),
    )
    answer_evidence: int = field(
        default=2,
        metadata=_describe(
            "Passage sentences closest to the question (LLM-free) shown to the answer call as evidence; 0 = none."
        ),
    )
    max_answer_sentences: int = field(
        default=2,
        metadata=_describe("Answers are cut to this many sentences (dialogue replies are short; the rules say 1-3)."),
    )
    n_samples: int = field(default=1, metadata=_describe("Initial answer samples N (ProMiSe best-of-N)."))
    escalation: str = field(
        default="please open a ticket with the HR team",
        metadata=_describe("What to tell the user when the documents do not contain the answer."),
    )

    # --- groundedness and loops --------------------------------------------------------
    groundedness_threshold: float | None = field(
        default=None,
        metadata=_describe(
            "Answers scoring below this are re-grounded. Empty: the value `reground eval calibrate` wrote to "
            f"<data_dir>/calibration.json, else {DEFAULT_GROUNDEDNESS_THRESHOLD}."
        ),
    )
    groundedness_weights: dict[str, float] = field(
        default_factory=lambda: {
            "llm_judge": 0.4,
            "k_precision": 0.25,
            "rouge_l_precision": 0.1,
            "embedding_support": 0.25,
        },
        metadata=_describe("Weights of the groundedness signals (renormalised over those available)."),
    )
    use_llm_groundedness_judge: bool = field(
        default=True, metadata=_describe("Include the LLM judge in the groundedness score.")
    )
    llm_judge_band: float = field(
        default=0.15,
        metadata=_describe(
            "The LLM judge runs only when the cheap signals' score is within this distance of the threshold "
            "(where it can change the verdict); 1 = on every answer."
        ),
    )
    max_reground_attempts: int = field(
        default=2, metadata=_describe("Re-retrievals after an ungrounded answer (ReGround loop cap).")
    )
    max_refine_iterations: int = field(
        default=1, metadata=_describe("Principle-wise refinement iterations J (ProMiSe loop cap).")
    )
    specificity_threshold: float = field(
        default=0.02, metadata=_describe("Sufficiency: ROUGE-1 recall of the answer vs the passages.")
    )
    faithfulness_threshold: float = field(
        default=0.05, metadata=_describe("Sufficiency: ROUGE-L of the answer vs the passages.")
    )
    relevance_threshold: float = field(
        default=0.2,
        metadata=_describe(
            "Sufficiency of relevance: token F1 of the answer against the passage sentences closest to the "
            "question (0 when it repeats the previous reply). Below it the answer is refined on relevance."
        ),
    )
    evidence_dense_weight: float = field(
        default=1.0,
        metadata=_describe(
            "Weight of the question's MiniLM cosine beside its word overlap when passage sentences are ranked as "
            "evidence (the answer's hint, the relevance anchor and the extractive refinement)."
        ),
    )
    relevance_refinement: Literal["extractive", "llm"] = field(
        default="extractive",
        metadata=_describe(
            "How an answer under the relevance threshold is refined: 'extractive' (the closest passage "
            "sentence, in the documents' own words; no LLM call) or 'llm' (ProMiSe's relevance prompt)."
        ),
    )
    principle_weights: dict[str, float] = field(
        default_factory=lambda: {"specificity": 1.0, "faithfulness": 1.0, "relevance": 1.0},
        metadata=_describe("Weights w of the proxy metrics in the improvement test."),
    )
    improvement_lambda: float = field(
        default=1.5,
        metadata=_describe("A refined answer replaces the old one only if its weighted improvement exceeds this."),
    )
    use_reground: bool = field(default=True, metadata=_describe("Enable the re-grounding loop."))
    use_principle_refinement: bool = field(default=True, metadata=_describe("Enable the ProMiSe refinement loop."))
    recursion_limit: int = field(
        default=60, metadata=_describe("LangGraph recursion limit of a turn (the loops' own caps are far below it).")
    )

    # --- human review ------------------------------------------------------------------
    review_mode: Literal["off", "failed", "all"] = field(
        default="off",
        metadata=_describe("Pause for a human before finalizing: 'off', only 'failed' answers, or 'all'."),
    )

    # --- prompts -----------------------------------------------------------------------
    refine_question_prompt: str = field(
        default=refine_question_prompts.SYSTEM,
        metadata=_describe("Prompt: rewrite a follow-up as a standalone question."),
    )
    keywords_prompt: str = field(default=keyword_prompts.SYSTEM, metadata=_describe("Prompt: extract keywords."))
    rerank_prompt: str = field(default=rerank_prompts.TASK, metadata=_describe("Prompt: listwise LLM rerank."))
    answer_prompt: str = field(default=answer_prompts.TASK, metadata=_describe("Prompt: the answer rules."))
    groundedness_prompt: str = field(
        default=groundedness_prompts.TASK, metadata=_describe("Prompt: list unsupported claims.")
    )
    reground_prompt: str = field(
        default=refine_question_prompts.REGROUND_TASK,
        metadata=_describe("Prompt: rewrite the query after an ungrounded answer (ReGround feedback)."),
    )
    refine_prompts: dict[str, str] = field(
        default_factory=lambda: dict(refine_prompts.PRINCIPLE_TASKS),
        metadata=_describe("Prompts: one per principle for ProMiSe refinement (specificity, faithfulness, relevance)."),
    )

    def __post_init__(self) -> None:
        apply_env_fallbacks(self)
        self.validate()

    def resolved_groundedness_threshold(self) -> float:
        """The threshold in force. Reads the calibration file, so only nodes and routes (worker threads) call it:
        the server builds contexts on its event loop, where file I/O is refused."""
        if self.groundedness_threshold is not None:
            return float(self.groundedness_threshold)
        from reground.tools.paths import CALIBRATION_FILE, data_dir, read_calibrated_threshold

        calibrated = read_calibrated_threshold(data_dir(self.data_dir or None) / CALIBRATION_FILE)
        return DEFAULT_GROUNDEDNESS_THRESHOLD if calibrated is None else calibrated

    def validate(self) -> None:
        """Reject values that would make a run meaningless, naming the field."""
        positive_ints = (
            "doc_candidates",
            "paragraph_candidates",
            "top_n",
            "n_samples",
            "max_answer_tokens",
            "max_answer_sentences",
            "question_token_budget",
            "recursion_limit",
        )
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ContextError(f"context field {name!r} must be an integer >= 1, got {value!r}")
        for name in ("max_reground_attempts", "max_refine_iterations", "history_token_budget", "answer_evidence"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ContextError(f"context field {name!r} must be an integer >= 0, got {value!r}")
        if self.groundedness_threshold is not None and not 0.0 <= float(self.groundedness_threshold) <= 1.0:
            raise ContextError(
                f"context field 'groundedness_threshold' must be in [0, 1], got {self.groundedness_threshold!r}"
            )
        if not 0.0 <= float(self.rewrite_below_margin) <= 1.0:
            raise ContextError(
                f"context field 'rewrite_below_margin' must be in [0, 1], got {self.rewrite_below_margin!r}"
            )
        if not 0.0 <= float(self.llm_judge_band) <= 1.0:
            raise ContextError(f"context field 'llm_judge_band' must be in [0, 1], got {self.llm_judge_band!r}")
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ContextError(f"context field 'temperature' must be in [0, 2], got {self.temperature!r}")
        choices = {
            "keyword_method": ("llm", "lexical", "off"),
            "rerank_method": ("fusion", "llm", "http", "off"),
            "review_mode": ("off", "failed", "all"),
            "relevance_refinement": ("extractive", "llm"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ContextError(f"context field {name!r} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.rerank_method == "http" and not self.rerank_url:
            raise ContextError("context field 'rerank_url' is required when rerank_method is 'http'")
        if not isinstance(self.metadata_filter, dict):
            raise ContextError(f"context field 'metadata_filter' must be an object, got {self.metadata_filter!r}")
        check_collection(self.collection)
        unknown = set(self.refine_prompts) - {"specificity", "faithfulness", "relevance"}
        if unknown:
            raise ContextError(f"context field 'refine_prompts' has unknown principles: {sorted(unknown)}")

    def model_for(self, role: Literal["refiner", "answer", "judge"]) -> str:
        """The model spec a role uses: its own if set, else the shared chat_model."""
        own = {"refiner": self.refiner_model, "answer": self.answer_model, "judge": self.judge_model}[role]
        return own or self.chat_model


def apply_env_fallbacks(settings: Any) -> None:
    """Fields still at their default take REGROUND_<FIELD> from the environment (explicit values win)."""
    for f in fields(settings):
        env_value = os.environ.get(ENV_PREFIX + f.name.upper())
        if env_value is not None and getattr(settings, f.name) == _default_of(f):
            setattr(settings, f.name, _parse_env(f.name, env_value, getattr(settings, f.name)))


def check_collection(collection: str) -> None:
    """The store's naming rule, raised as a ContextError so Studio shows it before any run starts."""
    from reground.tools.store import collection_name_problem

    problem = collection_name_problem(str(collection))
    if problem:
        raise ContextError(f"context field 'collection': {problem}")


def _default_of(f: Any) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def _parse_env(name: str, raw: str, current: Any) -> Any:
    try:
        if current is None:  # the one optional field, groundedness_threshold, is a float
            return float(raw)
        if isinstance(current, bool):
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        if isinstance(current, int):
            return int(raw)
        if isinstance(current, float):
            return float(raw)
        if isinstance(current, dict):
            value = json.loads(raw)
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
            return value
    except ValueError as exc:
        raise ContextError(f"environment variable {ENV_PREFIX}{name.upper()}={raw!r}: {exc}") from exc
    return raw
