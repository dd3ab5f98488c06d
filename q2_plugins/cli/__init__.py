"""Command line: ``q2 score``, ``q2 replay``, ``q2 report``, ``q2 compare``, ``q2 export``, ``q2 prefetch``,
``q2 make-test-models``, ``q2 meta-eval``, ``q2 perturb``, ``q2 train``, ``q2 hooks``, ``q2 check-precision``. The only
place that knows argparse: each command's module adds its flags and maps them onto the library's typed options
(``q2 score`` onto a :class:`~q2_plugins.jobs.ScoreJob`; config flags one-to-one onto :class:`Q2Config`); this module
builds the parser, runs the command and turns a failure into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.cli import compare, export, hooks, metaeval, models, perturb, precision, replay, report, score, train
from q2_plugins.cli._common import DefaultsHelp, Q2Parser, add_config_flags
from q2_plugins.cli.score import Terminated
from q2_plugins.integrations.hooks import site_dir
from q2_plugins.io.inputs import InputFormatError
from q2_plugins.io.outputs import check_writable
from q2_plugins.jobs.compare import run as run_compare
from q2_plugins.jobs.partial import stopped_run
from q2_plugins.metric.config import config_from_args
from q2_plugins.metric.errors import ModelLoadError, NamesSetting

__all__ = ["main", "build_parser", "config_from_args"]


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
    return parser


def _perturb(args: argparse.Namespace) -> int:
    check_writable(args.output, "output")
    return perturb.run(args)


def _compare(args: argparse.Namespace) -> int:
    return run_compare(compare.options_from_args(args))


def _train(args: argparse.Namespace) -> int:
    check_writable(args.output_dir, "output_dir", folder=True)
    try:
        return train.run(train.options_from_args(args), args.format)
    except ModuleNotFoundError as e:
        raise SystemExit(f"q2 train: error: {e}") from None


def _hooks(args: argparse.Namespace) -> int:
    if args.action != "status":
        check_writable(site_dir(args.target), "target", folder=True)
    return hooks.run(args)


#: the function that runs each command
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "score": score.run, "replay": replay.run, "report": report.run, "prefetch": models.prefetch,
    "make-test-models": models.make_test_models, "meta-eval": metaeval.run, "perturb": _perturb, "train": _train,
    "hooks": _hooks, "compare": _compare, "export": export.run, "check-precision": precision.run}


def _flag_names(command: str) -> dict[str, str]:
    """Setting -> flag for the settings of ``command`` whose flag is not the setting's name with dashes."""
    if command == "meta-eval":
        return metaeval.FLAGS
    return {"score": {"batch_size": "--ray-batch-size"}, "perturb": {"inputs": "--input"},
            "export": {"dataset_id": "--hub-dataset-id"}}.get(command, {})


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

    def fail(line: str, code: int = 2) -> int:
        if os.environ.get(DEBUG_VARIABLE, "").strip() not in ("", "0"):
            raise  # the traceback, as asked
        print(f"q2 {args.command}: error: {line}", file=sys.stderr)
        return code

    command = COMMANDS[args.command]
    try:
        try:
            return command(args)
        except BaseException as e:
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
