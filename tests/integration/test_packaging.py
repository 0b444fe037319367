"""The wheel installs everything under `reground.*` and nothing with a generic top-level name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# Source folder -> its place in the wheel (pyproject.toml's package-dir).
PACKAGE_DIRS = {"reground": "reground", "graph": "reground/graph", "nodes": "reground/nodes", "tools": "reground/tools"}
PACKAGE_DIRS |= {"prompts": "reground/prompts", "evals": "reground/evals"}


@pytest.mark.integration
def test_wheel_puts_everything_under_the_reground_package(tmp_path: Path) -> None:
    """Built from a copy of the tracked files, so a stale `build/` left in the checkout cannot stand in for a
    package the list in pyproject.toml forgot: every tracked module of every layer must be in the wheel."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    source = tmp_path / "source"
    for name in tracked:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    wheel = next(tmp_path.glob("reground-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    top_levels = {name.split("/")[0] for name in names}
    assert top_levels == {"reground", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, (
        top_levels
    )
    modules = [
        f"{PACKAGE_DIRS[name.split('/')[0]]}/{name.split('/', 1)[1]}"
        for name in tracked
        if name.endswith(".py") and name.split("/")[0] in PACKAGE_DIRS and "/" in name
    ]
    missing = [m for m in modules if m not in names]
    assert not missing, f"missing from the wheel (add their packages to pyproject.toml): {missing[:10]}"
    for expected in (
        "reground/data/hr_policies.jsonl",
        "reground/data/judge/judge.npz",
        "reground/data/judge/reader-int8.onnx",
        "reground/web/static/index.html",  # the chat page's assets (package data)
        "reground/web/static/app.js",
    ):
        assert expected in names, f"{expected} missing from the wheel"
    assert not any(name.startswith("tests/") for name in names)


def test_editable_install_imports_from_the_repository_folders() -> None:
    import reground.graph.builder as builder
    import reground.tools.signals.scoring as scoring

    assert Path(builder.__file__).resolve() == ROOT / "graph" / "builder.py"
    assert Path(scoring.__file__).resolve() == ROOT / "tools" / "signals" / "scoring.py"
