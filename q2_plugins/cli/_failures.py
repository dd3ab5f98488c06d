"""How a ``q2`` command that fails ends: one line naming what to change and an exit code (2: the user can fix it;
1: a bug; 128 + N: signal N; 130: Ctrl-C). A run that stopped part-way says what it committed, where, and the
command that continues it. ``Q2_DEBUG=1`` shows the traceback instead."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from q2_plugins.cli.score import Terminated
from q2_plugins.io.inputs import InputFormatError
from q2_plugins.jobs.partial import stopped_run
from q2_plugins.metric.errors import ModelLoadError, NamesSetting

__all__ = ["run_command", "DEBUG_VARIABLE"]

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


def run_command(command: str, function: Callable[[Any], int], args: Any, argv: list[str],
                flag_of: Callable[[str], str]) -> int:
    """Run ``q2 command`` (``function(args)``) and return its exit code; a failure is one line on standard error,
    a library setting named by its flag (``flag_of``)."""

    def fail(line: str, code: int = 2) -> int:
        if os.environ.get(DEBUG_VARIABLE, "").strip() not in ("", "0"):
            raise  # the traceback, as asked
        print(f"q2 {command}: error: {line}", file=sys.stderr)
        return code

    try:
        try:
            return function(args)
        except BaseException as e:
            if stopped_run(e) is None:
                raise
            return _stopped(command, e, argv)
    except NamesSetting as e:  # a library error names its setting; the command line names the flag
        return fail(str(e.named(flag_of)))
    except ModuleNotFoundError as e:  # an extra that is not installed
        return fail(_missing_package(e))
    except OSError as e:  # "[Errno 2] No such file or directory: 'x'" -> "x: no such file or directory"
        what = f"{e.filename}: {e.strerror[0].lower()}{e.strerror[1:]}" if e.filename and e.strerror else e
        return fail(str(what))
    except (InputFormatError, ModelLoadError, ValueError) as e:
        return fail(str(e))
    except Terminated as e:
        print(f"q2 {command}: terminated ({e})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print(f"q2 {command}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        return fail(f"out of memory; lower --chunk-size or --batch-size ({DEBUG_VARIABLE}=1 shows the traceback)", 1)
    except Exception as e:  # noqa: BLE001 - a bug: one line that says how to see (and report) it
        first = " ".join(str(e).split())[:300]
        return fail(f"{type(e).__name__}: {first} (an internal error; {DEBUG_VARIABLE}=1 shows the traceback)", 1)
