"""The written-reply measure reads the model's code claims, not reground's own caution line."""

from __future__ import annotations

from reground.evals.runs.code_claims import claimed_code
from reground.prompts.injection import CAUTION


def test_a_claim_the_passages_lack_counts_and_the_caution_line_does_not() -> None:
    caution = CAUTION.format(reasons="evil.example.xyz is not on one of this collection's trusted domains (acme.io)")
    row = {
        "question": "How do I add a dev dependency?",
        "history": [],
        "passages": [{"text": "Run `uv add --dev pytest` to add it to the dev group."}],
        "answer": f"{caution}\nRun `uv add --dev pytest`.",
    }
    assert claimed_code(row) == []
    row["answer"] = "Run `uv install --dev pytest`."
    assert claimed_code(row) != []
