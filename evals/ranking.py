"""Ranking metrics (recall@k, MRR) as pure functions; metric modules and eval runs wrap these."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

DEFAULT_KS = (1, 3, 5, 10)


def first_relevant_rank(ranking: Sequence[str], gold: str | Collection[str]) -> int | None:
    """1-based rank of the first relevant item in the ranking, None if it is absent."""
    wanted = {gold} if isinstance(gold, str) else set(gold)
    for rank, item in enumerate(ranking, start=1):
        if item in wanted:
            return rank
    return None


def recall_at_k(ranks: Iterable[int | None], k: int) -> float:
    """Share of queries whose first relevant item is ranked ≤ k (one relevant item counts as a hit)."""
    ranks = list(ranks)
    if not ranks:
        return 0.0
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mean_reciprocal_rank(ranks: Iterable[int | None]) -> float:
    """Mean of 1/rank of the first relevant item (0 when it is absent from the ranking)."""
    ranks = list(ranks)
    if not ranks:
        return 0.0
    return sum(1.0 / r for r in ranks if r) / len(ranks)


def ranking_metrics(
    rankings: Sequence[Sequence[str]],
    golds: Sequence[str | Collection[str]],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """{"recall@k": ..., "mrr": ...} over paired rankings and gold ids (or sets of gold ids)."""
    if len(rankings) != len(golds):
        raise ValueError(f"{len(rankings)} rankings but {len(golds)} gold entries")
    ranks = [first_relevant_rank(r, g) for r, g in zip(rankings, golds, strict=True)]
    return metrics_from_ranks(ranks, ks)


def metrics_from_ranks(ranks: Sequence[int | None], ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    out = {f"recall@{k}": recall_at_k(ranks, k) for k in ks}
    out["mrr"] = mean_reciprocal_rank(ranks)
    return out
