"""The groundedness threshold in force: explicit value, environment, calibration file, built-in default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reground.nodes.context import DEFAULT_GROUNDEDNESS_THRESHOLD, Context, ContextError, IngestContext


def write_calibration(data_dir: Path, value: float) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "calibration.json").write_text(json.dumps({"groundedness_threshold": value}))


def test_calibration_file_sets_the_threshold_when_nothing_else_does(tmp_path: Path) -> None:
    write_calibration(tmp_path, 0.37)
    context = Context(data_dir=str(tmp_path))
    assert context.groundedness.threshold is None  # constructing a context reads no file (server event loop)
    assert context.resolved_groundedness_threshold() == pytest.approx(0.37)


def test_without_calibration_the_builtin_default_holds(tmp_path: Path) -> None:
    assert Context(data_dir=str(tmp_path)).resolved_groundedness_threshold() == DEFAULT_GROUNDEDNESS_THRESHOLD


def test_explicit_and_environment_values_win_over_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_calibration(tmp_path, 0.37)
    assert (
        Context(
            data_dir=str(tmp_path),
            groundedness={"threshold": 0.8},
        ).resolved_groundedness_threshold()
        == 0.8
    )
    monkeypatch.setenv("REGROUND_GROUNDEDNESS__THRESHOLD", "0.25")
    assert Context(data_dir=str(tmp_path)).resolved_groundedness_threshold() == 0.25


def test_a_threshold_outside_unit_interval_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match=r"'groundedness\.threshold'"):
        Context(
            data_dir=str(tmp_path),
            groundedness={"threshold": 1.5},
        )


# --- one typed, validated config ------------------------------------------------------------------


def test_an_explicit_value_wins_over_the_environment_even_when_it_equals_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REGROUND_TOP_N", "5")
    assert Context(top_n=3).top_n == 3  # 3 is the default: the old dataclass returned 5 here
    assert Context().top_n == 5, "the environment fills a field that was not given"
    assert Context(top_n=3).with_(models={"n_samples": 2}).top_n == 3, "a copy keeps the explicit value"
    assert Context().with_(models={"n_samples": 2}).top_n == 5, "a copy keeps the value the environment gave"


def test_a_groups_fields_fall_back_to_their_own_variables_and_explicit_values_still_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REGROUND_TRIAGE__JUDGE_ANSWER_THRESHOLD", "0.9")
    monkeypatch.setenv("REGROUND_TRIAGE", '{"reading_ratio": 0.7}')  # a whole group as JSON
    monkeypatch.setenv("REGROUND_RETRIEVAL__RRF_K", "30")  # a settings dataclass's field
    context = Context()
    assert (context.triage.judge_answer_threshold, context.triage.reading_ratio, context.retrieval.rrf_k) == (
        0.9,
        0.7,
        30,
    )
    given = Context(triage={"judge_answer_threshold": 0.8}, **{"retrieval.rrf_k": 20})
    assert (given.triage.judge_answer_threshold, given.triage.reading_ratio, given.retrieval.rrf_k) == (0.8, 0.7, 20)
    assert given.with_(top_n=4).triage.judge_answer_threshold == 0.8, "a copy keeps the group's explicit value"
    monkeypatch.setenv("REGROUND_TRIAGE__JUDGE_ANSWER_THRESHOLD", "2")
    with pytest.raises(ContextError, match=r"'triage.judge_answer_threshold'.*REGROUND_TRIAGE__JUDGE_ANSWER_THRESHOLD"):
        Context()


def test_with_changes_a_groups_named_fields_and_keeps_the_others() -> None:
    base = Context(triage={"reading_ratio": 0.7}, retrieval={"rrf_k": 30})  # type: ignore[arg-type]
    for changed in (
        base.with_(triage={"judge_answer_threshold": 0.9}, retrieval={"fusion": "rrf"}),
        base.with_(**{"triage.judge_answer_threshold": 0.9, "retrieval.fusion": "rrf"}),
    ):
        assert (changed.triage.judge_answer_threshold, changed.triage.reading_ratio) == (0.9, 0.7)
        assert (changed.retrieval.fusion, changed.retrieval.rrf_k) == ("rrf", 30)
    assert base.with_(triage=Context().triage).triage.reading_ratio == 0.8, "a group object replaces the group"
    with pytest.raises(ContextError, match=r"'triage.no_such_field'.*Extra inputs"):
        base.with_(**{"triage.no_such_field": 1})
    with pytest.raises(ContextError, match=r"'judge_answer_threshold'.*Extra inputs"):
        Context(judge_answer_threshold=0.9)  # type: ignore[call-arg]  # one name per setting: no flat alias


def test_environment_values_are_parsed_by_type_and_bad_ones_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGROUND_USE_REGROUND", "false")
    monkeypatch.setenv("REGROUND_GROUNDEDNESS__WEIGHTS", '{"k_precision": 1.0}')
    monkeypatch.setenv("REGROUND_RETRIEVAL", '{"fusion": "rrf", "rrf_k": 30}')
    context = Context()
    assert context.use_reground is False and context.groundedness.weights == {"k_precision": 1.0}
    assert (context.retrieval.fusion, context.retrieval.rrf_k, context.retrieval.chunk_k) == ("rrf", 30, 150)
    monkeypatch.setenv("REGROUND_TOP_N", "many")
    with pytest.raises(ContextError, match="REGROUND_TOP_N"):
        Context()
    monkeypatch.setenv("REGROUND_TOP_N", "0")
    with pytest.raises(ContextError, match=r"'top_n'.*REGROUND_TOP_N.*greater than or equal to 1"):
        Context()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"top_n": 0}, r"'top_n'.*greater than or equal to 1"),
        ({"groundedness": {"max_reground_attempts": -1}}, r"'groundedness.max_reground_attempts'.*greater than or "),
        ({"models.temperature": 2.5}, r"'models.temperature'.*less than or equal to 2"),
        ({"refinement": {"rewrite_below_margin": -0.1}}, r"'refinement.rewrite_below_margin'"),
        ({"keyword_method": "magic"}, r"'keyword_method'.*'llm', 'lexical' or 'off'"),
        ({"review_mode": "sometimes"}, r"'review_mode'"),
        (
            {"prompts": {"refine_prompts": {"brevity": "{answer}"}}},
            r"'prompts.refine_prompts.*'specificity', 'faithfulness' or 'relevance'",
        ),
        ({"rerank_method": "http"}, r"'models.rerank_url' is required"),
        (
            {"groundedness": {"support_low": 0.8, "support_high": 0.5}},
            r"'groundedness.support_low'.*below 'groundedness.support_high'",
        ),
        ({"triage": {"judge_hedge_threshold": 0.9}}, r"'triage.judge_hedge_threshold'.*not be above"),
        ({"top_nn": 3}, r"'top_nn'.*Extra inputs"),
    ],
)
def test_out_of_range_values_and_unknown_choices_are_one_line_errors_naming_the_field(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ContextError, match=message) as raised:
        Context(**values)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"prompts.answer_prompt": "Answer briefly."}, r"'prompts.answer_prompt'.*misses the placeholder \{question\}"),
        (
            {"prompts.answer_prompt": "{question} in {language}"},
            r"'prompts.answer_prompt'.*unknown placeholder \{language\}",
        ),
        ({"prompts.rerank_prompt": "Rank for {question"}, r"'prompts.rerank_prompt'.*literal braces"),
        ({"prompts.groundedness_prompt": "List claims of {0}"}, r"'prompts.groundedness_prompt'.*positional"),
        ({"prompts.reground_prompt": "{previous_query} only"}, r"'prompts.reground_prompt'.*\{question\}"),
        (
            {"prompts.refine_prompts": {"relevance": "Improve it."}},
            r"'prompts.refine_prompts'.*'relevance' prompt misses.*\{answer\}",
        ),
        ({"prompts.keywords_prompt": "Keywords for {question}"}, r"'prompts.keywords_prompt'.*sent as written"),
    ],
)
def test_prompts_with_a_missing_or_unknown_placeholder_are_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ContextError, match=message):
        Context(**values)  # type: ignore[arg-type]


def test_valid_custom_prompts_are_accepted_and_partial_refine_prompts_keep_the_defaults() -> None:
    from reground.prompts import refine as refine_prompts

    context = Context(
        prompts={
            "answer_prompt": "Reply to {question} in one sentence.",
            "keywords_prompt": 'Reply with JSON like {"keywords": ["a"]}.',
            "refine_prompts": {"relevance": "Make {answer} answer {question}."},
        },  # evidence and escalation are optional
        # JSON braces in a verbatim prompt are fine
    )
    assert context.prompts.refine_prompts["relevance"] == "Make {answer} answer {question}."
    assert context.prompts.refine_prompts["specificity"] == refine_prompts.PRINCIPLE_TASKS["specificity"]
    assert Context().prompts.answer_prompt.format(
        question="q", evidence="", escalation="e"
    )  # the defaults pass their check


def test_with_validates_and_the_context_is_immutable() -> None:
    context = Context(top_n=4)
    assert context.with_(top_n=2).top_n == 2 and context.top_n == 4
    with pytest.raises(ContextError, match="'top_n'"):
        context.with_(top_n=0)
    with pytest.raises(ValueError, match="frozen"):
        context.top_n = 7  # type: ignore[misc]


def test_the_schema_studio_renders_carries_descriptions_ranges_and_choices() -> None:
    from reground.graph.builder import graph

    schema = graph.get_context_jsonschema()
    assert schema is not None
    properties = schema["properties"]
    assert properties["top_n"]["minimum"] == 1 and properties["top_n"]["description"]
    assert properties["keyword_method"]["enum"] == ["llm", "lexical", "off"]
    assert len(properties) <= 30, "Studio's form keeps what a user changes at the top (at most 30 fields)"
    assert {"retrieval", "index", "models", "budgets", "triage", "evidence", "groundedness", "refinement"} <= set(
        properties
    )
    groups = schema["$defs"]
    assert groups["Budgets"]["properties"]["history_token_cap"]["description"]
    assert groups["ModelSettings"]["properties"]["sample_temperature"]["maximum"] == 2.0
    assert all(p.get("description") for p in properties.values()), "every field is described in Studio's form"


def test_the_shared_value_domains_bound_every_field_declared_with_them() -> None:
    schema = Context.model_json_schema()
    properties = {
        f"{group}.{name}": spec
        for group, definition in (
            ("models", "ModelSettings"),
            ("triage", "TriageSettings"),
            ("evidence", "EvidenceSettings"),
            ("groundedness", "GroundednessSettings"),
            ("refinement", "RefinementSettings"),
        )
        for name, spec in schema["$defs"][definition]["properties"].items()
    }
    bounds = {name: (spec.get("minimum"), spec.get("maximum")) for name, spec in properties.items()}
    assert (
        bounds["groundedness.llm_judge_band"]
        == bounds["triage.partial_coverage"]
        == bounds["refinement.rewrite_below_margin"]
        == (0.0, 1.0)
    )
    assert bounds["groundedness.support_low"] == bounds["groundedness.support_high"] == (-1.0, 1.0)
    assert bounds["models.temperature"] == bounds["models.sample_temperature"] == (0.0, 2.0)
    assert bounds["models.rewrite_max_tokens"] == bounds["models.judge_max_tokens"] == (8, None)
    assert bounds["evidence.answer_evidence"] == (0, None) and bounds["models.n_samples"] == (1, None)
    threshold = properties["groundedness.threshold"]["anyOf"][0]
    assert (threshold["minimum"], threshold["maximum"]) == (0.0, 1.0)
    for field, value in (
        ("triage.partial_coverage", 1.5),
        ("groundedness.support_high", -2.0),
        ("models.temperature", 2.5),
        ("models.n_samples", 0),
    ):
        with pytest.raises(ContextError, match=f"'{field}'"):
            Context(**{field: value})


def test_both_contexts_check_the_collection_name_and_describe_the_store_alike() -> None:
    for model in (Context, IngestContext):
        with pytest.raises(ContextError, match=r"'collection'.*invalid collection name 'x'"):
            model(collection="x")
    for name in ("data_dir", "chroma_url"):
        assert IngestContext.model_fields[name].description == Context.model_fields[name].description
        assert IngestContext.model_fields[name] is not Context.model_fields[name]


def test_tunables_are_fields_with_the_old_defaults_and_the_recursion_limit_has_one_source() -> None:
    from reground.graph import builder
    from reground.tools.retrieval.search import RetrievalSettings

    context = Context()
    assert (context.budgets.history_token_cap, context.models.sample_temperature) == (3000, 0.7)
    assert (context.groundedness.support_low, context.groundedness.support_high) == (0.35, 0.75)
    assert (context.models.judge_max_tokens, context.models.keywords_max_tokens) == (120, 60)
    assert context.models.rewrite_max_tokens == 60  # the judge's thresholds: test_figures_from_results.py
    assert context.retrieval == RetrievalSettings()
    assert builder.graph.config is not None
    assert builder.graph.config["recursion_limit"] == context.recursion_limit == builder.DEFAULT_RECURSION_LIMIT
    assert builder.run_config(context.with_(recursion_limit=90))["recursion_limit"] == 90


def test_the_retriever_is_built_with_the_contexts_retrieval_settings(tmp_path: Path) -> None:
    from reground.tools.services import Services

    class FakeStore:
        embedder = None

        def count(self) -> int:
            return 1

    store = FakeStore()
    services = Services(store=store)  # type: ignore[arg-type]
    rrf = Context(retrieval={"fusion": "rrf"})  # type: ignore[arg-type]
    assert services.retriever(rrf).settings.fusion == "rrf"
    assert services.retriever(Context()).settings.fusion == "score"
    assert services.retriever(rrf) is services.retriever(rrf.with_(top_n=4)), "one retriever per settings"


# --- the per-turn reset comes from the state's declared defaults --------------------------------------------


def test_every_state_key_is_either_reset_per_turn_or_declared_as_carried() -> None:
    from typing import get_type_hints

    from reground.nodes.state import CARRIED_ACROSS_TURNS, PER_TURN_DEFAULTS, State

    keys = set(get_type_hints(State))
    assert keys == set(PER_TURN_DEFAULTS) | CARRIED_ACROSS_TURNS
    assert not set(PER_TURN_DEFAULTS) & CARRIED_ACROSS_TURNS


def test_start_turn_resets_every_per_turn_key_left_by_the_previous_turn() -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.start_turn import start_turn
    from reground.nodes.state import PER_TURN_DEFAULTS
    from reground.tools.services import Services

    from reground.testing.fake_chat import ScriptedChatModel

    leftovers: dict[str, object] = {
        "keywords": ["old"],
        "candidates": [{"text": "old"}],
        "passages": [{"text": "old"}],
        "judgements": [{"number": 1}],
        "draft": {"text": "old answer"},
        "draft_checked": True,
        "reground_attempts": 2,
        "refine_iterations": 1,
        "review": {"action": "approve"},
        "query_mode": "rewritten",
        "notices": ["old notice"],
    }
    messages = [HumanMessage("How much leave?"), AIMessage("30 days."), HumanMessage("Can I carry it over?")]
    env = NodeEnv(services=Services(chat_model=ScriptedChatModel()), runtime=Runtime(context=Context()))
    update = start_turn({"messages": messages, **leftovers}, env)  # type: ignore[typeddict-item]
    assert set(update) == set(PER_TURN_DEFAULTS)
    for key in leftovers:
        assert update[key] == PER_TURN_DEFAULTS[key], key
    assert update["question"] == update["standalone_question"] == "Can I carry it over?"
    assert update["history"] == [{"role": "user", "text": "How much leave?"}, {"role": "assistant", "text": "30 days."}]


def test_start_turn_caps_the_history_at_the_contexts_history_token_cap() -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv
    from reground.nodes.start_turn import start_turn
    from reground.tools.services import Services
    from reground.tools.text.tokens import count_tokens

    from reground.testing.fake_chat import ScriptedChatModel

    long_reply = " ".join(["The policy grants thirty days of paid leave per year."] * 20)
    messages = [HumanMessage("How much leave?"), AIMessage(long_reply), HumanMessage("And sick leave?")]
    env = NodeEnv(
        services=Services(chat_model=ScriptedChatModel()),
        runtime=Runtime(context=Context(budgets={"history_token_cap": 40})),
    )
    update = start_turn({"messages": messages}, env)
    assert sum(count_tokens(turn["text"]) for turn in update["history"]) <= 40
    assert any("history cut to the last 40 tokens" in note for note in env.stats.notes)


def test_the_search_index_settings_reach_the_store_from_the_context(hr_store_dir: str) -> None:
    from reground.tools.services import Services

    services = Services(check_reachable=False)
    exact = services.passage_store(Context(collection="test-hr", data_dir=hr_store_dir, index={"dense": "exact"}))
    hnsw = services.passage_store(Context(collection="test-hr", data_dir=hr_store_dir, index={"dense": "hnsw"}))
    assert exact is not hnsw, "stores are cached per index setting"
    assert [getattr(s, "index", s).dense_mode for s in (exact, hnsw)] == ["exact", "hnsw"]
    with pytest.raises(ContextError, match="index"):
        Context(index={"dense": "faiss"})
