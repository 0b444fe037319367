"""A collection's trusted domains: where its documents come from, learned at ingest, editable by the user.

A poisoned page can name a look-alike contact on its own look-alike domain ("payroll@northwind-hr.example" on a
page served from northwind-hr.example), so "a contact outside the page's own domain" lets it through.
What a collection trusts is what most of its documents share: the domains its documents are served from (their
url or `domain`/`site` metadata) and the domains of the addresses and links many of them give. One page cannot
make its domain trusted; the user can add or remove any (`reground collections NAME --trust/--untrust DOMAIN`).

Kept per collection in `<data_dir>/collection_settings/<collection>.json` (the data dir of the store, else
$REGROUND_DATA_DIR): a small record per document (its domain and the domains it names), so an ingest that changes
some documents updates the counts without reading the others, and the user's edits. Written atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reground.tools.adapters.paths import data_dir as default_data_dir
from reground.tools.signals.contacts import contacts, document_domain_of, host_of, is_site, registrable_domain
from reground.tools.signals.injection import FLAGS_KEY, split_sentences
from reground.tools.signals.sensitive import Trust
from reground.tools.tuning.stores import TRUSTED

SETTINGS_DIR = "collection_settings"
# A document record's fingerprint of the injection rules its chunks were flagged with (signals/injection_screen.py):
# ingest (stores/ingest.py) checks the stored marks of a document only when it is not today's.
SCREENED_KEY = "screened"
_lock = threading.Lock()
_cache: dict[Path, tuple[float, TrustedDomains]] = {}


@dataclass(frozen=True)
class TrustedDomains:
    """What a collection trusts: `learned` from its documents, `added` and `removed` by the user; `documents` is how
    many documents the learning read, `served` how many of them came from a domain (a url or `domain`/`site`
    metadata; a local file has none)."""

    learned: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    documents: int = 0
    served: int = 0
    familiar: tuple[str, ...] = ()

    def trust(self, extra: frozenset[str] = frozenset()) -> Trust:
        """What the reply check trusts: these domains plus `extra` (the context's), the origin known when some page
        is served from a domain or domains were named; the familiar domains (those the collection's own pages link
        to repeatedly) are no contact to warn about."""
        return Trust(
            self.domains | extra,
            known=self.origin_known or bool(extra),
            familiar=frozenset(self.familiar) - frozenset(self.removed),
        )

    @property
    def origin_known(self) -> bool:
        """Whether the collection knows where its pages come from (some are served from a domain, or the user named
        domains): only then is every contact off its domains suspect. A collection ingested from local files knows
        no origin, so a link is not cautioned for being one (tools/signals/sensitive.py)."""
        return self.served > 0 or bool(self.added)

    @property
    def domains(self) -> frozenset[str]:
        """The registrable domains the collection trusts."""
        return frozenset(self.learned + self.added) - frozenset(self.removed)

    def trusts(self, host: str) -> bool:
        """Whether a host (or a domain) belongs to a trusted domain."""
        return bool(host) and registrable_domain(host) in self.domains

    def as_dict(self) -> dict[str, Any]:
        return {
            "trusted": sorted(self.domains),
            "learned": list(self.learned),
            "added": list(self.added),
            "removed": list(self.removed),
            "documents": self.documents,
            "served": self.served,
            "familiar": list(self.familiar),
        }


def document_record(doc: Any, chunks: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What learning keeps of a document: its own domain, and the domains of the addresses and links its sentences
    give, those flagged as injected instructions left out (an order planted on many pages names its domain on each:
    it must not make the domain trusted). Without its chunks, the whole text is read."""
    url, metadata = str(getattr(doc, "url", "")), getattr(doc, "metadata", {})
    own = document_domain_of({"url": url, "metadata": metadata})
    if chunks:
        texts = []
        for chunk in chunks:
            recorded = (chunk.get("metadata") or {}).get(FLAGS_KEY, [])
            flagged = {str(item).partition(": ")[2] for item in recorded if isinstance(recorded, list)}
            texts += [s for s in split_sentences(str(chunk.get("text", ""))) if s not in flagged]
    else:
        texts = [str(getattr(doc, "text", ""))]
    named = sorted({registrable_domain(h) for t in texts for c in contacts(t) if is_site(h := host_of(c))})
    return {"own": own, "named": named}


def screened_with(root: Path, collection: str) -> dict[str, str]:
    """doc_id -> the fingerprint of the injection rules its chunks were last flagged with ("" when not recorded)."""
    documents = _read(_path(root, collection)).get("documents") or {}
    return {str(doc_id): str((r or {}).get(SCREENED_KEY, "")) for doc_id, r in documents.items() if isinstance(r, dict)}


def learn(records: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, ...], int]:
    """(the trusted domains, documents read): a domain that serves at least `TRUSTED.min_share` of the documents
    (at least `TRUSTED.min_documents` of them, or most of them), and one that documents of trusted (or unknown)
    origin name in as many documents (or in most of them)."""
    rows = list(records)
    total = len(rows)
    if not total:
        return (), 0
    need = max(TRUSTED.min_documents, TRUSTED.min_share * total)
    own = Counter(str(r["own"]) for r in rows if r.get("own"))
    trusted = {d for d, n in own.items() if n >= need or n * 2 > total}
    named: Counter[str] = Counter()
    for row in rows:
        if not row.get("own") or row["own"] in trusted:
            named.update(set(row.get("named", [])))
    trusted |= {d for d, n in named.items() if n >= need or n * 2 > total}
    return tuple(sorted(trusted)), total


