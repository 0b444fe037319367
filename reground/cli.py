"""`reground` command line: llm, ingest, ask, chat, demo, eval, ui.

Every error ends in one line on stderr and a distinct exit code: 2 bad input, 3 documents or store,
4 a model that is down, 1 a bug (an exception reground did not expect), 130 interrupted, 141 the reader of
its output went away (`reground ask ... | head -1`), which ends it quietly, as Unix tools do. `--debug`
adds the traceback and lets libraries' warnings through (without it they never reach stderr).

Nothing a command prints reaches the terminal raw: stdout and stderr strip control characters and escape
sequences (tools/text/terminal.py), whatever document, file name or library the text came from.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence

BUG_EXIT_CODE = 1
INTERRUPTED_EXIT_CODE = 130  # fact: 128 + SIGINT, what a shell reports for a Unix tool stopped by Ctrl-C
CLOSED_PIPE_EXIT_CODE = 141  # fact: 128 + SIGPIPE, what a shell reports for a Unix tool whose reader left


def command_of(argv: Sequence[str]) -> str | None:
    """The sub-command an argument list runs (its first word that is not an option), or None."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser for `argv`: the module of the command it names adds its commands in full; every other command is
    listed by name and help only, so a command imports nothing of the others (`reground ask` loads no measuring
    code, `reground --help` no module at all)."""
    from reground.commands import COMMANDS

    parser = argparse.ArgumentParser(
        prog="reground",
        description="Faithful conversational question answering over your own documents (LangGraph).",
    )
    parser.add_argument("--debug", action="store_true", help="print the full traceback when a command fails")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = COMMANDS.get(command_of(argv) or "", ("", ""))[0]
    for name, (group, summary) in COMMANDS.items():
        if group != chosen:
            subparsers.add_parser(name, help=summary)
        elif name not in subparsers.choices:
            importlib.import_module(f"reground.commands.{group}").add_commands(subparsers)
    return parser


def one_line(text: str) -> str:
    """A message folded onto one line (a library's multi-line message must not look like a traceback)."""
    return " ".join(str(text).split())


def report_error(exc: BaseException, *, debug: bool = False) -> int:
    """Print what went wrong on one line (plus the traceback with --debug) and return the exit code."""
    from reground.tools.errors import RegroundError

    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, RegroundError):
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return int(exc.exit_code)
    detail = one_line(str(exc)) or "no message"
    hint = "" if debug else "; rerun with --debug for the traceback"
    print(
        f"error: unexpected {type(exc).__module__}.{type(exc).__name__}: {detail} (this is a bug in reground, "
        f"please report it{hint})",
        file=sys.stderr,
    )
    return BUG_EXIT_CODE


def _split_debug(argv: Sequence[str]) -> tuple[list[str], bool]:
    """`--debug` is accepted anywhere before a `--` (e.g. after the sub-command too)."""
    args = list(argv)
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    return [a for i, a in enumerate(args) if i >= end or a != "--debug"], debug


@contextlib.contextmanager
def terminal_safe_streams() -> Iterator[None]:
    """stdout and stderr strip control characters and escape sequences while a command runs."""
    from reground.tools.text.terminal import SafeStream

    saved = sys.stdout, sys.stderr
    sys.stdout = SafeStream(saved[0])
    sys.stderr = SafeStream(saved[1], keep_cr=True)  # tqdm redraws with \r
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def quiet_libraries(debug: bool) -> Iterator[None]:
    """Libraries' warnings (pypdf on a corrupt PDF, deprecations) and log records stay off stderr unless --debug:
    the user gets reground's one line about what happened, not a library's aside before it."""
    root = logging.getLogger()
    if debug:
        # Shown on stderr whatever handlers the host process set up (logging's last resort only serves a bare root).
        loud = logging.StreamHandler(sys.stderr)
        loud.setLevel(logging.WARNING)
        root.addHandler(loud)
        try:
            yield
        finally:
            root.removeHandler(loud)
        return
    silent = logging.NullHandler()  # root has a handler: logging's last resort (stderr, WARNING+) is not used
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.addHandler(silent)
        try:
            yield
        finally:
            root.removeHandler(silent)


def closed_pipe() -> int:
    """The reader of stdout left (`| head -1`): point stdout at /dev/null so the interpreter's last flush does
    not fail again, and end quietly."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)
    return CLOSED_PIPE_EXIT_CODE


def main(argv: Sequence[str] | None = None) -> int:
    rest, debug = _split_debug(sys.argv[1:] if argv is None else argv)
    parser = build_parser(rest)
    args = parser.parse_args(rest)
    args.debug = debug
    handler = getattr(args, "func", None)
    if handler is None:
        parser.print_help()
        return 2
    with terminal_safe_streams(), quiet_libraries(debug):
        try:
            code = int(handler(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at exit
            return code
        except BrokenPipeError:
            return closed_pipe()
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return INTERRUPTED_EXIT_CODE
        except SystemExit:
            raise
        except Exception as exc:
            return report_error(exc, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
