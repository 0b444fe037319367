"""The home of every hand-set number of graph/, nodes/, tools/ and the CLI: each with its meaning and measurement.

One frozen, typed group per stage, read by name (`TRIAGE.judge_answer_threshold`) by the nodes and tools, and by
the run's Context, whose defaults come from here (nodes/context.py; a user changes a turn's values there, not
here). `tests/unit/test_literals.py` fails on a bare number anywhere else in graph/, nodes/, tools/ or reground/.

- `turn`: the turn's decisions: budgets, triage, evidence and the answer, groundedness, refinement.
- `models`: calls to chat and embedding models and the local server: token caps, temperatures, timeouts.
- `retrieval`: the search stack (RetrievalSettings, tuned on doc2dial dev), rerank, keywords, query transforms.
- `stores`: dense search (IndexSettings), store reads and writes, ingestion, chunking, loaders, locks.
- `signals`: text signals with no measurement of their own to tune: injection screening, figures, echo checks.
- `web`: the chat page's server side and `reground ui`: request limits, start and stop waits.

Imports nothing of the project, so every layer may read it.
"""
