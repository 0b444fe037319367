"""Evaluation, by job: `runs/` measure answers and passages, `train/` fit what ships in the package, `perf/` time and
size it, `studies/` measure designs that were not shipped, `data/` loads, generates and holds the evaluation data;
`metrics/` (evaluate modules loaded by path), `records.py` and `ranking.py` are shared by them."""
