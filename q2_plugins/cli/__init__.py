"""Command line: ``q2 score``, ``q2 replay``, ``q2 report``, ``q2 compare``, ``q2 export``, ``q2 prefetch``,
``q2 make-test-models``, ``q2 meta-eval``, ``q2 perturb``, ``q2 train``, ``q2 hooks``, ``q2 check-precision``. The only
place that knows argparse: each command's module adds its flags, maps them onto the library's typed options
(``q2 score`` onto a :class:`~q2_plugins.jobs.ScoreJob`; config flags one-to-one onto :class:`Q2Config`) and runs the
command; this module builds the parser and dispatches, and :mod:`._failures` turns a failure into one line and an
exit code."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.cli import compare, export, hooks, metaeval, models, perturb, precision, replay, report, score, train
from q2_plugins.cli._common import DefaultsHelp, Q2Parser, accept_help_all, add_config_flags
from q2_plugins.cli._failures import run_command
from q2_plugins.metric.config import config_from_args

__all__ = ["main", "build_parser", "config_from_args", "flag_of", "COMMANDS"]


def build_parser() -> argparse.ArgumentParser:
    """The ``q2`` parser: one sub-command per module of this package, each adding its own flags."""
    parser = Q2Parser(prog="q2", description="Q2 factual consistency for knowledge-grounded dialogue")
    parser.add_argument("--version", action="version", version=f"q2_plugins {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    score.add_parser(sub)
    replay.add_parser(sub)
    report.add_parser(sub)
    models.add_parsers(sub)
    metaeval.add_parser(sub, add_config_flags, DefaultsHelp)
    perturb.add_parser(sub)
    train.add_parser(sub, DefaultsHelp)
    hooks.add_parser(sub)
    compare.add_parser(sub)
    export.add_parser(sub)
    precision.add_parser(sub, add_config_flags, DefaultsHelp)
    for command in sub.choices.values():
        accept_help_all(command)
    return parser


#: the function that runs each command
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "score": score.run, "replay": replay.run, "report": report.run, "prefetch": models.prefetch,
    "make-test-models": models.make_test_models, "meta-eval": metaeval.run, "perturb": perturb.run, "train": train.run,
    "hooks": hooks.run, "compare": compare.run, "export": export.run, "check-precision": precision.run}

#: each command's settings whose flag is not the setting's name with dashes
_FLAGS = {"score": score.FLAGS, "meta-eval": metaeval.FLAGS, "perturb": perturb.FLAGS, "export": export.FLAGS}


def flag_of(command: str) -> Callable[[str], str]:
    """How ``q2 command`` writes a library setting in its errors: its flag (``qg_model`` -> ``--qg-model``)."""
    flags = _FLAGS.get(command, {})
    return lambda setting: flags.get(setting, "--" + setting.replace("_", "-"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``q2`` command: its exit code. An error the user can fix is one line and exit 2 (a bug: one line and
    exit 1); ``Q2_DEBUG=1`` shows the traceback instead."""
    args = build_parser().parse_args(argv)
    return run_command(args.command, COMMANDS[args.command], args, sys.argv[1:] if argv is None else list(argv),
                       flag_of(args.command))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
