"""Signals: LLM-free measures of a turn's text (evidence, answerability, the judge, figures, injection, scoring)."""
