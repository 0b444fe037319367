"""Studies measured and not shipped (docs/experiments.md): kept so their results can be re-run."""
