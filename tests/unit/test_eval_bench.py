"""The benchmarks find the demo corpus where the installed package has it, not beside the source tree."""

from __future__ import annotations

from reground.evals.perf import bench

from reground.demo import demo_corpus_path


def test_the_benchmark_reads_the_demo_corpus_the_package_installs() -> None:
    assert demo_corpus_path() == bench.DEMO_CORPUS
    assert bench.DEMO_CORPUS.is_file()
