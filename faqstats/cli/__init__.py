"""Command-line interface: argument parsing only; the work lives in the library."""

from __future__ import annotations

import argparse
import json
import sys

from .experiment import add_demo_parser, add_draw_bank_parser, add_experiment_parser
from .fit_history import add_fit_history_parser
from .question_table import add_question_table_parser
from .session import add_session_parser, run_record

__all__ = ["build_parser", "main"]


def build_parser():
    """The ``faqstats`` parser, a subcommand each (``args.func`` runs it)."""
    parser = argparse.ArgumentParser(prog="faqstats", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_demo_parser(sub)
    add_experiment_parser(sub)
    add_draw_bank_parser(sub)
    add_fit_history_parser(sub)
    add_session_parser(sub)
    add_question_table_parser(sub)
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
    except (ValueError, TypeError, KeyError, OSError, RuntimeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        message = " ".join(str(message).split())  # one line
        if getattr(args, "json", False):
            print(json.dumps({"error": message}))
        print(f"faqstats: error: {message}", file=sys.stderr)
        return 2
