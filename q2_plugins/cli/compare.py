"""``q2 compare``: its flags, mapped onto :class:`~q2_plugins.jobs.compare.CompareOptions`."""

from __future__ import annotations

from typing import Any

from q2_plugins.jobs.compare import CompareConfig, CompareOptions
from q2_plugins.jobs.compare import run as run_compare


def add_parser(sub: Any) -> Any:
    """Add the ``compare`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    p = sub.add_parser("compare", help="is a system's Q2 different from the baseline's? paired significance tests",
                       description="Compare result files of q2 score / q2 replay (or any JSONL / CSV with an id and a "
                                   "score) on the same responses. docs/compare.md")
    p.add_argument("files", nargs="+", metavar="FILE", help="BASELINE SYSTEM [SYSTEM ...]")
    test = p.add_mutually_exclusive_group()
    test.add_argument("--paired-bs", dest="test", action="store_const", const="bs",
                      help="paired bootstrap resampling (the default): intervals, differences and p-values")
    test.add_argument("--paired-ar", dest="test", action="store_const", const="ar",
                      help="approximate randomisation: differences and p-values")
    p.add_argument("--paired-bs-n", type=int, default=1000, help="bootstrap resamples (default: %(default)s)")
    p.add_argument("--paired-ar-n", type=int, default=10000, help="randomisation trials (default: %(default)s)")
    p.add_argument("--seed", type=int, default=12345, help="random seed (default: %(default)s; in the signature)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: %(default)s)")
    p.add_argument("--names", help="comma-separated system names (default: the file names)")
    p.add_argument("--id-field", default="id", help="field of the response ids (default: %(default)s)")
    p.add_argument("--score-field", default="score", help="field of the scores (default: %(default)s)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(test="bs")
    return p


def options_from_args(args: Any) -> CompareOptions:
    """The typed options of a parsed ``q2 compare`` command line."""
    config = CompareConfig(test=args.test, n_samples=args.paired_bs_n if args.test == "bs" else args.paired_ar_n,
                           seed=args.seed, confidence=args.confidence, id_field=args.id_field,
                           score_field=args.score_field)
    return CompareOptions(tuple(args.files), config, tuple(args.names.split(",")) if args.names else None,
                          args.format)


def run(args: Any) -> int:
    """``q2 compare``: the tests run and their table printed; returns the exit code."""
    return run_compare(options_from_args(args))
