"""Scoring jobs: files in, files out, on either engine. A :class:`ScoreJob` says everything about one run (what to
read, what to write, the config, the engine); :func:`run_score_job` checks it and runs it on the local engine
(:mod:`q2_plugins.jobs.local`) or on Ray (:mod:`q2_plugins.jobs.ray.engine`). Front ends (the ``q2 score`` command) only
build the job."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

from q2_plugins.backends.accel.device import check_devices
from q2_plugins.io.inputs import FORMATS
from q2_plugins.io.outputs import (
    check_outputs,
    check_own_files,
    check_writable,
    files_written,
    html_files,
    partial_path,
    say_replaced,
)
from q2_plugins.io.rows import RowSpec, dropped_path
from q2_plugins.jobs.partial import check_free_space, lock_output, ray_stages, resumable_on_ray
from q2_plugins.metric.cache import check_cache_dir
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import SettingError

__all__ = ["ScoreJob", "RayEngine", "ENGINES", "check_engine", "check_job_outputs", "run_score_job", "output_locks"]

#: the engines a job runs on
ENGINES = ("local", "ray")
#: what an engine lacks: setting -> why (a job that sets one stops before any work, naming the engine)
_LACKS = {
    "local": {"keep_min_score": "has no filter mode; use the ray engine"},
    "ray": {"html": "writes no HTML report; write it from the Ray output with q2 report --texts INPUT",
            "taxonomy_model": "has no five-way labeller; use the local engine"},
}


@dataclass(frozen=True)
class RayEngine:
    """How the Ray engine runs a job (ignored by the local engine)."""

    ray_address: Optional[str] = None
    concurrency: int = 1
    num_cpus_per_worker: float = 1
    num_gpus_per_worker: Optional[float] = None
    batch_size: int = 64


@dataclass(frozen=True)
class ScoreJob:
    """One scoring run: read ``input``, score its rows with ``config``, write ``output`` (``-``: standard output,
    local engine) with its ``.meta.json``, and optionally an ``html`` report; ``rows`` says which columns are scored
    and what each result carries. Filter mode (``keep_min_score``): ``output`` gets the rows scoring at least that,
    ``dropped_output`` the others (unscored rows go with the kept ones with ``keep_unscored``). ``resume``: keep
    the rows a stopped run committed to ``OUTPUT.partial`` and score the rest (:mod:`q2_plugins.jobs.partial`).
    Rows are scored and committed in chunks of at most ``chunk_size`` rows and about ``commit_seconds`` of work, so a
    stopped run keeps all but its last ``commit_seconds`` or so."""

    input: str
    output: Optional[str] = None
    config: Q2Config = field(default_factory=Q2Config)
    rows: RowSpec = RowSpec()
    input_format: Optional[str] = None
    html: Optional[str] = None
    taxonomy_model: Optional[str] = None
    keep_min_score: Optional[float] = None
    keep_unscored: bool = False
    dropped_output: Optional[str] = None
    fail_on_error: bool = False
    summary_format: str = "text"
    progress: bool = True
    chunk_size: int = 1000
    commit_seconds: float = 30.0  # a chunk is also cut at about this many seconds of work (jobs.local.Pace)
    engine: str = "local"
    ray: RayEngine = RayEngine()
    resume: bool = False  # continue a stopped run from its OUTPUT.partial (jobs.partial); local engine


def check_engine(job: ScoreJob) -> None:
    """Refuse, before any work, a job its engine cannot run; the :class:`SettingError` names the setting and the
    engine that lacks it."""
    if job.engine not in ENGINES:
        raise SettingError("engine", f"unknown engine {job.engine!r}; expected one of {list(ENGINES)}")
    for setting, why in _LACKS[job.engine].items():
        if getattr(job, setting) is not None:
            raise SettingError(setting, f"the {job.engine} engine {why}")
    if job.engine == "ray" and job.output == "-":
        raise SettingError("output", "the ray engine cannot write to standard output; name a file or folder")
    if job.keep_min_score is not None and not job.output:
        raise SettingError("keep_min_score", "filter mode needs an output for the kept rows")
    if job.resume and job.engine == "ray":
        why = resumable_on_ray(job)
        if why:
            raise SettingError("resume", f"the ray engine resumes a run from one JSONL / CSV / TSV input file; "
                                         f"{why}")
    if job.resume and (not job.output or job.output == "-"):
        raise SettingError("resume", "resuming continues OUTPUT.partial: name the output file of the stopped run")


def check_job_outputs(job: ScoreJob) -> None:
    """Every file the job would write (the output with its ``.partial``, ``.meta.json`` and temporaries, the HTML
    report, the dropped rows) against the input, through links too, and each one's folder for being writable: a
    clash or a folder that cannot be made or written stops the run here."""
    written: list[tuple[str, str, list[Path]]] = []  # (setting, path, the files written for it)
    if job.output and job.output != "-":
        written.append(("output", job.output, files_written(job.output)))
    if job.html:
        written.append(("html", job.html, html_files(job.html)))
    if job.keep_min_score is not None and job.output:
        dropped = job.dropped_output or str(dropped_path(job.output))
        written.append(("dropped_output", dropped, files_written(dropped)))
    check_outputs([job.input], written)

    # (a Ray run's OUTPUT.partial may be its folder of staged blocks: jobs.partial.ray_stages)
    staged = [partial_path(job.output)] if job.engine == "ray" and job.output else []
    for setting, path, files in written:  # (the results file itself is replaced by a rename, never written through)
        check_own_files([f for f in files if f != Path(path)], setting, folders=staged)
    for setting, path, _ in written:  # Ray writes a path of no known file format as a folder of part files
        folder = job.engine == "ray" and setting != "html" and Path(path).suffix.lower() not in FORMATS
        # every output file needs its folder (a folder of part files is made), whichever flag and engine
        check_writable(path, setting, folder=folder)
    if job.config.cache_dir:
        check_cache_dir(job.config.cache_dir, job.config.cache_trusted)  # (a cache others can write: refused)
        check_writable(job.config.cache_dir, "cache_dir", folder=True)


def run_score_job(job: ScoreJob) -> int:
    """Check the job (its engine, then every path it writes), then run it; returns the exit code (0; 1 when no row
    could be scored, or any row failed with ``fail_on_error``)."""
    check_engine(job)
    check_job_outputs(job)
    check_devices(job.config)  # a device that is not here: before the input is read or any model loads
    with output_locks(job):  # one writer per output, to the end of the run (a killed run's lock is free again)
        say_replaced("q2 score", [(setting, path) for setting, path in (
            ("output", job.output), ("html", job.html), ("dropped_output", job.dropped_output)) if path])
        _check_space(job)
        return _run(job)


@contextlib.contextmanager
def output_locks(job: ScoreJob) -> Iterator[None]:
    """The lock of every file the job writes (``--output``, ``--html``, filter mode's dropped rows), held while the
    block runs: a second run writing any of them is refused, naming it."""
    with contextlib.ExitStack() as stack:
        for setting, path in _written_files(job):
            stack.enter_context(lock_output(path, setting=setting))
        yield


def _written_files(job: ScoreJob) -> list[tuple[str, str]]:
    """``(setting, path)`` of each file the job writes (standard output is none)."""
    written = [("output", job.output)] if job.output and job.output != "-" else []
    if job.html:
        written.append(("html", job.html))
    if job.keep_min_score is not None and job.output:
        written.append(("dropped_output", job.dropped_output or str(dropped_path(job.output))))
    return written


def _check_space(job: ScoreJob) -> None:
    """The output's folder has room for the estimated output (a resumed run: less the rows it keeps)."""
    if not job.output or job.output == "-":
        return
    source = Path(job.input)
    try:
        size = source.stat().st_size if source.is_file() else sum(
            p.stat().st_size for p in source.rglob("*") if p.is_file())
    except OSError:
        return  # (the reader says what is wrong with the input)

    partial = Path(f"{job.output}.partial")
    staged = job.engine == "ray" and ray_stages(job)  # (its blocks and the results from them, side by side)
    written = 0 if not job.resume else partial.stat().st_size if partial.is_file() else sum(
        p.stat().st_size for p in partial.iterdir() if p.is_file()) if partial.is_dir() else 0
    check_free_space(job.output, size, explain=job.rows.explain, written=written, copies=2 if staged else 1)


def _run(job: ScoreJob) -> int:
    if job.engine == "local":
        from q2_plugins.jobs.local import score_local  # (lazy: the engine imports ScoreJob from this module)

        return score_local(job)
    from q2_plugins.jobs.ray.engine import run_score  # (lazy: ray)

    return run_score(job)
