"""The LLM groundedness judge runs only when the cheap signals land near the threshold (the old test
forced the judge with a band of 1.0, so the band itself was untested)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from reground.graph.builder import build_graph, run_config
from reground.nodes.context import Context

from reground.testing.fake_chat import ScriptedChatModel

QUESTION = "How many days of annual leave do full-time employees get?"
GROUNDED = "Full-time employees in Germany receive 30 working days of paid annual leave per calendar year [1]."
BAND = 0.05


def _draft(model: ScriptedChatModel, store: Any, context: Context) -> dict[str, Any]:
    """The first draft as the groundedness check left it (refinement and re-grounding off: one check only)."""
    # The written answer's check (an extracted answer is quoted verbatim, grounded by construction, never judged).
    context = context.with_(
        use_principle_refinement=False,
        groundedness={"max_reground_attempts": 0},
        refinement={"quote_when_unchecked": False},
        answer_style="write",
    )
    graph = build_graph(chat_model=model, store=store, checkpointer=InMemorySaver())
    config = run_config(context, configurable={"thread_id": "t"})
    graph.invoke({"messages": [{"role": "user", "content": QUESTION}]}, config=config, context=context)
    return dict(graph.get_state(config).values["draft"])


@pytest.fixture
def cheap(hr_store: Any, hr_store_dir: str) -> float:
    """The cheap signals' score of the grounded answer (judge off)."""
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"use_llm_groundedness_judge": False},
    )
    draft = _draft(ScriptedChatModel(script={"answer": [GROUNDED]}), hr_store, context)
    assert "llm_judge" not in draft["groundedness_parts"]
    return float(draft["groundedness"])


@pytest.mark.parametrize(("offset", "judged"), [(BAND - 0.01, True), (-(BAND - 0.01), True), (BAND + 0.02, False)])
def test_the_judge_runs_inside_the_band_only(
    offset: float, judged: bool, cheap: float, hr_store: Any, hr_store_dir: str
) -> None:
    threshold = min(1.0, max(0.0, cheap - offset))
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"threshold": threshold, "llm_judge_band": BAND},
    )
    model = ScriptedChatModel(script={"answer": [GROUNDED]})
    draft = _draft(model, hr_store, context)
    assert model.calls_for("groundedness") == int(judged), (cheap, threshold)
    assert ("llm_judge" in draft["groundedness_parts"]) == judged


def test_inside_the_band_the_judges_claims_lower_the_score(cheap: float, hr_store: Any, hr_store_dir: str) -> None:
    context = Context(
        collection="test-hr",
        data_dir=hr_store_dir,
        groundedness={"threshold": cheap - 0.01, "llm_judge_band": BAND},
    )
    verdict = '{"unsupported_claims": ["30 working days per calendar year"]}'
    model = ScriptedChatModel(script={"answer": [GROUNDED], "groundedness": [verdict]})
    draft = _draft(model, hr_store, context)
    assert draft["unsupported_claims"] == ["30 working days per calendar year"]
    assert draft["groundedness_parts"]["llm_judge"] == 0.0 and draft["groundedness"] < cheap
