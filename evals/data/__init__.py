"""Evaluation data: loaders, generators (synthetic dialogues, injection suites), set-up, and the suites' files."""
