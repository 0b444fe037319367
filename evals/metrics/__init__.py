"""Metric modules for `evaluate.load(path)`: one folder per metric, `<name>/<name>.py`."""
