"""Evaluation: data loaders, metrics (evaluate modules loaded by path), judges, runs and reports."""
