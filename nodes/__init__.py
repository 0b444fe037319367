"""Nodes: small functions of (state, runtime) that decide; they call tools, never build clients."""
