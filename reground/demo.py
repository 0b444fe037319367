"""The demo conversation's data: its collection, the user's scope, the three turns and the bundled HR corpus.

Shared by `reground demo` (reground/commands/conversation.py) and the server benchmark (evals/perf/bench_server.py),
which must not import CLI modules.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DEMO_COLLECTION = "demo-hr"
DEMO_SCOPE = {"country": "DE", "employment_type": "full-time"}
# Where the demo sends a question its documents do not answer (the context's default names no team).
DEMO_ESCALATION = "please open a ticket with the HR team"
DEMO_TURNS = (
    "How many days of annual leave do I get per year?",
    "Can I carry unused days over to next year?",
    "Until when do I have to use them?",
)


def demo_next_step() -> str:
    """What `reground demo` (`make demo`) suggests next: the same documents in the chat page."""
    from reground.web.server import DEFAULT_PORT

    return (
        f"next: `.venv/bin/reground ui` serves these documents in a chat page at http://127.0.0.1:{DEFAULT_PORT}/chat "
        "(the LLM and the LangGraph server in one command; Ctrl-C stops them)"
    )


def demo_corpus_path() -> Path:
    """The HR policy corpus installed with the package (reground/data/hr_policies.jsonl)."""
    return Path(str(resources.files("reground") / "data" / "hr_policies.jsonl"))
