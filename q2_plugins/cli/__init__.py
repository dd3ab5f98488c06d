"""Command line: ``q2 score``, ``q2 replay``, ``q2 report``, ``q2 compare``, ``q2 export``, ``q2 prefetch``,
``q2 meta-eval``, ``q2 perturb``, ``q2 train``, ``q2 hooks``. The only place that knows argparse: each command maps
its flags onto the library's typed options (``q2 score`` onto a :class:`~q2_plugins.jobs.ScoreJob`); config flags map
one-to-one onto :class:`Q2Config`."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.cli._common import DefaultsHelp, Q2Parser, add_help_all, common
from q2_plugins.metric.config import MODEL_KINDS, config_from_args, config_options

__all__ = ["main", "build_parser", "config_from_args"]


_GROUP_TITLES = {
    "models": "models (each named in the signature by its identity)",
    "question generation": "Q2 settings: question generation (each can change a score; in the signature)",
    "question answering": "Q2 settings: question answering",
    "filters and comparison": "Q2 settings: filters and answer comparison",
    "coreference": "Q2 settings: coreference (the paper's appendix A step; off by default)",
    "budgets": "Q2 settings: per-row budgets, each checked before the work it bounds (lengths before any spaCy or "
               "model work; 0 = no limit; docs/failures.md)",
    "runtime": "runtime (how a run goes: never changes a score, not in the signature)",
    "per-role": "per-role model settings (each overrides the setting for all models; the dtype is in the signature)",
}

#: a short --help shows the groups of the score settings as one
_BRIEF_TITLES = {g: "Q2 settings (each can change a score; in the signature)" for g in
                 ("question generation", "question answering", "filters and comparison", "coreference", "budgets")}


#: the metavar of a setting's flag, by the last word of its name (the others: the name in capitals)
_METAVARS = {"model": "MODEL", "revision": "REV", "dir": "DIR", "device": "DEVICE"}


def _add_config_flags(parser: argparse.ArgumentParser, names: Optional[Sequence[str]] = None) -> None:
    """One flag per :class:`Q2Config` field (or per field in ``names``), grouped by what the field means; the
    fields marked ``common`` are the ones a short ``--help`` shows."""
    groups: dict[str, Any] = {}
    for opt in config_options():
        if names is not None and opt.name not in names:
            continue
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(_GROUP_TITLES[opt.group])
            groups[opt.group].brief_title = _BRIEF_TITLES.get(opt.group, _GROUP_TITLES[opt.group])
        flag = "--" + opt.name.replace("_", "-")
        metavar = _METAVARS.get(opt.name.rsplit("_", 1)[-1])
        if opt.type is bool:
            action = groups[opt.group].add_argument(flag, dest=opt.name, action=argparse.BooleanOptionalAction,
                                                    default=opt.default, help=opt.help)
        else:
            shown = "" if opt.default is None else " (default: %(default)s)"
            action = groups[opt.group].add_argument(flag, dest=opt.name, type=opt.type, default=opt.default,
                                                    choices=opt.choices, metavar=metavar, help=opt.help + shown)
        action.common = opt.common  # type: ignore[attr-defined]


def _add_score_io_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("input and output")
    common(g.add_argument("--input", required=True, metavar="FILE", help="JSONL or CSV/TSV file, one response per row"))
    g.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    common(g.add_argument("--response-column", default="response", metavar="COLUMN", help="column of the responses"))
    common(g.add_argument("--knowledge-column", default="knowledge", metavar="COLUMN", help="column of the knowledge"))
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
                               "(the same input and settings; local engine)"))
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


def build_parser() -> argparse.ArgumentParser:
    parser = Q2Parser(prog="q2", description="Q2 factual consistency for knowledge-grounded dialogue")
    parser.add_argument("--version", action="version", version=f"q2_plugins {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("score", help="score a JSONL/CSV file of responses and knowledge", formatter_class=DefaultsHelp)
    add_help_all(p, "revisions, decoding, budgets, batching, per-role, Ray")
    _add_score_io_flags(p)
    _add_config_flags(p)
    _add_ray_flags(p)

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

    h = sub.add_parser("report", help="write a self-contained HTML report of results files",
                       formatter_class=DefaultsHelp)
    h.add_argument("inputs", nargs="+", metavar="RESULTS",
                   help="q2 score / q2 replay output (JSONL), or a per-example file of the framework adapters")
    h.add_argument("--output", required=True, help="the HTML file to write")
    h.add_argument("--title", help="page title (default: the input file names)")
    h.add_argument("--texts", metavar="INPUT",
                   help="the file q2 score read: adds each row's response and knowledge (q2 score output has none)")
    h.add_argument("--response-column", default="response")
    h.add_argument("--knowledge-column", default="knowledge")
    h.add_argument("--history-column", default=None)
    h.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="rows in the page's table: a stated random sample when the files hold more (the summary and "
                        "histogram count every row; default: 10,000)")
    h.add_argument("--all-rows", action="store_true", help="every row in the page's table (a large page)")

    t = sub.add_parser("make-test-models",
                       help="build tiny RANDOM-weight QG/QA/NLI models (offline smoke runs; scores are meaningless)")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--output-dir", help="write DIR/qg, DIR/qa, DIR/nli and DIR/coref (coreference)")
    where.add_argument("--examples", metavar="DIR",
                       help="lay DIR out as the documented examples expect: q2-models/{qg,qa,nli,coref}, "
                            "my-dialogue-model "
                            "(causal LM), my-seq2seq-model (T5), metrics/response_length (an evaluate module)")

    f = sub.add_parser("prefetch", help="download the configured models into a directory, for offline machines",
                       formatter_class=DefaultsHelp)
    f.add_argument("--output-dir", required=True, help="where the models go: DIR/qg, DIR/qa, DIR/nli, DIR/coref")
    _add_config_flags(f, names=[f"{role}_{what}" for role in (*MODEL_KINDS, "coref") for what in ("model", "revision")])

    from q2_plugins.cli.compare import add_parser as add_compare_parser
    from q2_plugins.cli.hooks import add_parser as add_hooks_parser
    from q2_plugins.cli.metaeval import add_parser as add_meta_eval_parser
    from q2_plugins.cli.perturb import add_parser as add_perturb_parser

    add_meta_eval_parser(sub, _add_config_flags, DefaultsHelp)
    add_perturb_parser(sub)
    from q2_plugins.cli.train import add_parser as add_train_parser

    add_train_parser(sub, DefaultsHelp)
    add_hooks_parser(sub)
    add_compare_parser(sub)
    from q2_plugins.cli.export import add_parser as add_export_parser

    add_export_parser(sub)
    from q2_plugins.cli.precision import add_parser as add_precision_parser

    add_precision_parser(sub, _add_config_flags, DefaultsHelp)
    return parser


def _score(args: argparse.Namespace) -> int:
    """``q2 score``: the flags mapped onto a :class:`~q2_plugins.jobs.ScoreJob`, run on the chosen engine."""
    from q2_plugins.jobs import RayEngine, ScoreJob, run_score_job

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
    from q2_plugins.io.rows import RowSpec

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


def _replay(args: argparse.Namespace) -> int:
    """``q2 replay``: the flags mapped onto a :class:`~q2_plugins.jobs.replay.ReplayJob`."""
    from q2_plugins.jobs.replay import ReplayJob, run_replay

    return run_replay(ReplayJob(
        steps=list(args.steps), scores=list(args.scores), output=args.output, html=args.html, explain=args.explain,
        normalization=args.normalization, discard_unanswerable=args.discard_unanswerable, summary_format=args.format))


def _report(args: argparse.Namespace) -> int:
    from q2_plugins.io.outputs import check_outputs, check_writable, html_files, meta_path
    from q2_plugins.jobs.report import report_from_files

    read = [*args.inputs, *map(meta_path, args.inputs), *([args.texts] if args.texts else [])]
    check_outputs(read, [("output", args.output, html_files(args.output))])
    check_writable(args.output, "output")  # an output file's folder must exist (as for every output flag)
    from q2_plugins.jobs.report import MAX_PAGE_ROWS

    if args.max_rows is not None and args.max_rows < 1:
        raise ValueError(f"--max-rows must be at least 1, got {args.max_rows}")
    data = report_from_files(args.inputs, args.output, title=args.title, texts=args.texts,
                             columns=(args.response_column, args.knowledge_column, args.history_column),
                             max_rows=None if args.all_rows else args.max_rows or MAX_PAGE_ROWS)
    sample = f"; the table shows a sample of {len(data.rows):,} (--all-rows: every row)" \
        if len(data.rows) < data.total else ""
    print(f"{args.output}: {_count(data.total, 'response')} ({_count(data.n_errors, 'error')}) from "
          f"{_count(len(data.sources), 'file')}{sample}")
    return 0


def _prefetch(args: argparse.Namespace) -> int:
    """``q2 prefetch``: each role's model copied by the backend its model string names, then loaded once."""
    from q2_plugins import backends
    from q2_plugins.io.outputs import check_writable
    from q2_plugins.metric.signature import model_id

    config = config_from_args(args)
    check_writable(args.output_dir, "output_dir", folder=True)
    out = Path(args.output_dir)
    for role in (*MODEL_KINDS, "coref"):
        target = backends.prefetch(role, out / role, config)  # it loads: a model that cannot fails here
        print(f"{role}: {getattr(config, f'{role}_model')} -> {target}  (signs as {model_id(str(target))})")
    print(f"On the offline machine: --qg-model {out / 'qg'} --qa-model {out / 'qa'} --nli-model {out / 'nli'}"
          f" (with --coref: --coref-model {out / 'coref'})")
    return 0


