"""Runs over the stack: answers, passages, retrieval, usefulness, injection suites, judges, reports, synthetic cases."""
