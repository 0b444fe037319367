"""Nodes: small functions of (state, env) that decide, calling tools and never building clients; with the types
they share: the turn's `State` (state.py) and the run's `Context` (context.py), its settings by stage."""
