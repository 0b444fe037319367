"""Read documents from .jsonl, .md, .txt, .html and .pdf files and folders; bad files are reported by name."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reground.tools.text.markdown import MARKDOWN_SUFFIXES, page_title
from reground.tools.text.sentences import line_kinds
from reground.tools.text.templates import strip_templates
from reground.tools.tuning.stores import INGEST

SUPPORTED = (".jsonl", *MARKDOWN_SUFFIXES, ".txt", ".html", ".htm", ".pdf")
RESERVED = {"doc_id", "title", "text", "url"}
Scalar = str | int | float | bool
MiB = 2**20  # fact: a mebibyte, the unit sizes are shown in
# A file holding one document (.md, .txt, .html, .pdf), or one line of a .jsonl, larger than this is refused with
# one line saying so (tools/tuning/stores.py). A .jsonl is read line by line, so its size is not limited (a corpus
# of many documents), only each record's.
MAX_FILE_BYTES = INGEST.max_file_bytes
LARGE_FILE_BYTES = INGEST.large_file_bytes  # from this size on, reading a file says so on the progress callback
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReadLimits:
    """How large a document may be, and where to tell that a large file is being read (None: nowhere)."""

    max_file_bytes: int = MAX_FILE_BYTES
    on_progress: Progress | None = None

    def too_large(self, size: int, what: str = "the file") -> str | None:
        if self.max_file_bytes and size > self.max_file_bytes:
            return (
                f"{what} is {size / MiB:.1f} MB, over the {self.max_file_bytes / MiB:g} MB limit per document "
                "(--max-file-mb); split it or raise the limit"
            )
        return None

    def reading(self, path: Path, size: int) -> None:
        if self.on_progress is not None and size >= LARGE_FILE_BYTES:
            self.on_progress(f"reading {path} ({size / MiB:.1f} MB)")


@dataclass
class Document:
    doc_id: str
    title: str
    text: str
    url: str = ""
    metadata: dict[str, Scalar] = field(default_factory=dict)
    source: str = ""
    hidden_chars: int = 0  # characters of text a reader would not see, dropped by the loader (counted at ingest)


@dataclass(frozen=True)
class LoadError:
    """A file (or a line of one) that could not be read, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _scalar_metadata(raw: dict[str, Any], where: str) -> dict[str, Scalar]:
    """Metadata must be scalar to be filterable; lists of scalars are joined with ','."""
    out: dict[str, Scalar] = {}
    for key, value in raw.items():
        if key in RESERVED or value is None:
            continue
        if isinstance(value, (str, int, float, bool)):
            out[key] = value
        elif isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            out[key] = ",".join(str(v) for v in value)
        else:
            raise ValueError(f"{where}: metadata field {key!r} must be a string, number, boolean or list of them")
    return out


_CONTROL_RUN = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def readable_id(doc_id: str) -> str:
    """A doc id without control characters: a newline or tab in a file name (or a record's id) becomes a space, so
    the id prints on one line and can be typed back (`reground ingest --delete`)."""
    return _CONTROL_RUN.sub(" ", doc_id)


def _looks_binary(data: bytes) -> bool:
    return b"\x00" in data[: INGEST.binary_sniff_bytes]


# Byte order marks and the encodings they announce (UTF-32 first: its little-endian mark starts like UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _read_text(path: Path) -> str:
    """A text file's text: UTF-8, or the UTF-16/32 its byte order mark announces (an editor's "Unicode" save)."""
    data = path.read_bytes()
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is not None and encoding != "utf-8-sig":
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(f"not {encoding.upper()} text despite its byte order mark ({exc.reason})") from exc
        if not text.strip():
            raise ValueError("the file is empty")
        return text
    if not data.strip():
        raise ValueError("the file is empty")
    if _looks_binary(data):
        raise ValueError("the file is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _jsonl_lines(path: Path, limits: ReadLimits) -> Iterator[tuple[int, str | ValueError]]:
    """(line number, text) of each non-blank line, read one at a time (bounded memory), or the line's error."""
    with path.open("rb") as handle:
        head = handle.read(INGEST.binary_sniff_bytes)
        if not head.strip():
            raise ValueError("the file is empty")
        if _looks_binary(head):
            raise ValueError("the file is binary, not text")
        handle.seek(0)
        size, read, told = path.stat().st_size, 0, 0
        for number, raw in enumerate(handle, start=1):
            read += len(raw)
            if size >= LARGE_FILE_BYTES and read - told >= LARGE_FILE_BYTES and limits.on_progress is not None:
                told = read
                limits.on_progress(f"reading {path}: {read / MiB:.0f} of {size / MiB:.0f} MB")
            problem = limits.too_large(len(raw), "the line")
            if problem:
                yield number, ValueError(problem)
                continue
            if not raw.strip():
                continue
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)")


def _load_jsonl(path: Path, errors: list[LoadError], limits: ReadLimits | None = None) -> Iterator[Document]:
    for number, line in _jsonl_lines(path, limits or ReadLimits()):
        where = f"{path}:{number}"
        if isinstance(line, ValueError):
            errors.append(LoadError(where, str(line)))
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("the line is not a JSON object")
            missing = [k for k in ("doc_id", "text") if not str(record.get(k, "")).strip()]
            if missing:
                raise ValueError(f"missing or empty {', '.join(missing)}")
            yield Document(
                doc_id=str(record["doc_id"]),
                title=str(record.get("title") or record["doc_id"]),
                text=str(record["text"]),
                url=str(record.get("url") or ""),
                metadata=_scalar_metadata(record, where),
                source=str(path),
            )
        except json.JSONDecodeError as exc:
            errors.append(LoadError(where, f"malformed JSON: {exc.msg}"))
        except ValueError as exc:
            errors.append(LoadError(where, str(exc)))


