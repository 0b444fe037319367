"""Training and fitting what ships in the package: the judge, reader, ask-back, triage, unit ranker, thresholds."""
