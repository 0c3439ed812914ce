"""Command-line interface: argument parsing only; the work lives in the library."""

import argparse
import json
import sys

from .experiment import add_demo_parser, add_draw_bank_parser, add_experiment_parser
from .fit_history import add_fit_history_parser
from .history import add_history_parser
from .question_table import add_question_table_parser
from .session import add_session_parser, run_record

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are one ``faqstats: error:`` line (exit status 2), as other errors are."""

    def error(self, message):
        command = self.prog.removeprefix("faqstats").strip()
        self.exit(2, f"faqstats: error: {command + ': ' if command else ''}{' '.join(message.split())} "
                     f"(see: {self.prog} --help)\n")


def build_parser():
    """The ``faqstats`` parser, a subcommand each (``args.func`` runs it)."""
    parser = _Parser(prog="faqstats", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (add_demo_parser, add_experiment_parser, add_draw_bank_parser, add_fit_history_parser,
                add_history_parser, add_session_parser, add_question_table_parser):
        add(sub)
    return parser


def main(argv=None):
    """Run ``faqstats`` on ``argv`` (default: the command line); the exit status (2 on an error,
    printed as one ``faqstats: error:`` line, and with ``--json`` as ``{"error": ...}`` too)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # ``session record DIR --json ID VALUE``: argparse gives the pairs after an option back as extras
    if getattr(args, "func", None) is run_record and extra and not any(x.startswith("-") for x in extra):
        args.pairs, extra = list(args.pairs) + extra, []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args) or 0
    except (ValueError, TypeError, KeyError, OSError, RuntimeError, MemoryError, ArithmeticError) as exc:
        return _refused(args, _error_message(exc))


def _error_message(exc):
    """What went wrong, in one line; the last resort (memory, disk, recursion) says what to do."""
    if isinstance(exc, MemoryError):
        return ("out of memory" + (f" ({exc})" if str(exc) else "") + "; files are written whole or not at all. "
                "Free memory or use a smaller input.")
    if isinstance(exc, RecursionError):
        return f"an input is nested too deeply to read ({exc})."
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}" + (f" (and {exc.filename2})" if exc.filename2 else "")
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return str(message) or type(exc).__name__


def _refused(args, message):
    message = " ".join(str(message).split())  # one line
    if getattr(args, "json", False):
        print(json.dumps({"error": message}))
    print(f"faqstats: error: {message}", file=sys.stderr)
    return 2
