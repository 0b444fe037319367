"""Wiring: the conversation graph (nodes, the routes between them, retry policies: `builder.build_graph`, `graph`)
and the ingest graph. The state and context types live in nodes/; this folder decides nothing itself."""
