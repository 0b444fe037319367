"""Which rules screened a chunk at ingest: the mark that lets read time trust the flags ingest stored.

Ingest flags every sentence of a chunk (tools/signals/injection.py `flag_metadata`) and read time used to flag
every retrieved passage again, with the same rules on the same text: about 5 ms a passage, most of a turn's cost
outside the models (evals/README.md, "Cost"). A chunk now carries `SCREEN_KEY`, the fingerprint of the flagging
code that screened it and the document domain it was screened for; where both still hold at read time, the flags
ingest stored are the flags read time would find, and are used as they are. Anything else (a chunk from an older
ingest or another store, changed rules, other text, another domain) is flagged at read time as before.

The fingerprint is the source of every module the flags depend on, and the Python version (its `re` and
`unicodedata` read the text too): any edit to the rules makes every stored mark stale, so a stale flag is never
trusted; the next ingest of the same documents flags them again and updates only their metadata (stores/ingest.py).
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from functools import lru_cache
from pathlib import Path

SCREEN_KEY = "injection_screen"  # chunk metadata: a digest of the rules, the text and the domain ingest flagged

# Every module whose code decides a sentence's flags (signals/injection.py's imports used by `flag_passage`).
RULE_MODULES = (
    "reground.tools.signals.injection",
    "reground.tools.signals.injection_rules",
    "reground.tools.signals.injection_languages",
    "reground.tools.signals.injection_screen",
    "reground.tools.signals.blocks",
    "reground.tools.signals.contacts",
    "reground.tools.signals.disguise",
    "reground.tools.signals.requests",
    "reground.tools.text.colours",
    "reground.tools.text.hidden",
    "reground.tools.text.invisible",
    "reground.tools.text.sentences",
    "reground.tools.tuning.declared",
    "reground.tools.tuning.signals",
    "reground.tools.tuning.turn",
)


@lru_cache(maxsize=1)
def rules_fingerprint() -> str:
    """A digest of the flagging code's source and the Python version; "" when a source cannot be read (then no
    mark is written or trusted)."""
    digest = hashlib.sha256(sys.version.encode())
    for name in RULE_MODULES:
        module = sys.modules.get(name) or importlib.import_module(name)
        try:
            digest.update(Path(str(module.__file__)).read_bytes())
        except (OSError, TypeError):
            return ""
    return digest.hexdigest()


def screen_mark(text: str, document_domain: str | None) -> str:
    """The mark of a chunk's text screened now for this document domain: one digest of the rules' fingerprint, the
    domain and the text, so a mark copied onto other text or read for another domain does not hold ("" when the
    rules have no fingerprint)."""
    fingerprint = rules_fingerprint()
    if not fingerprint:
        return ""
    digest = hashlib.sha256(f"{fingerprint}\0{document_domain or ''}\0".encode("utf-8", "surrogatepass"))
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
