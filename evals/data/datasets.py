"""Evaluation data: document-grounded dialogue cases and their documents.

Two input formats give the same `Case` / document dicts, so every eval run reports in one format:
- the converted doc2dial files (`docs.jsonl` + `cases_*.jsonl`, see shared/data/doc2dial/README.md);
- the official MultiDoc2Dial release (`multidoc2dial_doc.json` + `multidoc2dial_dial_{split}.json`).
Paths are always arguments; nothing is downloaded. The MTRAG-UN files (shared/data/mtrag/) use the
doc2dial case schema plus labels (`answerability`, `collection`, `multi_turn`, `question_type`), which
a `Case` keeps so every eval row can be grouped by them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypedDict

from reground.tools.errors import DataError

EVAL_CHUNK_TOKENS = 160  # the chunk size of `reground eval` collections
NO_SOLUTION_DA = "respond_no_solution"


class DatasetError(DataError, ValueError):
    """A case or document file that cannot be read; the message names the file and the fix."""


class Turn(TypedDict):
    role: Literal["user", "agent"]
    text: str


@dataclass
class Case:
    """One agent reply to evaluate: the dialogue before it, the user's question and the gold grounding."""

    case_id: str
    dial_id: str
    domain: str
    history: list[Turn]
    question: str
    gold_answer: str | None
    gold_doc_id: str
    gold_doc_ids: list[str]
    gold_span: str
    answerable: bool
    gold_span_ids: list[str] = field(default_factory=list)
    gold_doc_in_corpus: bool = True
    gold_da: str | None = None
    split: str = ""
    source: str = ""
    # MTRAG-UN labels (None / empty for doc2dial): ANSWERABLE | UNANSWERABLE | UNDERSPECIFIED | PARTIAL,
    # the document collection the task retrieves from, Follow-up | Clarification | N/A, question types.
    answerability: str | None = None
    collection: str | None = None
    multi_turn: str | None = None
    question_type: list[str] = field(default_factory=list)
    # The exact calls, flags or values a useful reply must hold (techdocs); empty when the case gives none.
    must_contain: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # any other key of the case row, kept as is

    @property
    def is_followup(self) -> bool:
        """A turn with dialogue before it: the history matters for retrieval."""
        return bool(self.history)

    def history_pairs(self) -> list[tuple[str, str]]:
        return [(t["role"], t["text"]) for t in self.history]

    def labels(self) -> dict[str, Any]:
        """The case's labels that eval rows carry, to group results by them."""
        return {
            "answerability": self.answerability,
            "collection": self.collection,
            "multi_turn": self.multi_turn,
            "question_type": list(self.question_type),
        }

    def to_dict(self) -> dict[str, Any]:
        """The case row (extra keys back at the top level, so load_cases reads the same case)."""
        row = asdict(self)
        extra = row.pop("extra")
        return {**extra, **row}


_CASE_FIELDS = {"case_id", "dial_id", "question", "gold_doc_id"}
_KNOWN_KEYS = {f.name for f in fields(Case)} - {"extra"}


