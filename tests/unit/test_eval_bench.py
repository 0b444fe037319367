"""The benchmarks find the demo corpus where the installed package has it, not beside the source tree."""

from __future__ import annotations

from reground.demo import demo_corpus_path
from reground.evals import bench


def test_the_benchmark_reads_the_demo_corpus_the_package_installs() -> None:
    assert bench.DEMO_CORPUS == demo_corpus_path()
    assert bench.DEMO_CORPUS.is_file()
