"""A cross-encoder reached over HTTP (Cohere / Jina / TEI style /rerank endpoints)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from reground.tools.errors import ModelError
from reground.tools.tuning.models import ENDPOINTS


class RerankEndpointError(ModelError, RuntimeError):
    """The rerank endpoint failed or answered in a shape we do not know; the message names the URL."""


def rerank_over_http(
    url: str, query: str, texts: Sequence[str], *, timeout_s: float = ENDPOINTS.rerank_timeout_s
) -> list[float]:
    """Relevance score per text, in the given order.

    Sends {"query", "documents", "texts"} (Cohere/Jina read `documents`, TEI reads `texts`) and reads
    either {"results": [{"index", "relevance_score"}]} or a list of {"index", "score"}.
    """
    try:
        response = httpx.post(
            url, json={"query": query, "documents": list(texts), "texts": list(texts)}, timeout=timeout_s
        )
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise RerankEndpointError(f"rerank endpoint {url} failed: {exc}") from exc
    items = body.get("results", body) if isinstance(body, dict) else body
    scores = [0.0] * len(texts)
    try:
        for item in items:
            index = int(item["index"])
            scores[index] = float(item.get("relevance_score", item.get("score", 0.0)))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RerankEndpointError(
            f"rerank endpoint {url} answered in an unknown shape: {str(body)[: ENDPOINTS.reply_chars_shown]}"
        ) from exc
    return scores