def familiar(records: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The domains the collection's own pages (of trusted or unknown origin) link to repeatedly: named by at least
    `TRUSTED.min_documents` documents. Not trusted (no page served from one vouches for itself), but a link to one,
    or a command fetching from one, is the documentation's reference, not a contact offered to the reader. A planted
    contact is one page's (the injection suites: every look-alike domain is)."""
    rows = list(records)
    trusted = {str(r["own"]) for r in rows if r.get("own")} & set(learn(rows)[0])
    named: Counter[str] = Counter()
    for row in rows:
        if not row.get("own") or row["own"] in trusted:
            named.update(set(row.get("named", [])))
    return tuple(sorted(d for d, n in named.items() if n >= TRUSTED.min_documents))


def settings_dir(store: Any = None, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where a collection's settings live: the given data dir, else the store's (a search index's store's), else
    reground's data dir."""
    if data_dir:
        return Path(data_dir)
    for candidate in (store, getattr(store, "store", None)):
        root = getattr(candidate, "data_dir", None)
        if isinstance(root, str | Path) and str(root):
            return Path(root)
    return default_data_dir()


def _path(root: Path, collection: str) -> Path:
    return root / SETTINGS_DIR / f"{collection}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _write(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(record, handle, sort_keys=True)
    os.replace(tmp, path)


def _trusted(record: Mapping[str, Any]) -> TrustedDomains:
    documents = record.get("documents") or {}
    rows = list(documents.values()) if isinstance(documents, dict) else []
    learned, total = learn(rows)
    return TrustedDomains(
        learned=learned,
        added=tuple(sorted(record.get("added") or [])),
        removed=tuple(sorted(record.get("removed") or [])),
        documents=total,
        served=sum(1 for r in rows if isinstance(r, Mapping) and r.get("own")),
        familiar=familiar(r for r in rows if isinstance(r, Mapping)),
    )


def record_documents(
    root: Path, collection: str, records: Mapping[str, Mapping[str, Any]], deleted: Iterable[str] = ()
) -> TrustedDomains:
    """Keep these documents' records (and forget the deleted ones); the collection's trusted domains after it."""
    path = _path(root, collection)
    with _lock:
        record = _read(path)
        documents = dict(record.get("documents") or {})
        documents.update({doc_id: dict(r) for doc_id, r in records.items()})
        for doc_id in deleted:
            documents.pop(doc_id, None)
        record["documents"] = documents
        _write(path, record)
        _cache.pop(path, None)
    return _trusted(record)


def edit_trusted(root: Path, collection: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> TrustedDomains:
    """Add domains to (or remove them from) what the collection trusts, over what was learned."""
    path = _path(root, collection)
    add_set = {registrable_domain(host_of(d) or d) for d in add if d.strip()}
    remove_set = {registrable_domain(host_of(d) or d) for d in remove if d.strip()}
    with _lock:
        record = _read(path)
        added = (set(record.get("added") or []) | add_set) - remove_set
        removed = (set(record.get("removed") or []) | remove_set) - add_set
        record["added"], record["removed"] = sorted(added), sorted(removed)
        _write(path, record)
        _cache.pop(path, None)
    return _trusted(record)


def trusted_domains(root: Path, collection: str) -> TrustedDomains:
    """The collection's trusted domains (nothing learned: empty), read again only when the file changed."""
    path = _path(root, collection)
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return TrustedDomains()
    with _lock:
        cached = _cache.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
    trusted = _trusted(_read(path))
    with _lock:
        _cache[path] = (mtime, trusted)
    return trusted
