"""CLI sub-command groups; `reground.cli` wires them."""
