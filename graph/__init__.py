"""Wiring: state, runtime context and the graph builders."""