def _make_test_models(args: argparse.Namespace) -> int:
    from q2_plugins.backends.hf.tiny import build_all, build_examples
    from q2_plugins.io.outputs import check_writable

    check_writable(args.examples or args.output_dir, "examples" if args.examples else "output_dir", folder=True)
    paths = build_examples(args.examples) if args.examples else build_all(args.output_dir)
    for role, path in paths.items():
        print(f"{role}: {path}" + ("" if role.startswith("metrics/") else "  (random weights)"))
    return 0


def _meta_eval(args: argparse.Namespace) -> int:
    from q2_plugins.cli.metaeval import run

    return run(args)


def _perturb(args: argparse.Namespace) -> int:
    from q2_plugins.cli.perturb import run
    from q2_plugins.io.outputs import check_writable

    check_writable(args.output, "output")
    return run(args)


def _compare(args: argparse.Namespace) -> int:
    from q2_plugins.cli.compare import options_from_args
    from q2_plugins.jobs.compare import run

    return run(options_from_args(args))


def _export(args: argparse.Namespace) -> int:
    from q2_plugins.cli.export import run

    return run(args)


def _check_precision(args: argparse.Namespace) -> int:
    from q2_plugins.cli.precision import run

    return run(args)


def _train(args: argparse.Namespace) -> int:
    from q2_plugins.cli.train import options_from_args, run
    from q2_plugins.io.outputs import check_writable

    check_writable(args.output_dir, "output_dir", folder=True)
    try:
        return run(options_from_args(args), args.format)
    except ModuleNotFoundError as e:
        raise SystemExit(f"q2 train: error: {e}") from None


