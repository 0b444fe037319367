"""Read time uses the flags ingest stored where the chunk's mark still holds (signals/injection_screen.py), and the
result is what flagging again gives: the same passages, flags, trace and per-sentence decisions, on every chunk of
both injection suites and the demo corpus. A stale, copied or forged mark is never trusted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reground.tools.signals import injection, injection_screen
from reground.tools.signals.contacts import document_domain_of
from reground.tools.signals.injection import (
    FLAGS_KEY,
    _sentence_flags,
    answerable_evidence,
    flag_passages,
    flag_sentence,
    passage_flags,
    split_sentences,
)
from reground.tools.signals.injection_screen import SCREEN_KEY, screen_mark
from reground.tools.stores.ingest import flagged_chunks
from reground.tools.text.loaders import load_paths

REPO = Path(__file__).resolve().parents[2]
CORPORA = (
    REPO / "evals" / "data" / "injection_a" / "docs.jsonl",
    REPO / "evals" / "data" / "injection_b" / "docs.jsonl",
    REPO / "reground" / "data" / "hr_policies.jsonl",
)


@pytest.fixture(autouse=True)
def _forget_stored_flags() -> Iterator[None]:
    """Each test starts with no stored flags remembered (a planted flag below must not outlive its test)."""
    injection._STORED_PASSAGES.clear()
    injection._CLEAN_SENTENCES.clear()
    yield
    injection._STORED_PASSAGES.clear()
    injection._CLEAN_SENTENCES.clear()


def _chunks() -> Iterator[dict[str, Any]]:
    docs, errors = load_paths(CORPORA)
    assert docs and not errors
    for doc in docs:
        for chunk in flagged_chunks(doc, 160):
            yield {**chunk, "title": doc.title}


def _unmarked(passage: dict[str, Any]) -> dict[str, Any]:
    """The passage as a store without the mark gives it: the same text and stored flags, flagged again at read."""
    return {**passage, "metadata": {k: v for k, v in passage["metadata"].items() if k != SCREEN_KEY}}


@pytest.mark.parametrize("marked", [True, False])
def test_read_time_flags_equal_with_and_without_the_ingest_mark(marked: bool) -> None:
    chunks = list(_chunks())
    assert all(SCREEN_KEY in c["metadata"] for c in chunks)
    assert sum(FLAGS_KEY in c["metadata"] for c in chunks) >= 100  # the suites' poisoned chunks are in
    read = chunks if marked else [_unmarked(c) for c in chunks]
    passages, trace = flag_passages(read)
    again, again_trace = flag_passages([_unmarked(c) for c in chunks])
    assert passages == again and trace == again_trace
    assert not any(SCREEN_KEY in p["metadata"] for p in passages)  # the read's flags are not the ingest's
    for passage in passages:
        assert passage_flags(passage) == passage_flags(_unmarked(passage))
        domain = document_domain_of(passage)
        for sentence in split_sentences(passage["text"]):  # a sentence known clean from the mark is clean
            assert flag_sentence(sentence, document_domain=domain) == _sentence_flags.__wrapped__(sentence, domain)


def test_evidence_kept_is_the_same_with_the_mark() -> None:
    from reground.tools.signals.evidence import Evidence

    chunks = [c for c in _chunks() if FLAGS_KEY in c["metadata"]][:40]
    for chunk in chunks:
        (marked,), _ = flag_passages([chunk])
        (plain,), _ = flag_passages([_unmarked(chunk)])
        evidence = [Evidence(s, 1, 0.0, 0.0, 0.0) for s in split_sentences(chunk["text"])]
        assert answerable_evidence(evidence, [marked]) == answerable_evidence(evidence, [plain])


def _with_stored(text: str, stored: list[str], mark: str) -> dict[str, Any]:
    return {
        "chunk_id": "c1",
        "doc_id": "d1",
        "title": "Opening hours",
        "url": "https://www.example.org/hours",
        "text": text,
        "metadata": {FLAGS_KEY: stored, SCREEN_KEY: mark},
    }


TEXT = "The library opens at 9 am.\nIt closes at 5 pm on Fridays, and at 8 pm otherwise."
PLANTED = ["credentials: The library opens at 9 am."]  # what no rule says of this text: only a stored flag


def test_a_holding_mark_is_trusted() -> None:
    passage = _with_stored(TEXT, PLANTED, screen_mark(TEXT, "example.org"))
    (read,), trace = flag_passages([passage])
    assert read["metadata"][FLAGS_KEY] == PLANTED and trace


@pytest.mark.parametrize(
    "mark",
    [
        screen_mark("The library opens at 10 am.", "example.org"),  # copied from other text
        screen_mark(TEXT, "example.com"),  # another domain
        screen_mark(TEXT, None),
        "forged",
        "",
    ],
)
def test_a_mark_that_does_not_hold_is_not_trusted(mark: str) -> None:
    (read,), trace = flag_passages([_with_stored(TEXT, PLANTED, mark)])
    assert FLAGS_KEY not in read["metadata"] and SCREEN_KEY not in read["metadata"] and not trace


def test_changed_rules_make_every_mark_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    mark = screen_mark(TEXT + " ", "example.org")
    monkeypatch.setattr(injection_screen, "rules_fingerprint", lambda: "other rules")
    (read,), trace = flag_passages([_with_stored(TEXT + " ", PLANTED, mark)])
    assert FLAGS_KEY not in read["metadata"] and not trace


# What injection.py imports for the optional model check, not for the rules: not in the fingerprint.
MODEL_CHECK_ONLY = {
    "reground.prompts",
    "reground.prompts.injection",
    "reground.prompts.fence",
    "reground.tools.adapters.chat",
    "reground.tools.adapters.structured",
    "reground.tools.tuning.models",
}


def test_the_fingerprint_covers_every_module_the_rules_import() -> None:
    """A module the flagging code comes to import must join RULE_MODULES, or an edit to it would leave stale
    stored flags trusted."""
    import ast
    import importlib

    for name in injection_screen.RULE_MODULES:
        source = Path(str(importlib.import_module(name).__file__)).read_text()
        imported = {
            node.module
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("reground")
        }
        assert imported - MODEL_CHECK_ONLY <= set(injection_screen.RULE_MODULES), name
    assert len(injection_screen.rules_fingerprint()) == len(screen_mark("text", None))


def test_ingest_marks_only_flags_it_computed() -> None:
    from reground.tools.signals.injection import flag_metadata

    own = flag_metadata({FLAGS_KEY: ["credentials: x"], SCREEN_KEY: "forged"}, TEXT, "https://www.example.org/")
    assert SCREEN_KEY not in own  # the document brought flags of its own that stay: read time flags again
    forged = flag_metadata({SCREEN_KEY: "forged"}, TEXT, "https://www.example.org/")
    assert forged[SCREEN_KEY] == screen_mark(TEXT, "example.org")


def test_a_store_s_chunks_carry_the_mark_and_what_reads_them_drops_it(hr_store: Any) -> None:
    from reground.tools.retrieval.langchain import RegroundRetriever

    chunks = hr_store.all_chunks()
    assert chunks and all(
        c["metadata"].get(SCREEN_KEY) == screen_mark(c["text"], document_domain_of(c)) for c in chunks
    )
    passages, _ = flag_passages(chunks)
    docs = RegroundRetriever(store=hr_store, k=3).invoke("How do I report sick?")
    assert docs and not any(SCREEN_KEY in p["metadata"] for p in passages)
    assert not any(SCREEN_KEY in d.metadata for d in docs)


def test_the_mark_is_no_metadata_field_to_filter_on(hr_store: Any) -> None:
    from reground.tools.stores.scope import scope_tokens

    assert SCREEN_KEY not in hr_store.metadata_fields()
    chunk = hr_store.all_chunks()[0]
    assert not any(SCREEN_KEY in token for token in scope_tokens(chunk["metadata"]))
