"""``q2 replay``: its flags, mapped onto a :class:`~q2_plugins.jobs.replay.ReplayJob`."""

from __future__ import annotations

import argparse
from typing import Any

from q2_plugins.cli._common import DefaultsHelp

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``replay`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""

    r = sub.add_parser("replay", help="score recorded per-question outputs of the original pipeline",
                       formatter_class=DefaultsHelp)
    r.add_argument("--steps", required=True, nargs="+", help="*_out.steps.csv file(s)")
    r.add_argument("--scores", nargs="*", default=[],
                   help="matching *_scores.csv file(s): recorded fallback values for responses without questions")
    r.add_argument("--output", help="JSONL file of per-response results")
    r.add_argument("--explain", action="store_true")
    r.add_argument("--format", choices=("text", "json"), default="text")
    r.add_argument("--normalization", default="q2-original", choices=("q2-original", "squad"))
    r.add_argument("--discard-unanswerable", action="store_true",
                   help="Q2*: questions with no answer in the knowledge do not count when another one has an answer")
    r.add_argument("--html", help="also write an HTML report of the results here (implies --explain)")
    return r


def run(args: argparse.Namespace) -> int:
    """``q2 replay``: the flags mapped onto a :class:`~q2_plugins.jobs.replay.ReplayJob`."""
    from q2_plugins.jobs.replay import ReplayJob, run_replay  # (lazy: numpy; the CLI imports without it)

    return run_replay(ReplayJob(
        steps=list(args.steps), scores=list(args.scores), output=args.output, html=args.html, explain=args.explain,
        normalization=args.normalization, discard_unanswerable=args.discard_unanswerable, summary_format=args.format))
