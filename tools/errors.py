"""Errors a user can act on: each says what happened and what to do, and carries the CLI's exit code.

Every layer raises these (or subclasses them) for conditions a user can fix; the CLI prints the
message on one line and exits with `exit_code`, and `--debug` shows the traceback. Anything else
escaping is a bug and is reported as one.
"""

from __future__ import annotations


class RegroundError(Exception):
    """Base of the errors a user can act on. The message is one line: what happened, then what to do."""

    exit_code = 1


class InputError(RegroundError, ValueError):
    """Bad input: an empty or letter-less question, a malformed filter, an invalid setting or name."""

    exit_code = 2


class DataError(RegroundError):
    """The documents or the store: a missing or empty collection, an unknown metadata field, a bad file."""

    exit_code = 3


class ModelError(RegroundError):
    """A chat or embedding model that is down, unreachable, or died mid-answer."""

    exit_code = 4
