"""The wheel installs everything under `reground.*` and nothing with a generic top-level name."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_wheel_puts_everything_under_the_reground_package(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(tmp_path.glob("reground-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top_levels = {name.split("/")[0] for name in names}
    assert top_levels == {"reground", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, (
        top_levels
    )
    for expected in (
        "reground/__init__.py",
        "reground/cli.py",
        "reground/graph/builder.py",
        "reground/graph/context.py",
        "reground/nodes/answer.py",
        "reground/tools/store.py",
        "reground/prompts/answer.py",
        "reground/evals/metrics/rouge/rouge.py",
        "reground/data/hr_policies.jsonl",
    ):
        assert expected in names, f"{expected} missing from the wheel"
    assert not any(name.startswith("tests/") for name in names)


def test_editable_install_imports_from_the_repository_folders() -> None:
    import reground.graph.builder as builder
    import reground.tools.signals.scoring as scoring

    assert Path(builder.__file__).resolve() == ROOT / "graph" / "builder.py"
    assert Path(scoring.__file__).resolve() == ROOT / "tools" / "signals" / "scoring.py"