def _hooks(args: argparse.Namespace) -> int:
    from q2_plugins.cli.hooks import run
    from q2_plugins.integrations.hooks import site_dir
    from q2_plugins.io.outputs import check_writable

    if args.action != "status":
        check_writable(site_dir(args.target), "target", folder=True)
    return run(args)


def _flag_names(command: str) -> dict[str, str]:
    """Setting -> flag for the settings of ``command`` whose flag is not the setting's name with dashes."""
    if command == "meta-eval":
        from q2_plugins.cli.metaeval import FLAGS

        return FLAGS
    return {"score": {"batch_size": "--ray-batch-size"}, "perturb": {"inputs": "--input"}}.get(command, {})


def flag_of(command: str) -> Callable[[str], str]:
    """How ``q2 command`` writes a library setting in its errors: its flag (``qg_model`` -> ``--qg-model``)."""
    flags = _flag_names(command)
    return lambda setting: flags.get(setting, "--" + setting.replace("_", "-"))


#: an optional package -> the extra of q2-plugins that installs it (a missing one names its extra)
_EXTRAS = {"sklearn": "metaeval", "scipy": "metaeval", "sacrebleu": "metaeval", "matplotlib": "metaeval",
           "nltk": "metaeval", "bert_score": "bertscore", "accelerate": "train", "ray": "ray", "pyarrow": "ray",
           "evaluate": "evaluate", "datasets": "evaluate", "lm_eval": "lm-eval", "parlai": "parlai",
           "selenium": "report-tests"}
#: set to 1, a failing command shows its traceback (for a bug report) instead of one line
DEBUG_VARIABLE = "Q2_DEBUG"


def _missing_package(e: ModuleNotFoundError) -> str:
    """The line for a package that is not installed: our own message names the extra; a bare one gets it added."""
    text = str(e)
    if "pip install" in text or not e.name:
        return text
    extra = _EXTRAS.get(e.name.split(".")[0])
    fix = f"pip install 'q2-plugins[{extra}]'" if extra else f"pip install {e.name.split('.')[0]}"
    return f"{text}; install it: {fix}"


