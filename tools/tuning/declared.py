"""How a tuned value the run's Context exposes is declared: once, here in tools/tuning/, with its default and its
one-line meaning; the Context's field is generated from it (nodes/context_groups.py `tuned`), so neither the value
nor its description has a second copy. `user_settable=False` marks a value a user should not normally change (a
reply schema's limit, a prompt's window): the Context still carries it, and its schema says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, field
from typing import Any

DESCRIPTION = "description"
USER_SETTABLE = "user_settable"


def setting(
    default: Any = MISSING, *, meaning: str, user_settable: bool = True, factory: Callable[[], Any] | None = None
) -> Any:
    """A dataclass field that the run's Context exposes: its default (or `factory` for a mapping) and its meaning."""
    metadata = {DESCRIPTION: meaning, USER_SETTABLE: user_settable}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)