def html_text(markup: str, fallback_title: str = "") -> tuple[str, str]:
    """(title, text) of an HTML page as markdown: headings, paragraphs, fenced code, lists, tables, admonitions and
    tabs (text/html_markdown.py), so it is chunked by its structure like a markdown page."""
    title, text, _hidden = _html_text(markup, fallback_title)
    return title, text


def _html_text(markup: str, fallback_title: str = "") -> tuple[str, str, int]:
    """(title, text, characters of hidden text dropped) of an HTML page."""
    from reground.tools.text.hidden import check_depth, strip_hidden_counted
    from reground.tools.text.html_markdown import html_markdown

    check_depth(markup)  # one line for a page nested past any reader's, before anything slower reads it
    visible, hidden = strip_hidden_counted(markup)  # text a reader does not see is not content
    title, text = html_markdown(visible)
    # A site's template (a theme's page, an include) holds tags its generator expands: they are no text; code
    # blocks keep theirs (a page showing template syntax).
    text = "\n".join(line if kind == "code" else strip_templates(line) for line, kind in line_kinds(text)).strip()
    return title or fallback_title, text, hidden


def _load_html(path: Path) -> tuple[str, str, int]:
    return _html_text(_read_text(path), path.stem)


def _load_pdf(path: Path) -> tuple[str, str, int]:
    """(title, text, characters of hidden text dropped): text a reader would not see (white, tiny, invisible,
    off the page) is removed from each page before its text is extracted (text/pdf_hidden.py)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError
    from reground.tools.text.pdf_hidden import strip_hidden_text

    hidden = 0
    try:
        reader = PdfReader(str(path))
        pages = []
        for page in reader.pages:
            hidden += strip_hidden_text(page)
            pages.append(page.extract_text() or "")
    except (PdfReadError, ValueError, OSError) as exc:
        raise ValueError(f"not a readable PDF ({exc})") from exc
    metadata = reader.metadata
    title = str((metadata.get("/Title") if metadata is not None else None) or path.stem)
    return title, "\n\n".join(p.strip() for p in pages if p.strip()), hidden


def _load_file(path: Path, root: Path, errors: list[LoadError], limits: ReadLimits | None = None) -> Iterator[Document]:
    limits = limits or ReadLimits()
    suffix = path.suffix.lower()
    doc_id = readable_id(str(path.relative_to(root)) if root != path else path.name)
    try:
        size = path.stat().st_size
        limits.reading(path, size)
        if suffix == ".jsonl":
            yield from _load_jsonl(path, errors, limits)
            return
        problem = limits.too_large(size) if suffix in SUPPORTED else None
        if problem:
            raise ValueError(problem)
        hidden = 0
        if suffix in (*MARKDOWN_SUFFIXES, ".txt"):
            text = _read_text(path)
            title = (page_title(text) or path.stem) if suffix != ".txt" else path.stem
        elif suffix in (".html", ".htm"):
            title, text, hidden = _load_html(path)
        elif suffix == ".pdf":
            title, text, hidden = _load_pdf(path)
        else:
            errors.append(LoadError(str(path), f"unsupported file type {suffix or '(none)'}; use one of {SUPPORTED}"))
            return
        if not text.strip():
            raise ValueError("no text could be extracted")
        yield Document(doc_id=doc_id, title=title, text=text, source=str(path), hidden_chars=hidden)
    except PermissionError:
        errors.append(LoadError(str(path), "permission denied"))
    except (OSError, ValueError) as exc:
        errors.append(LoadError(str(path), str(exc)))
    except Exception as exc:  # a parser's own failure on this file: the file is named, the rest load
        errors.append(LoadError(str(path), f"could not be read: {type(exc).__name__}: {' '.join(str(exc).split())}"))


def _outside(file: Path, root: Path) -> Path | None:
    """Where a file under `root` really lies when a symbolic link takes it outside `root` (None: inside)."""
    target = file.resolve()
    return None if target.is_relative_to(root.resolve()) else target


def load_paths(
    paths: Sequence[str | Path], *, max_file_bytes: int = MAX_FILE_BYTES, on_progress: Progress | None = None
) -> tuple[list[Document], list[LoadError]]:
    """Every document under the paths, plus an error per file (or line) that could not be read.

    `max_file_bytes`: the largest document file (or .jsonl line) read (0: no limit); `on_progress` hears about
    large files as they are read.
    """
    errors: list[LoadError] = []
    documents = list(iter_documents(paths, errors, max_file_bytes=max_file_bytes, on_progress=on_progress))
    return documents, errors


def iter_documents(
    paths: Sequence[str | Path],
    errors: list[LoadError],
    *,
    max_file_bytes: int = MAX_FILE_BYTES,
    on_progress: Progress | None = None,
) -> Iterator[Document]:
    """`load_paths`' documents one at a time, as each file is read (an ingest indexes them as they come); the
    errors are appended to `errors` as they are met."""
    limits = ReadLimits(max_file_bytes, on_progress)
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            errors.append(LoadError(str(path), "no such file or directory"))
        elif path.is_dir():
            for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
                outside = _outside(file, path)
                if outside is not None:
                    errors.append(LoadError(str(file), f"skipped: a link to {outside}, outside {path}"))
                    continue
                yield from _load_file(file, path, errors, limits)
        else:
            yield from _load_file(path, path, errors, limits)
