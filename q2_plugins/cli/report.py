"""``q2 report``: a self-contained HTML page of result files (:mod:`q2_plugins.jobs.report`)."""

from __future__ import annotations

import argparse
from typing import Any

from q2_plugins.cli._common import DefaultsHelp, add_column_flags, count
from q2_plugins.io.outputs import check_outputs, check_writable, html_files, meta_path, say_replaced
from q2_plugins.jobs.report import MAX_PAGE_ROWS, report_from_files

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``report`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    h = sub.add_parser("report", help="write a self-contained HTML report of results files",
                       formatter_class=DefaultsHelp)
    h.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="q2 score / q2 replay output (JSONL, Parquet, CSV / TSV or a folder of parts), or a "
                        "per-example file of the framework adapters")
    h.add_argument("--output", required=True, help="the HTML file to write")
    h.add_argument("--title", help="page title (default: the input file names)")
    h.add_argument("--texts", metavar="INPUT",
                   help="the input file the results were scored from: adds each row's response and knowledge to "
                        "results that lack them (a framework adapter's per-example file; q2 score and q2 replay "
                        "output already hold both)")
    add_column_flags(h, notes={"response_column": " in --texts", "knowledge_column": " in --texts"})
    h.add_argument("--history-column", default=None, metavar="COLUMN", help="the history column in --texts (optional)")
    h.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="rows in the page's table: a stated random sample when the files hold more (the summary and "
                        "histogram count every row; default: 10,000)")
    h.add_argument("--all-rows", action="store_true", help="every row in the page's table (a large page)")
    return h


def run(args: argparse.Namespace) -> int:
    """``q2 report``: the page written, and one line saying what it holds."""

    read = [*args.inputs, *map(meta_path, args.inputs), *([args.texts] if args.texts else [])]
    check_outputs(read, [("output", args.output, html_files(args.output))])
    check_writable(args.output, "output")  # an output file's folder must exist (as for every output flag)
    say_replaced("q2 report", [("output", args.output)])

    if args.max_rows is not None and args.max_rows < 1:
        raise ValueError(f"--max-rows must be at least 1, got {args.max_rows}")
    data = report_from_files(args.inputs, args.output, title=args.title, texts=args.texts,
                             columns=(args.response_column, args.knowledge_column, args.history_column),
                             max_rows=None if args.all_rows else args.max_rows or MAX_PAGE_ROWS)
    sample = f"; the table shows a sample of {len(data.rows):,} (--all-rows: every row)" \
        if len(data.rows) < data.total else ""
    print(f"{args.output}: {count(data.total, 'response')} ({count(data.n_errors, 'error')}) from "
          f"{count(len(data.sources), 'file')}{sample}")
    return 0
