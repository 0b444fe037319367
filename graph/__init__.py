"""Wiring only: the conversation graph (its nodes, the edges between them, each conditional edge routed by a function
of nodes/routes.py, retry policies: `builder.build_graph`, `graph`) and the ingest graph. Nothing here decides: the
decisions, the state and the context types live in nodes/."""
