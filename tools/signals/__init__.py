"""Signals: LLM-free measures of a turn's text (evidence sentences and the extract reply made of them, a turn's
reading, answerability and asking back, the judge and unit rankers, figures, contacts, conflicts, injection screening,
reply guards, scoring)."""
