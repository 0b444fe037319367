"""The judge (tools/signals/judge.py): its features, its shipped weights, and the three bands triage decides with."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from reground.nodes.context import Context, ContextError
from reground.nodes.triage import judged_decision
from reground.tools.signals.evidence import Evidence
from reground.tools.signals.judge import (
    JUDGE_SHA256,
    SCALAR_NAMES,
    TURN_FEATURE_NAMES,
    JudgeModel,
    scalar_features,
    sentence_probabilities,
    shipped_judge,
)


def view(text: str, order: int, *, passage: int = 1, score: float = 0.5) -> Evidence:
    return Evidence(text=text, passage=passage, order=order, score=score, lexical=0.3, dense=0.4)


def column(rows: np.ndarray, name: str) -> list[float]:
    return [float(v) for v in rows[:, SCALAR_NAMES.index(name)]]


def test_features_say_what_a_question_asks_for_and_what_a_sentence_holds() -> None:
    sentences = [view("Each class costs 40 USD per person.", 0), view("The following classes are offered:", 1)]
    rows = scalar_features("How much is each class?", sentences, has_dialogue=False)
    assert rows.shape == (2, len(SCALAR_NAMES))
    assert column(rows, "asks_amount") == [1.0, 1.0]
    assert column(rows, "asks_place") == [0.0, 0.0]
    assert column(rows, "holds_money") == [1.0, 0.0]
    assert column(rows, "ends_colon") == [0.0, 1.0], "a sentence that announces a list is not its content"


def test_a_previous_reply_said_again_is_a_feature() -> None:
    sentences = [view("You can carry over five days.", 0), view("Days expire on 31 March.", 1)]
    rows = scalar_features(
        "And until when?", sentences, has_dialogue=True, previous_reply="You can carry over five days."
    )
    assert column(rows, "repeats_previous")[0] == pytest.approx(1.0)
    assert column(rows, "repeats_previous")[1] < 0.5


def tiny_model(inputs: int) -> JudgeModel:
    rng = np.random.default_rng(0)
    heads = len(TURN_FEATURE_NAMES)
    return JudgeModel(
        mean=np.zeros(inputs, dtype=np.float32),
        scale=np.ones(inputs, dtype=np.float32),
        w1=rng.standard_normal((inputs, 4)).astype(np.float32),
        b1=np.zeros(4, dtype=np.float32),
        w2=rng.standard_normal(4).astype(np.float32),
        b2=0.1,
        head_w=np.ones(heads, dtype=np.float32),
        head_b=-1.0,
        head_mean=np.zeros(heads, dtype=np.float32),
        head_scale=np.ones(heads, dtype=np.float32),
    )


def test_weights_round_trip_and_a_changed_file_is_refused(tmp_path: Path) -> None:
    model = tiny_model(len(SCALAR_NAMES) + 6)
    path = tmp_path / "judge.npz"
    digest = model.save(path)
    loaded = JudgeModel.load(path, sha256=digest)
    inputs = np.random.default_rng(1).standard_normal((5, len(SCALAR_NAMES) + 6)).astype(np.float32)
    np.testing.assert_allclose(loaded.sentence_logits(inputs), model.sentence_logits(inputs), rtol=1e-6)
    probabilities, answerable = sentence_probabilities(loaded, inputs, coverage=0.5)
    assert len(probabilities) == 5 and all(0.0 <= p <= 1.0 for p in probabilities) and 0.0 <= answerable <= 1.0
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(ValueError, match="sha256"):
        JudgeModel.load(path, sha256=digest)


def test_a_turn_without_sentences_is_not_answerable() -> None:
    model = tiny_model(len(SCALAR_NAMES) + 6)
    assert sentence_probabilities(model, np.zeros((0, len(SCALAR_NAMES) + 6), dtype=np.float32), 1.0) == ([], 0.0)


def test_the_shipped_weights_are_the_pinned_ones_and_fit_the_features() -> None:
    from importlib import resources

    path = Path(str(resources.files("reground") / "data" / "judge" / "judge.npz"))
    assert hashlib.sha256(path.read_bytes()).hexdigest() == JUDGE_SHA256
    model = shipped_judge()
    vector = 384  # MiniLM's width: the question and dialogue products follow the scalar features
    assert model.mean.shape == (len(SCALAR_NAMES) + vector,)
    assert model.head_w.shape == (len(TURN_FEATURE_NAMES),)
    card = path.with_name("MODEL_CARD.md").read_text()
    assert JUDGE_SHA256 in card and "reground judge train" in card


@dataclass
class FakeStats:
    notes: list[str] = field(default_factory=list)


def env_with(**fields: Any) -> Any:
    return SimpleNamespace(context=Context(**fields), stats=FakeStats())


@pytest.mark.parametrize(("answerable", "decision"), [(0.95, "answer"), (0.5, "hedge"), (0.05, "abstain")])
def test_triage_decides_in_three_bands(answerable: float, decision: str) -> None:
    env = env_with(triage={"judge_hedge_threshold": 0.3, "judge_answer_threshold": 0.8})
    signals: dict[str, float] = {}
    assert judged_decision(answerable, signals, env) == decision
    assert signals == {"answerable": answerable, "answer_threshold": 0.8, "hedge_threshold": 0.3}
    assert env.stats.notes, "the decision is explained in the trace"


def test_a_hedge_band_upside_down_is_refused() -> None:
    with pytest.raises(ContextError, match="judge_hedge_threshold"):
        Context(
            triage={"judge_hedge_threshold": 0.9, "judge_answer_threshold": 0.5},
        )


def test_a_collection_embedded_by_another_model_reads_without_the_judge() -> None:
    """The judge's inputs are MiniLM products: a 256-dimension hash embedder's vectors would not fit (they crashed
    the turn); the reading falls back to the hand-made ranking and says so."""
    from langgraph.runtime import Runtime
    from reground.nodes.common import NodeEnv, evidence_for
    from reground.tools.services import Services
    from reground.tools.types import Passage

    from tests.unit.test_retrieval import CHUNKS, FakeStore

    services = Services(store=FakeStore(list(CHUNKS)))
    env = NodeEnv(services=services, runtime=Runtime(context=Context(collection="docs")))
    assert services.judge(env.context) is None
    passages = [Passage(**{**chunk, "score": 1.0}) for chunk in CHUNKS[:2]]
    reading = evidence_for({"question": "How many days of annual leave do I get?"}, passages, env)
    assert reading.evidence and reading.answerable is None
    assert any("the judge reads MiniLM vectors" in note for note in env.stats.notes)