def _count(n: int, noun: str) -> str:
    """``1 response``, ``2 responses``: a count and its noun in agreement."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _keeping(argv: list[str]) -> str:
    """How a run keeps more of its work when it stops (said after the command that continues it)."""
    cache = "" if "--cache-dir" in argv else "; with --cache-dir DIR the model outputs of rows not yet committed " \
                                              "are kept too"
    return f" (rows are committed every --chunk-size rows or --commit-seconds of work{cache})"


def _stopped(command: str, e: BaseException, argv: list[str]) -> int:
    """The one line of a run that stopped (interrupted, terminated, a failed write): what stopped it, the rows
    committed and where, and the command that continues it; returns the exit code (an internal error is raised
    again after the line, with its traceback)."""
    import errno
    import shlex

    from q2_plugins.jobs.partial import stopped_run

    run = stopped_run(e)
    assert run is not None
    resume = "" if not run.resumable else "; to continue: " + shlex.join(
        ["q2", *argv, *([] if "--resume" in argv else ["--resume"])]) + _keeping(argv)
    if isinstance(e, Terminated):
        why, code = f"terminated ({e})", 128 + e.signum
    elif isinstance(e, KeyboardInterrupt):
        why, code = "interrupted", 130
    elif isinstance(e, OSError):
        where = run.failed or e.filename or "a file"
        why, code = f"error: {where}: {(e.strerror or str(e)).lower()}", 2
        if e.errno == errno.ENOSPC and resume:
            resume = "; free some space, then continue: " + resume.split(": ", 1)[1]
    else:
        from q2_plugins.metric.errors import ModelLoadError, NamesSetting

        known = isinstance(e, (ValueError, ModelLoadError, NamesSetting))  # what main says as one error line
        why, code = (f"error: {e}", 2) if known else (f"the run stopped ({type(e).__name__}: {e})", 1)
    print(f"q2 {command}: {why}: {run.where()}{resume}", file=sys.stderr)
    if code == 1:
        raise e
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``q2`` command: its exit code. An error the user can fix is one line and exit 2 (a bug: one line and
    exit 1); ``Q2_DEBUG=1`` shows the traceback instead."""
    import os

    parser = build_parser()
    args = parser.parse_args(argv)
    from q2_plugins.io.inputs import InputFormatError
    from q2_plugins.metric.errors import ModelLoadError, NamesSetting

    def fail(line: str, code: int = 2) -> int:
        if os.environ.get(DEBUG_VARIABLE, "").strip() not in ("", "0"):
            raise  # the traceback, as asked
        print(f"q2 {args.command}: error: {line}", file=sys.stderr)
        return code

    command = {"score": _score, "replay": _replay, "report": _report, "prefetch": _prefetch,
               "make-test-models": _make_test_models, "meta-eval": _meta_eval,
               "perturb": _perturb, "train": _train, "hooks": _hooks, "compare": _compare,
               "export": _export, "check-precision": _check_precision}[args.command]
    try:
        try:
            return command(args)
        except BaseException as e:
            from q2_plugins.jobs.partial import stopped_run

            if stopped_run(e) is None:
                raise
            return _stopped(args.command, e, sys.argv[1:] if argv is None else list(argv))
    except NamesSetting as e:  # a library error names its setting; the command line names the flag
        return fail(str(e.named(flag_of(args.command))))
    except ModuleNotFoundError as e:  # an extra that is not installed
        return fail(_missing_package(e))
    except OSError as e:  # "[Errno 2] No such file or directory: 'x'" -> "x: no such file or directory"
        what = f"{e.filename}: {e.strerror[0].lower()}{e.strerror[1:]}" if e.filename and e.strerror else e
        return fail(str(what))
    except (InputFormatError, ModelLoadError, ValueError) as e:
        return fail(str(e))
    except Terminated as e:
        print(f"q2 {args.command}: terminated ({e})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print(f"q2 {args.command}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return fail(f"out of memory; lower --chunk-size or --batch-size ({DEBUG_VARIABLE}=1 shows the traceback)", 1)
    except Exception as e:  # noqa: BLE001 - a bug: one line that says how to see (and report) it
        first = " ".join(str(e).split())[:300]
        return fail(f"{type(e).__name__}: {first} (an internal error; {DEBUG_VARIABLE}=1 shows the traceback)", 1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
