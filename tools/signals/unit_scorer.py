"""The unit scorer: a cross-encoder that reads the question and an answer unit together, learned on developer docs.

The unit ranker's other inputs (signals/units.py) are cosines and word overlaps computed apart: they cannot see that
"keep the container from running as root" is answered by a `USER app` line. The scorer is the reader's MiniLM
cross-encoder body (adapters/cross_encoder.py: [CLS] question [SEP] unit [SEP], one pair a call) with a head fitted
on (question, unit) pairs of developer documentation (evals/train/unit_scorer.py): the techdocs sets' turns (a unit
holding the turn's `must_contain` against the other units of its candidates) and weak pairs from other
documentation sets. Its logit is one input of the unit ranker when the ranker's weights name it.

int8 ONNX (the reader's body, a float head). None ships: refitting only the head on 2 CPU cores did not lift the
eight-set leave-one-corpus-out ranking (docs/experiments.md), so the shipped unit ranker does not name it and it is
never loaded. A scorer is read from the `REGROUND_DOC_MODELS` folder (a leave-one-corpus-out fold's, or one fitted on
your documentation); a package file would be sha256-pinned here. Never trained at run time.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from reground.tools.adapters.cross_encoder import CrossEncoderReader
from reground.tools.adapters.embeddings import MINILM_TOKENIZER, file_sha256, packaged_file
from reground.tools.tuning.models import READER

UNIT_SCORER_FILE = "unit_scorer-int8.onnx"
UNIT_SCORER_SHA256 = ""  # no scorer ships (see above): a package file would fail this check
SCORER_FEATURE = "scorer"  # its name among the unit ranker's inputs
DOC_MODELS_ENV = "REGROUND_DOC_MODELS"  # a folder of documentation models to use instead of the shipped ones


def unit_scorer_path() -> Path:
    """The scorer's file: the `REGROUND_DOC_MODELS` folder's (a fold's; not pinned) or the shipped one (pinned)."""
    override = os.environ.get(DOC_MODELS_ENV)
    path = (
        Path(override) / UNIT_SCORER_FILE
        if override
        else Path(str(resources.files("reground") / "data" / "units" / UNIT_SCORER_FILE))
    )
    if not path.is_file():
        raise FileNotFoundError(
            f"the unit scorer's weights are missing ({path}), but the unit ranker reads its score: reinstall "
            f"reground or put {UNIT_SCORER_FILE} in {DOC_MODELS_ENV}"
        )
    if not override and file_sha256(path) != UNIT_SCORER_SHA256:
        raise ValueError(f"the unit scorer at {path.name} does not match its pinned sha256")
    return path


@lru_cache(maxsize=1)
def shipped_unit_scorer() -> CrossEncoderReader:
    """The scorer (loaded once per process): the reader's adapter over the scorer's graph, its logit the scorer's."""
    sessions = max(1, min(READER.sessions, os.cpu_count() or 1))
    return CrossEncoderReader(unit_scorer_path(), packaged_file(*MINILM_TOKENIZER), sessions=sessions)
