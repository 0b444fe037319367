"""How a tuned value the run's Context exposes is declared: once, here in tools/tuning/, with its default, its
one-line meaning and its bounds; the Context's field is generated from it (nodes/context_base.py `tuned` for a
group's field; a settings dataclass the Context holds, RetrievalSettings or IndexSettings, is read by pydantic with
the same metadata), so neither the value, its description nor its bounds has a second copy. `user_settable=False`
marks a value a user should not normally change (a reply schema's limit, a prompt's window): the Context still
carries it, and its schema says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, field
from typing import Any

# Metadata keys: pydantic reads a dataclass field's metadata under these names as the field's own (Studio's form
# shows the description and the bounds), so they are pydantic's Field arguments.
DESCRIPTION = "description"
USER_SETTABLE = "user_settable"
SCHEMA_EXTRA = "json_schema_extra"
BOUNDS = ("ge", "gt", "le", "lt")


def setting(
    default: Any = MISSING,
    *,
    meaning: str,
    user_settable: bool = True,
    factory: Callable[[], Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    shown_maximum: float | None = None,
) -> Any:
    """A dataclass field that the run's Context exposes: its default (or `factory` for a mapping), its meaning and
    its bounds (`ge`, `gt`, `le`, `lt`: validated and shown as the form's minimum and maximum). `shown_maximum`: a
    maximum the form shows that a validator of the Context's enforces with its own message (pydantic's would name
    only the number)."""
    metadata: dict[str, Any] = {DESCRIPTION: meaning, USER_SETTABLE: user_settable}
    bounds = {"ge": ge, "gt": gt, "le": le, "lt": lt}
    metadata.update({name: value for name, value in bounds.items() if value is not None})
    extra: dict[str, Any] = {}
    if not user_settable:
        extra[USER_SETTABLE] = False
    if shown_maximum is not None:
        extra["maximum"] = shown_maximum
    if extra:
        metadata[SCHEMA_EXTRA] = extra
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)