def _optional_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _read_jsonl(path: Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DatasetError(f"{what} file not found: {path} (pass the path of an existing .jsonl file)")
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not valid JSON ({exc.msg}); fix or remove the line") from exc
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{number}: expected a JSON object per line")
            yield number, row


def case_from_dict(row: dict[str, Any], *, where: str = "") -> Case:
    """A case from the converted doc2dial schema (MTRAG-UN labels read; other keys kept in `extra`).

    A task without reference passages (MTRAG-UN's UNANSWERABLE) has `gold_doc_id` null: it becomes
    "" with no gold documents, never the string "None"."""
    missing = sorted(_CASE_FIELDS - row.keys())
    if missing:
        raise DatasetError(f"{where}: case is missing {', '.join(missing)} (expected the doc2dial case schema)")
    history: list[Turn] = []
    for turn in row.get("history") or []:
        role = turn.get("role")
        if role not in ("user", "agent"):
            raise DatasetError(f"{where}: history turn with role {role!r}; expected 'user' or 'agent'")
        history.append(Turn(role=role, text=str(turn.get("text", ""))))
    gold_doc_id = _optional_str(row["gold_doc_id"]) or ""
    gold_doc_ids = [str(d) for d in row.get("gold_doc_ids") or [gold_doc_id] if d]
    question_type = row.get("question_type") or []
    return Case(
        case_id=str(row["case_id"]),
        dial_id=str(row["dial_id"]),
        domain=str(row.get("domain", "")),
        history=history,
        question=str(row["question"]),
        gold_answer=row.get("gold_answer"),
        gold_doc_id=gold_doc_id,
        gold_doc_ids=gold_doc_ids,
        gold_span=str(row.get("gold_span") or ""),
        answerable=bool(row.get("answerable", True)),
        gold_span_ids=[str(s) for s in row.get("gold_span_ids") or []],
        gold_doc_in_corpus=bool(row.get("gold_doc_in_corpus", True)),
        gold_da=row.get("gold_da"),
        split=str(row.get("split") or ""),
        source=str(row.get("source") or ""),
        answerability=_optional_str(row.get("answerability")),
        collection=_optional_str(row.get("collection")),
        multi_turn=_optional_str(row.get("multi_turn")),
        question_type=[str(q) for q in ([question_type] if isinstance(question_type, str) else question_type)],
        must_contain=[str(s) for s in row.get("must_contain") or []],
        extra={k: v for k, v in row.items() if k not in _KNOWN_KEYS},
    )


def select_cases(
    cases: Iterable[Case],
    *,
    limit: int | None = None,
    seed: int | None = None,
    only_with_answer: bool = False,
    only_followups: bool = False,
) -> list[Case]:
    """Filter, then take `limit` cases: a seeded random sample (in file order) if seed is given, else the first."""
    kept = [
        c
        for c in cases
        if (not only_with_answer or c.gold_answer is not None) and (not only_followups or c.is_followup)
    ]
    if limit is None or limit >= len(kept):
        return kept
    if limit < 0:
        raise DatasetError(f"limit must be >= 0, got {limit}")
    if seed is None:
        return kept[:limit]
    chosen = sorted(random.Random(seed).sample(range(len(kept)), limit))
    return [kept[i] for i in chosen]


def load_cases(
    path: str | Path,
    *,
    limit: int | None = None,
    seed: int | None = None,
    only_with_answer: bool = False,
    only_followups: bool = False,
) -> list[Case]:
    """Cases from a doc2dial-format .jsonl file (see select_cases for the sampling)."""
    path = Path(path)
    cases = [case_from_dict(row, where=f"{path}:{n}") for n, row in _read_jsonl(path, "cases")]
    if not cases:
        raise DatasetError(f"cases file {path} holds no cases")
    return select_cases(
        cases,
        limit=limit,
        seed=seed,
        only_with_answer=only_with_answer,
        only_followups=only_followups,
    )


def load_corpus(path: str | Path) -> list[dict[str, Any]]:
    """Documents of a docs.jsonl file as ingestable dicts: doc_id, title, text, url; other keys → metadata."""
    path = Path(path)
    docs: list[dict[str, Any]] = []
    for number, row in _read_jsonl(path, "documents"):
        for key in ("doc_id", "text"):
            if not row.get(key):
                raise DatasetError(f"{path}:{number}: document without {key!r} (each line needs doc_id, title, text)")
        docs.append(
            {
                "doc_id": str(row["doc_id"]),
                "title": str(row.get("title") or row["doc_id"]),
                "text": str(row["text"]),
                "url": str(row.get("url") or ""),
                "metadata": {k: v for k, v in row.items() if k not in ("doc_id", "title", "text", "url")},
            }
        )
    if not docs:
        raise DatasetError(f"documents file {path} holds no documents")
    return docs


def write_corpus_jsonl(docs: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Documents (as returned by the loaders) as a .jsonl file `reground ingest` reads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for doc in docs:
            row = {"doc_id": doc["doc_id"], "title": doc["title"], "text": doc["text"]}
            if doc.get("url"):
                row["url"] = doc["url"]
            row.update(doc.get("metadata", {}))
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


# --- the official MultiDoc2Dial release ------------------------------------------------------


def _read_json(path: Path, key: str) -> dict[str, Any]:
    if not path.is_file():
        raise DatasetError(f"MultiDoc2Dial file not found: {path} (pass the path of the release's JSON file)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or not isinstance(data.get(key), dict):
        raise DatasetError(f"{path}: expected a JSON object with a {key!r} object (MultiDoc2Dial release format)")
    return data[key]


def load_multidoc2dial_docs(
    doc_path: str | Path,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """`multidoc2dial_doc.json` → (documents like load_corpus, {doc_id: {span_id: span text}})."""
    doc_path = Path(doc_path)
    docs: list[dict[str, Any]] = []
    spans: dict[str, dict[str, str]] = {}
    for domain, by_id in _read_json(doc_path, "doc_data").items():
        for doc_id, doc in by_id.items():
            doc_id = str(doc.get("doc_id", doc_id))
            docs.append(
                {
                    "doc_id": doc_id,
                    "title": str(doc.get("title") or doc_id),
                    "text": str(doc.get("doc_text", "")),
                    "url": "",
                    "metadata": {
                        "domain": str(doc.get("domain", domain)),
                        "source": "multidoc2dial",
                    },
                }
            )
            spans[doc_id] = {str(sid): str(span.get("text_sp", "")) for sid, span in (doc.get("spans") or {}).items()}
    return docs, spans


def _dialogues(dial_data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(domain, dialogue) from MultiDoc2Dial's {domain: [dial]} (or doc2dial's {domain: {doc_id: [dial]}})."""
    for domain, value in dial_data.items():
        groups = value.values() if isinstance(value, dict) else [value]
        for group in groups:
            for dial in group:
                yield domain, dial


def _span_key(span_id: str) -> tuple[int, str]:
    return (int(span_id), span_id) if span_id.isdigit() else (10**9, span_id)


def multidoc2dial_cases(
    dial_data: dict[str, Any], spans: dict[str, dict[str, str]], *, split: str, source: str
) -> list[Case]:
    """One case per agent turn that follows a user turn, plus a final unanswered user turn (gold_answer None)."""
    cases: list[Case] = []
    for domain, dial in _dialogues(dial_data):
        dial_id = str(dial["dial_id"])
        turns = dial.get("turns") or []
        history: list[Turn] = []
        for i, turn in enumerate(turns):
            role: Literal["user", "agent"] = "agent" if turn.get("role") == "agent" else "user"
            text = str(turn.get("utterance", ""))
            next_turn = turns[i + 1] if i + 1 < len(turns) else None
            if role == "user" and (next_turn is None or next_turn.get("role") == "agent"):
                agent = next_turn
                refs = (agent or {}).get("references") or turn.get("references") or []
                doc_ids = list(dict.fromkeys(str(r["doc_id"]) for r in refs if r.get("doc_id")))
                doc_id = doc_ids[0] if doc_ids else ""
                span_ids = sorted(
                    {str(r["id_sp"]) for r in refs if str(r.get("doc_id")) == doc_id and "id_sp" in r},
                    key=_span_key,
                )
                da = agent.get("da") if agent else None
                cases.append(
                    Case(
                        case_id=f"{dial_id}_{turn.get('turn_id', i + 1)}",
                        dial_id=dial_id,
                        domain=str(dial.get("domain", domain)),
                        history=list(history),
                        question=text,
                        gold_answer=str(agent.get("utterance", "")) if agent else None,
                        gold_doc_id=doc_id,
                        gold_doc_ids=doc_ids,
                        gold_span=" ".join(spans.get(doc_id, {}).get(s, "").strip() for s in span_ids).strip(),
                        answerable=bool(doc_ids) and da != NO_SOLUTION_DA,
                        gold_span_ids=span_ids,
                        gold_doc_in_corpus=doc_id in spans,
                        gold_da=da,
                        split=split,
                        source=source,
                    )
                )
            history.append(Turn(role=role, text=text))
    return cases


def load_multidoc2dial(
    doc_path: str | Path,
    dial_path: str | Path,
    *,
    limit: int | None = None,
    seed: int | None = None,
    only_with_answer: bool = False,
    only_followups: bool = False,
) -> tuple[list[Case], list[dict[str, Any]]]:
    """The official release files → (cases, documents), in the same format as load_cases / load_corpus."""
    docs, spans = load_multidoc2dial_docs(doc_path)
    dial_path = Path(dial_path)
    split = dial_path.stem.removeprefix("multidoc2dial_dial_")
    cases = multidoc2dial_cases(
        _read_json(dial_path, "dial_data"),
        spans,
        split=split,
        source=f"multidoc2dial:{dial_path.name}",
    )
    chosen = select_cases(
        cases,
        limit=limit,
        seed=seed,
        only_with_answer=only_with_answer,
        only_followups=only_followups,
    )
    return chosen, docs


def write_cases_jsonl(cases: Iterable[Case], path: str | Path) -> Path:
    """Cases in the doc2dial case schema (what load_cases reads back)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for case in cases:
            fh.write(json.dumps(case.to_dict(), ensure_ascii=False) + "\n")
    return path


# The share of dialogues kept aside from training the judge (evals/train/judge.py) and reported on apart
# (evals/runs/passages.py): split by dialogue, never by case.
HELD_OUT_SHARE = 0.2


def held_out(dial_id: str) -> bool:
    """Whether a dialogue is kept aside: its id's sha1 falls in the last HELD_OUT_SHARE of the range."""
    digest = int(hashlib.sha1(dial_id.encode()).hexdigest()[:8], 16)
    return digest / 0xFFFFFFFF >= 1.0 - HELD_OUT_SHARE
