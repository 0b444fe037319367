"""Nodes: small functions of (state, env) that decide, calling tools and never building clients, one module per node
(no node's module imports another's); `routes.py`, why a turn goes where it goes (the functions graph/ wires);
`common.py`, what several nodes share (their environment, the prompt layout, the turn's reading, drafts); the turn's
`State` (state.py) and the run's `Context` (context.py), its settings by stage (context_groups.py)."""
