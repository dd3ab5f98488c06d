"""``q2 score``: its flags, mapped onto a :class:`~q2_plugins.jobs.ScoreJob` and run on the chosen engine; SIGTERM
and SIGHUP stop a run as Ctrl-C does."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any, Iterator

from q2_plugins.cli._common import DefaultsHelp, add_column_flags, add_config_flags, add_help_all, common
from q2_plugins.io.rows import RowSpec
from q2_plugins.jobs import RayEngine, ScoreJob, run_score_job
from q2_plugins.metric.config import config_from_args

__all__ = ["add_parser", "run", "Terminated", "FLAGS"]


#: setting -> flag, where the flag is not the setting's name with dashes
FLAGS = {"batch_size": "--ray-batch-size"}


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``score`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    p = sub.add_parser("score", help="score a JSONL/CSV file of responses and knowledge", formatter_class=DefaultsHelp)
    add_help_all(p, "revisions, decoding, budgets, batching, per-role, Ray")
    _add_score_io_flags(p)
    add_config_flags(p)
    _add_ray_flags(p)
    return p


def _add_score_io_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input and output")
    common(g.add_argument("--input", required=True, metavar="FILE", help="JSONL or CSV/TSV file, one response per row"))
    g.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    add_column_flags(g, brief=True)
    common(g.add_argument("--history-column", default=None, metavar="COLUMN",
                          help="optional column with the dialogue history"))
    common(g.add_argument("--output", metavar="FILE", help="JSONL results, one row per input row in order ('-': "
                                                           "standard output); summary, signature and config in "
                                                           "FILE.meta.json"))
    common(g.add_argument("--explain", action="store_true",
                          help="include every question, its answers, F1 and NLI label"))
    g.add_argument("--begin-labels", dest="labels", action="store_true",
                   help="add each response's BEGIN-style label (label, label3, label_reason; docs/taxonomy_stress.md)")
    g.add_argument("--taxonomy-model", metavar="DIR",
                   help="label responses with a five-way model of q2 train --labels 5 instead of the text rules "
                        "(implies --begin-labels; the history column is its previous turn; docs/training.md)")
    common(g.add_argument("--html", metavar="FILE",
                          help="also write an HTML report of the results here (implies --explain and --begin-labels)"))
    g.add_argument("--format", choices=("text", "json"), default="text", help="summary printed on stdout")
    g.add_argument("--fail-on-error", action="store_true",
                   help="exit 1 when any row gets an error (by default only when no row could be scored)")
    g.add_argument("--chunk-size", type=int, default=1000, help="most rows per scoring call (results stream out)")
    g.add_argument("--commit-seconds", type=float, default=30.0, metavar="SECONDS",
                   help="a scoring call also ends after about this much work (at the pace so far), its rows "
                        "committed: a stopped run keeps all but about this much (local engine)")
    common(g.add_argument("--resume", action="store_true",
                          help="continue a stopped run: keep the rows committed to OUTPUT.partial, score the rest "
                               "(the same input and settings; on the ray engine from a JSONL / CSV / TSV input file)"),
                   brief="continue a stopped run: keep the rows committed to OUTPUT.partial, score the rest (the "
                         "same input and settings)")
    common(g.add_argument("--no-progress", action="store_true",
                          help="no progress bars and no 'loading models' line (standard error stays quiet)"))


def _add_ray_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("Ray engine (--engine ray; needs the ray extra; docs/ray.md)")
    common(g.add_argument("--engine", choices=("local", "ray"), default="local",
                          help="local: this process; ray: an actor pool on Ray Data (files or directories in and out)"))
    g.add_argument("--ray-address", help="Ray cluster to join (default: start a local one)")
    g.add_argument("--concurrency", type=int, default=1, help="scoring actors, each loading the models once")
    g.add_argument("--num-cpus-per-worker", type=float, default=1, help="CPUs (torch threads) per actor")
    g.add_argument("--num-gpus-per-worker", type=float, default=None, help="GPUs per actor (with --device cuda)")
    g.add_argument("--ray-batch-size", type=int, default=64, help="rows per scoring call of an actor")
    g.add_argument("--keep-min-score", type=float, default=None,
                   help="filter mode: --output gets rows with q2_score >= this, --dropped-output the others")
    g.add_argument("--unscored", choices=("drop", "keep"), default="drop",
                   help="filter mode: where rows without a score (errors, no valid question) go")
    g.add_argument("--dropped-output", help="filter mode: the dropped rows (default: <output> with .dropped)")


def run(args: argparse.Namespace) -> int:
    """``q2 score``: the flags mapped onto a :class:`~q2_plugins.jobs.ScoreJob`, run on the chosen engine."""

    job = ScoreJob(
        input=args.input, output=args.output, config=config_from_args(args), rows=_row_spec(args),
        input_format=args.input_format, html=args.html, taxonomy_model=args.taxonomy_model,
        keep_min_score=args.keep_min_score, keep_unscored=args.unscored == "keep", dropped_output=args.dropped_output,
        fail_on_error=args.fail_on_error, summary_format=args.format, progress=not args.no_progress,
        chunk_size=args.chunk_size, commit_seconds=args.commit_seconds, engine=args.engine, resume=args.resume,
        ray=RayEngine(ray_address=args.ray_address, concurrency=args.concurrency,
                      num_cpus_per_worker=args.num_cpus_per_worker, num_gpus_per_worker=args.num_gpus_per_worker,
                      batch_size=args.ray_batch_size))
    with _terminate_as_interrupt():
        try:
            code = run_score_job(job)
        except ModuleNotFoundError as e:
            if job.engine != "ray":
                raise
            raise SystemExit(f"q2 score: error: {e}") from None  # the ray extra is not installed
    if not args.output and not args.html:
        print("q2 score: no --output: the per-response results were not saved, only the summary above "
              "(name a file, or - for standard output)", file=sys.stderr)
    return code


def _row_spec(args: argparse.Namespace) -> Any:
    """The flags that say which fields are scored and what each result carries (``--html`` implies both extras)."""

    return RowSpec(response_column=args.response_column, knowledge_column=args.knowledge_column,
                   history_column=args.history_column, explain=args.explain or bool(args.html),
                   labels=args.labels or bool(args.html))


class Terminated(KeyboardInterrupt):
    """The run got SIGTERM or SIGHUP: it stops as on Ctrl-C (the ``.partial`` named), exit code 128 + the signal."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while the run goes, so that it ends as an interrupt does."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    chosen = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    try:
        previous = {s: signal.signal(s, stop) for s in chosen}
    except ValueError:  # not the main thread: signals stay as they are
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


