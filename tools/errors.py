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


# DataError and ModelError are also RuntimeErrors (as InputError is a ValueError): `langgraph dev` / LangGraph
# Platform send an SDK client the message only of exceptions in the builtin families; anything else reaches
# the client as "An internal error occurred" (langgraph_api/serde.py). These messages are meant to be read.


class DataError(RegroundError, RuntimeError):
    """The documents or the store: a missing or empty collection, an unknown metadata field, a bad file."""

    exit_code = 3  # fact: the CLI's documented exit code


class ModelError(RegroundError, RuntimeError):
    """A chat or embedding model that is down, unreachable, or died mid-answer."""

    exit_code = 4  # fact: the CLI's documented exit code
