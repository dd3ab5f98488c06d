"""The Ray engine of ``q2 score --engine ray``: a :class:`~q2_plugins.jobs.ScoreJob` read as a Ray dataset, scored on
an actor pool (:mod:`q2_plugins.jobs.ray.dataset`), written (or split, in filter mode) with each output's sidecar.

Needs the ``ray`` extra: ``pip install 'q2-plugins[ray]'``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pyarrow as pa
import ray
import ray.data

from q2_plugins.io.inputs import FORMATS, InputFormatError, count_records
from q2_plugins.io.outputs import PartialReplacedError, ResultFile, retire_results
from q2_plugins.io.rows import dropped_path, write_meta
from q2_plugins.jobs import ScoreJob
from q2_plugins.jobs.local import KeptRows, resumable, run_record
from q2_plugins.jobs.partial import (
    PartialRows,
    ResumeError,
    RunRecord,
    StoppedRun,
    check_resume,
    committed_rows,
    mark_stopped,
    ray_stages,
    record_path,
    resumable_on_ray,
    stopped_run,
)
from q2_plugins.jobs.ray.dataset import (
    LostBlocks,
    Q2BatchScorer,
    block_stats,
    check_columns,
    check_record_columns,
    format_of,
    map_scorer,
    model_check_result,
    read_dataset,
    start_model_check,
)
from q2_plugins.jobs.ray.staging import (
    StagedOutput,
    Staging,
    commit_staged,
    discard,
    nested_row,
    retire_old_parts,
    write_staged,
)
from q2_plugins.jobs.ray.stderr_filter import plain_cause, stderr_without
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.precision import Agreement, check_due, precision_line, warn_if_below
from q2_plugins.metric.progress import Progress, loading_line
from q2_plugins.metric.results import Q2Stats, cache_line, print_summary

__all__ = ["run_score"]


class _RunTally:
    """What the run's actors tell the driver (an actor with no CPU): counts added up from every actor's batches (cache
    hits, misses and failed checks; scored rows), and values put once (the precision check's figures), with the
    right to do a run-wide task once (:meth:`claim`: the first caller gets it)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {"hits": 0, "misses": 0, "failed_checks": 0}
        self.values: dict[str, Any] = {}
        self.claimed: set[str] = set()

    def add(self, counts: dict[str, int]) -> None:
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v

    def totals(self) -> dict[str, int]:
        return dict(self.counts)

    def claim(self, name: str) -> bool:
        first = name not in self.claimed
        self.claimed.add(name)
        return first

    def put(self, name: str, value: Any) -> None:
        self.values[name] = value

    def get(self, name: str) -> Any:
        return self.values.get(name)


# Ray Data (2.60) hands every actor of its pool its context and map function as object-store references and
# lets actors restart; Ray's C++ core worker then logs, as an error, on this process's file descriptor 2 (out of
# Python logging's reach), that such an actor cannot restart once those objects are gone. They live as long as the
# run's dataset does, so the line is a harmless fact here; only that line is left out, every other line of the
# core worker (real errors among them) passes.
_HARMLESS_CORE_LINE = ("core_worker.cc", "has constructor arguments in the object store and max_restarts > 0")


def _start(job: ScoreJob) -> None:
    """A local Ray instance (or the cluster at ``ray_address``) set up for one ``q2 score`` run."""
    if not ray.is_initialized():
        ray.init(address=job.ray.ray_address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    # Ray Data's bars in a log (on a terminal the run's own bar counts the rows; without progress, none)
    ray_bars = job.progress and not sys.stderr.isatty()
    # Ray Data's per-execution INFO lines; with its bars off also its warning that they are off
    logging.getLogger("ray.data").setLevel(logging.WARNING if ray_bars else logging.ERROR)
    # ...and its warning that no CPU is free, when the actors hold them all: every other step here needs none
    logging.getLogger("ray.data.dataset").addFilter(lambda r: "does not have any available CPUs" not in r.getMessage())
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # output rows in input order, as q2 score writes them
    ctx.enable_progress_bars = ray_bars


def _scoring(job: ScoreJob, config: Q2Config, counter: Optional[Any], tally: Optional[Any] = None,
             skip: int = 0) -> tuple["ray.data.Dataset", Any, Optional[Any], Optional[int]]:
    """The input, read and checked, to be scored on the actor pool (lazy; without its first ``skip`` records), the
    model check's reference (:func:`model_check_result` gives the signature), the counter of scored rows for the
    progress lines and the number of rows to score (None when unknown)."""
    path = Path(job.input)
    kind = format_of(path, job.input_format, "input_format") if path.exists() else job.input_format
    ds = read_dataset(path, kind, rows_per_block=job.ray.batch_size, skip=skip)  # no input: read_dataset's error
    spec = job.rows
    if kind == "parquet":
        check_columns(ds.schema().names, spec)
    else:
        check_record_columns(path, kind, spec.required, spec.settings)
    if job.progress:  # the actors load quietly: one line for the run
        print(f"{loading_line(config)} (once to check them, then in each of {job.ray.concurrency} Ray actor(s))",
              file=sys.stderr, flush=True)
    # the models are checked in a task while the actors start and load them (the actors wait for its result)
    check = start_model_check(config, num_cpus=0, num_gpus=job.ray.num_gpus_per_worker)
    rows = ray.remote(num_cpus=0)(_RunTally).remote() if job.progress else None
    scored = map_scorer(ds, config, rows=spec, prefix="", concurrency=job.ray.concurrency,
                        num_cpus=job.ray.num_cpus_per_worker, num_gpus=job.ray.num_gpus_per_worker,
                        batch_size=job.ray.batch_size, max_restarts=-1, max_task_retries=3, signature=[check],
                        scorer_class=Q2BatchScorer, ray_remote_args=None, cache_counter=counter, row_counter=rows,
                        precision_tally=tally)
    total = _row_total(path, kind, ds)
    return scored, check, rows, None if total is None else max(0, total - skip)


def _row_total(path: Path, kind: str, ds: "ray.data.Dataset") -> Optional[int]:
    """The input's row count, for the progress lines: counted in the file, or from Parquet's metadata."""
    if kind == "parquet":
        return ds.count()
    return count_records(path, kind) if path.is_file() else None


@contextlib.contextmanager
def _row_lines(rows: Optional[Any], total: Optional[int], every: float = 1.0) -> Iterator[None]:
    """While the block runs, the actors' count of scored rows (``rows``, a counter actor), read every ``every``
    seconds (half that on a terminal): a bar on a terminal (rows done / total, rate, time left; Ray Data's own bars
    are off there), a plain ``q2 rows: done/total`` line whenever the count has moved in a log, and one at the end."""
    if rows is None:
        yield
        return
    import threading

    stop = threading.Event()
    terminal = sys.stderr.isatty()
    progress = Progress(total=total, plain=not terminal, stage_bars=False, every=0.0)
    every = every / 2 if terminal else every

    def count() -> None:
        shown, finished = 0, False
        while not finished:
            finished = stop.wait(every)  # (once the block has ended: one last reading)
            try:
                done = ray.get(rows.totals.remote()).get("rows", 0)
            except Exception:  # Ray stopping under a failed run: the run's own error says what happened
                return
            if total is not None:
                done = min(done, total)  # (a retried batch counts again)
            if done > shown:
                progress.rows_done(done - shown)
                shown = done

    reader = threading.Thread(target=count, daemon=True)
    reader.start()
    try:
        yield
    finally:
        stop.set()
        reader.join()
        progress.close()


def run_score(job: ScoreJob) -> int:
    """``q2 score --engine ray``: read, score on an actor pool, write (or split, in filter mode) with each output's
    ``.meta.json`` (:func:`q2_plugins.io.rows.write_meta`, as the local engine), print the summary; returns the exit
    code. With ``job.config.cache_dir``, the run's cache hits and misses go in the summary and the sidecar."""
    if job.keep_min_score is not None and not job.output:
        raise SettingError("keep_min_score", "filter mode needs an output for the kept rows")
    _check_not_empty_parquet(Path(job.input))
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    ours = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    resume = _before_resume(job)  # (another input or other row settings: refused before Ray starts)
    try:
        _start(job)
    except Exception as e:  # noqa: BLE001 - Ray could not start: said so, in one line
        raise RayStartError(f"Ray could not start ({plain_cause(e)}); try again once the machine is less loaded, "
                            f"or join a running cluster (setting ray_address)") from None
    for s, handler in ours.items():  # ray.init's own SIGTERM handler exits without a word: the caller's stays
        if handler is not None:
            signal.signal(s, handler)
    # a block whose worker died on every try is passed over, not the run's end, where its rows can be told by their
    # positions (one JSONL / CSV / TSV file): they become error rows in place (LostBlocks); for this run only
    ctx = ray.data.DataContext.get_current()
    errored = ctx.max_errored_blocks
    ctx.max_errored_blocks = -1 if LostBlocks.applies(job) else errored
    try:
        with stderr_without(_HARMLESS_CORE_LINE):  # (after ray.init: Ray's own processes keep the real stderr)
            return _run_started(job, resume)
    except (KeyboardInterrupt, OSError) as e:
        if stopped_run(e) is None:  # stopped before its first block was written
            mark_stopped(e, _nothing_written(job))
        raise
    except ray.exceptions.RayError as e:  # a task's error behind Ray's wrapper and colour codes: its cause

        error = RayRunError(f"the Ray run failed: {plain_cause(e)}")
        stopped = stopped_run(e)  # (the rows it kept, and where)
        raise (error if stopped is None else mark_stopped(error, stopped)) from None
    finally:
        ctx.max_errored_blocks = errored


class RayStartError(OSError):
    """Ray could not be started (or the cluster joined) for the run: a failure of the machine or the cluster (one
    line, exit 2), not of the run."""


class RayRunError(RuntimeError):
    """The Ray run failed; the message is the cause in one plain line."""


def _before_resume(job: ScoreJob) -> Optional[Any]:
    """The run's record (:class:`~q2_plugins.jobs.partial.RunRecord`, without its signature) and whether it resumes,
    when it writes an output from a regular input file, with a ``--resume`` checked against the stopped run's (its
    input, row settings and kind of ``.partial``: the signature once the models are checked); None otherwise."""
    if not job.output:
        return None

    run = run_record(job)
    if run is not None and job.resume:
        _check_partial_kind(job)
        if not resumable(job, run):
            from dataclasses import replace

            job = replace(job, resume=False)
    return (run, job.resume) if run is not None else None


def _check_partial_kind(job: ScoreJob) -> None:
    """A ``--resume`` finds the ``.partial`` this run writes: the rows of one JSONL output (a file), or staged blocks
    (a folder); the other kind is refused in one line."""
    partial = Path(f"{job.output}.partial")
    if partial.exists() and partial.is_dir() != ray_stages(job):
        held = "staged blocks (a folder)" if partial.is_dir() else "JSONL rows (a file)"
        raise ResumeError("resume", f"{partial} holds {held} of a run with another output or filter mode; resume "
                                    f"with the same output and filter settings, or score it again from the start")


def _check_not_empty_parquet(path: Path) -> None:
    """A Parquet input file with no row stops here, before Ray starts, as an empty JSONL or a header-only CSV does
    (the JSONL / CSV / TSV checks are the local engine's, in :func:`_scoring`)."""
    if path.is_file() and path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        if pq.read_metadata(path).num_rows == 0:
            raise InputFormatError(f"{path} is an empty Parquet file (no record); there is nothing to score")


def _run_started(job: ScoreJob, resume: Optional[Any] = None) -> int:
    """:func:`run_score` once Ray is started: the rows written as the blocks finish, in input order (one JSONL
    output: to ``OUTPUT.partial``; every other output: staged in the folder ``OUTPUT.partial/``, the result files
    written from it at the end), committed at the end with each output's sidecar; a stopped run keeps them and
    ``--resume`` scores only the rest, with the local engine's checks (input, row settings, signature)."""
    config = job.config
    counter = ray.remote(num_cpus=0)(_RunTally).remote() if config.cache_dir else None
    # a setting the tests cannot run: one actor checks its decisions on its first rows (as the local engine does)
    tally = ray.remote(num_cpus=0)(_RunTally).remote() if config.precision_check and check_due(config) else None
    run, resuming = resume if resume is not None else (None, False)
    sink = _sink(job)
    try:
        skip = sink.committed() if resuming else 0
        scored, check, rows, total = _scoring(job, config, counter, tally, skip=skip)
        kept = KeptRows(job.rows, None)
        lost = LostBlocks(job, skip, None if total is None else skip + total)
        stats, errors, signature = _scored_rows(job, scored, check, rows, total, sink, (run, resuming, kept), lost)
    finally:
        sink.close_unopened()
    extra: dict[str, Any] = {} if counter is None else {"cache": ray.get(counter.totals.remote())}
    if kept.n:
        extra["resumed_after"] = kept.n
    checked = ray.get(tally.get.remote("precision_check")) if tally is not None else None
    if checked is not None:
        extra["precision_check"] = checked
        warn_if_below(Agreement.from_dict(checked))
    summary = {**stats.summary(), **errors.summary()}
    code, problem = stats.exit_code(job.fail_on_error)
    try:
        written = sink.prepare(extra)  # (complete on disk, none in place yet)
        for out, n in written.items():  # the old results go, then the sidecars: results in place have theirs only
            retire_results(out)
            write_meta(out, engine="ray", signature=signature, summary=summary, config=config, rows=n,
                       input=job.input, spec=job.rows, exit_code=code, **extra)
        sink.commit()
    except BaseException as e:
        raise _stopped_streaming(e, sink, job)  # noqa: B904 - e itself, with where its rows are
    if run is not None:
        record_path(job.output).unlink(missing_ok=True)  # (the run is complete)
    print_summary({**summary, **extra}, signature, job.summary_format)
    if job.summary_format == "text":
        _print_extra(extra, config)
    if problem:
        print(f"q2 score: {problem}", file=sys.stderr)
    return code


def _scored_rows(job: ScoreJob, scored: "ray.data.Dataset", check: Any, rows: Optional[Any], total: Optional[int],
                 sink: Any, resume: tuple[Any, bool, Any], lost: LostBlocks) -> tuple[Any, Any, str]:
    """Each block of ``scored``, in input order, to ``sink`` as it finishes (the first one once the models are
    checked and the run begun: :func:`_begin`), the rows of a block that never came back as error rows in its
    place (``lost``); returns the run's figures (the kept rows' with them) and signature. A stop raises with where
    the rows are."""
    stats: Any = None
    errors: Any = None
    signature: Any = None
    try:
        with _row_lines(rows, total):
            for batch in scored.iter_batches(batch_format="pyarrow", batch_size=None):
                if signature is None:  # the first block: the models are checked, the run's signature is known
                    signature = model_check_result(check)
                    stats, errors = _begin(job, *resume, signature, sink)
                for block in (*lost.before(batch), batch):
                    _write_batch(sink, block)
                    stats = stats + _block_summary(block, errors)
            if signature is None:  # (no block came back: a resume of a run stopped after its last row, or all lost)
                signature = model_check_result(check)
                stats, errors = _begin(job, *resume, signature, sink)
            for block in lost.after():
                _write_batch(sink, block)
                stats = stats + _block_summary(block, errors)
    except BaseException as e:
        if not isinstance(e, (KeyboardInterrupt, OSError)):
            model_check_result(check)  # a model that cannot load: the check's error, once
        raise _stopped_streaming(e, sink if sink.opened else None, job)  # noqa: B904 - e, with where its rows are
    return stats, errors, signature


def _begin(job: ScoreJob, run: Optional[Any], resuming: bool, kept: Any, signature: str,
           sink: Any) -> tuple[Any, Any]:
    """Before the first row is written: the resume checked against the signature too (and the ``.partial`` cut
    after its complete rows), or the run's record written; the sink opened; returns the kept rows' figures."""
    from dataclasses import replace

    if run is not None:
        run = replace(run, signature=str(signature))
        if resuming:
            check_resume(job.output, RunRecord.read(job.output), run, signature=True)  # type: ignore[arg-type]
        else:
            run.write(job.output)  # type: ignore[arg-type]
    sink.open(kept, resuming)
    if resuming:
        print(f"q2 score: resuming {job.output}.partial after its {kept.n} committed rows", file=sys.stderr)
    return kept.stats, kept.errors


def _write_batch(sink: Any, batch: "pa.Table") -> None:
    """One finished block's rows to the sink, on disk before the next block is taken."""
    sink.write(batch)


def _block_summary(batch: "pa.Table", errors: Any) -> Any:
    """A block's :class:`~q2_plugins.metric.results.Q2Stats`, its row errors added to ``errors`` (as
    :func:`dataset_summary` adds them up)."""
    import json

    row = block_stats(batch, "").to_pylist()[0]
    for message, count in json.loads(row.pop("error_kinds")):
        errors.add(message, count)
    return Q2Stats(**row)


def _stopped_streaming(e: BaseException, sink: Any, job: ScoreJob) -> BaseException:
    """``e`` with where the rows of a stopped run are: committed to the ``.partial`` (resumable when its input is:
    :func:`~q2_plugins.jobs.partial.resumable_on_ray`)."""
    if stopped_run(e) is not None:
        return e
    if sink is None:
        return mark_stopped(e, _nothing_written(job))
    rows, partial = sink.abandon()
    if isinstance(e, PartialReplacedError):  # (its rows went with the file: nothing to resume)
        return mark_stopped(e, StoppedRun(0, None, job.output, text=f"{job.output} left as it was"))
    failed = getattr(e, "filename", None) if isinstance(e, OSError) else None
    if partial is None:
        return mark_stopped(e, StoppedRun(rows, None, None, failed, text=f"{rows} rows scored, none written (no "
                                                                         f"output)"))
    why = resumable_on_ray(job)
    text = None if why is None else f"{rows} rows committed to {partial}, {job.output} left as it was; this run " \
                                    f"cannot be resumed ({why})"
    return mark_stopped(e, StoppedRun(rows, partial, job.output, failed, text=text))


def _nothing_written(job: ScoreJob) -> Any:
    """What a run stopped before its first block was written left: nothing new (a resumed run's ``.partial`` as it
    was, to resume again)."""
    if not job.output:
        return StoppedRun(0, None, None, text="no row was scored")
    kept = f"; {job.output}.partial kept as it was" if job.resume and Path(f"{job.output}.partial").exists() else ""
    return StoppedRun(0, None, job.output, text=f"no row was written; {job.output} left as it was{kept}")


def _sink(job: ScoreJob) -> Any:
    """Where the run's blocks go: the rows of one JSONL output (:class:`_JsonlRows`), staged blocks
    (:class:`_StagedRows`), or nowhere (no output: the summary alone)."""
    if not job.output:
        return _NoRows()
    return _StagedRows(job) if ray_stages(job) else _JsonlRows(job)


class _NoRows:
    """A run without output: its blocks are counted in the summary, kept nowhere."""

    opened = False

    def committed(self) -> int:
        return 0

    def open(self, kept: Any, resuming: bool) -> None:
        self.opened = True

    def write(self, batch: "pa.Table") -> None:
        pass

    def prepare(self, extra: dict[str, Any]) -> dict[str, int]:
        return {}

    def commit(self) -> None:
        pass

    def abandon(self) -> tuple[int, Optional[Path]]:
        return 0, None

    def close_unopened(self) -> None:
        """The run stopped before its first block was written: what was opened for it is closed."""


class _JsonlRows(_NoRows):
    """One JSONL output without filter mode: each block's rows appended to the file ``OUTPUT.partial`` (flushed to
    disk) as it finishes, the file renamed to ``OUTPUT`` at the end; the JSONL bytes the local engine writes."""

    def __init__(self, job: ScoreJob) -> None:
        self.job, self.partial, self.out = job, Path(f"{job.output}.partial"), None
        # the file opened once, before the models load, and written through that descriptor only (the staged
        # blocks of a run with another output, a folder, are removed when the run begins: the file is made then)
        self.rows = None if self.partial.is_dir() and not self.partial.is_symlink() else PartialRows(job.output)

    def committed(self) -> int:
        return self.rows.committed()[0] if self.rows is not None else 0

    def open(self, kept: Any, resuming: bool) -> None:
        if self.rows is None:  # (the staged blocks of a run with another output)
            discard(self.partial)
            self.out = ResultFile(str(self.job.output), kept=0)
        else:
            if resuming:
                kept.n = self.rows.keep(kept.add)
            else:
                self.rows.begin()
            self.out = self.rows.result_file(kept.n)
        self.opened = True

    def close_unopened(self) -> None:
        if self.rows is not None and not self.opened:
            self.rows.close()

    def write(self, batch: "pa.Table") -> None:
        for row in batch.to_pylist():
            self.out.write(nested_row(row))
        self.out.flush()

    def prepare(self, extra: dict[str, Any]) -> dict[str, int]:
        return {str(self.out.target): self.out.rows}

    def commit(self) -> None:
        self.out.commit()

    def abandon(self) -> tuple[int, Optional[Path]]:
        partial, rows = self.out.abandon(), self.out.rows
        try:
            rows = committed_rows(partial)[0]
        except OSError:
            pass
        return rows, partial


class _StagedRows(_NoRows):
    """Every other output (Parquet / CSV / TSV files, folders, filter mode): each block committed to the staging
    folder ``OUTPUT.partial/`` as it finishes (:class:`~q2_plugins.jobs.ray.staging.Staging`); at the end the result
    file(s) written from the staged blocks, filter mode split there, each put in place after its sidecar."""

    def __init__(self, job: ScoreJob) -> None:
        folder_kind = None

        def output(path: str, kept: Optional[bool], setting: str) -> StagedOutput:
            nonlocal folder_kind
            kind = FORMATS.get(Path(path).suffix.lower())
            if kind is None and folder_kind is None:  # a folder of part files, in the input's format
                folder_kind = format_of(Path(job.input), job.input_format, "input_format")
            return StagedOutput(Path(path), kind or folder_kind, kind is None, kept, setting)  # type: ignore[arg-type]

        self.job, self.path, self.staging = job, Path(f"{job.output}.partial"), None
        filtering = job.keep_min_score is not None
        # (each output as it was named: the sidecar and the summary say it so)
        self.names = [str(job.output), *([job.dropped_output or str(dropped_path(job.output))] if filtering else [])]
        self.outputs = [output(self.names[0], True if filtering else None, "output")]
        if filtering:
            self.outputs.append(output(self.names[1], False, "dropped_output"))

    def committed(self) -> int:
        staging = Staging(self.path)
        try:
            return staging.committed()
        finally:
            staging.close()

    def open(self, kept: Any, resuming: bool) -> None:
        if not resuming and self.path.is_file():  # (the rows of a stopped run with one JSONL output)
            discard(self.path)
        self.staging = Staging(self.path)
        self.opened = True
        if not resuming:
            self.staging.clear()
            return

        def keep(block: "pa.Table") -> None:
            kept.stats = kept.stats + _block_summary(block, kept.errors)

        kept.n = self.staging.keep(keep)

    def write(self, batch: "pa.Table") -> None:
        self.staging.add(batch)

    def prepare(self, extra: dict[str, Any]) -> dict[str, int]:
        job = self.job
        write_staged(self.staging, self.outputs, job.keep_min_score, job.keep_unscored)
        retire_old_parts(self.outputs)
        if job.keep_min_score is not None:
            kept, dropped = self.outputs
            extra["filter"] = {"min_score": job.keep_min_score, "unscored": "keep" if job.keep_unscored else "drop",
                               "kept": kept.rows, "dropped": dropped.rows, "kept_output": self.names[0],
                               "dropped_output": self.names[1]}
        return {name: out.rows for name, out in zip(self.names, self.outputs)}

    def commit(self) -> None:
        commit_staged(self.staging, self.outputs)

    def abandon(self) -> tuple[int, Optional[Path]]:
        self.staging.close()
        return self.staging.rows, self.path


def _print_extra(extra: dict[str, Any], config: Q2Config) -> None:
    if "cache" in extra:
        print(cache_line(extra["cache"], config.cache_dir))
    if "precision_check" in extra:
        print(precision_line(extra["precision_check"]))
    if "filter" in extra:
        f = extra["filter"]
        print(f"filter        kept {f['kept']} -> {f['kept_output']}  dropped {f['dropped']} -> "
              f"{f['dropped_output']}  (q2 >= {f['min_score']}; unscored rows: {f['unscored']})")
