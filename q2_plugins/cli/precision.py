"""``q2 check-precision``: N rows of the user's file scored in float32 and in the chosen precision or backend, and
what changes (:mod:`q2_plugins.metric.precision`)."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from typing import Any, Callable

from q2_plugins.cli._common import add_column_flags, add_help_all, common
from q2_plugins.io.inputs import read_rows
from q2_plugins.metric.config import config_from_args
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.precision import TOLERANCE, compare, describe, reference_config

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, add_config_flags: Callable[[argparse.ArgumentParser], None],
               formatter: Any = argparse.HelpFormatter) -> argparse.ArgumentParser:
    """Add the ``check-precision`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    p = sub.add_parser(
        "check-precision", formatter_class=formatter,
        help="score N rows in float32 and in the chosen precision / backend: speed, score and decision changes",
        description="Scores the first --rows rows of --input twice: in float32 (transformers models, this package's "
                    "fast paths) and with the settings given (--dtype bfloat16, --dtype tf32 --device cuda, "
                    "--qg-model ct2:MODEL, --qa-model onnx:MODEL, ...), then prints the speed ratio, the score MAE "
                    "and correlation, the share of responses whose score moves by more than 0.05, the shares of "
                    "filter decisions and NLI labels that flip, and the knowledge answers and F1s that change. "
                    "docs/performance.md")
    g = p.add_argument_group("input")
    common(g.add_argument("--input", required=True, metavar="FILE", help="JSONL or CSV/TSV file, one response per row"))
    g.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    add_column_flags(g)
    common(g.add_argument("--rows", type=int, default=64, metavar="N", help="rows compared (default: %(default)s)"))
    g.add_argument("--format", choices=("text", "json"), default="text")
    add_config_flags(p)
    add_help_all(p, "columns, revisions, decoding, budgets, batching, per-role")
    return p


def run(args: argparse.Namespace) -> int:
    """Score, compare and print; 0 when both runs scored, 2 on a setting or input that cannot work."""
    from q2_plugins.scorer import Q2Scorer  # (lazy: numpy; the CLI imports without it)

    if args.rows < 1:
        raise SettingError("rows", f"must be a positive integer, got {args.rows!r}")
    config = config_from_args(args).replace(precision_check=0)
    columns = (args.response_column, args.knowledge_column)
    records = [r for r in itertools.islice(read_rows(args.input, args.input_format, columns,
                                                     ("response_column", "knowledge_column")), args.rows)]
    responses = [r.get(args.response_column) for r in records]
    knowledge = [r.get(args.knowledge_column) for r in records]
    reference = Q2Scorer(reference_config(config, library_paths=False)).load(quiet=True)
    checked = Q2Scorer(config).load(quiet=True)  # both loaded before either is timed
    results, seconds = {}, {}
    for name, scorer in (("reference", reference), ("checked", checked)):
        t0 = time.perf_counter()
        results[name] = scorer.score(responses=responses, knowledge=knowledge, explain=True)
        _synchronize(scorer.config)
        seconds[name] = time.perf_counter() - t0
    agreement = compare(results["reference"].responses, results["checked"].responses)
    agreement.reference, agreement.checked = describe(reference.config), describe(config)
    agreement.seconds = seconds
    below = agreement.below(TOLERANCE)
    if args.format == "json":
        print(json.dumps({**agreement.to_dict(), "signatures": {"reference": str(results["reference"].signature),
                                                                "checked": str(results["checked"].signature)}},
                         indent=2))
    else:
        print("\n".join(agreement.lines()))
        print(f"tolerance     {'below: ' + '; '.join(below) if below else 'within'} (moved <= {TOLERANCE.moved:.0%}, "
              f"flips <= {TOLERANCE.filter_flips:.0%} / {TOLERANCE.nli_flips:.0%}; first passes included: time "
              f"more rows for steady-state speed)")
    if len(records) < args.rows:
        print(f"q2 check-precision: {args.input} has {len(records)} rows, fewer than --rows {args.rows}",
              file=sys.stderr)
    return 0


def _synchronize(config: Any) -> None:
    """Wait for a GPU's queued work, so a run's time is its own (CUDA runs asynchronously)."""
    import torch

    if any(str(config.role_device(r)).startswith("cuda") for r in ("qg", "qa", "nli")) and torch.cuda.is_available():
        torch.cuda.synchronize()
