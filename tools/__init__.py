"""Tools, by job: `adapters/` (the outside world: chat and embedding models, the local server, an HTTP reranker),
`stores/` (where chunks live, written and searched), `retrieval/`, `signals/` (LLM-free measures of a turn's text),
`text/` and `tuning/` (every hand-set number). They know nothing of the graph, the nodes or the evals."""
