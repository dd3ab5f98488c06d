"""The local engine: a :class:`~q2_plugins.jobs.ScoreJob` scored in this process, chunk by chunk, result rows
streamed to the output (committed once all are written), with its ``.meta.json`` and optional HTML report."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from q2_plugins import __version__, backends
from q2_plugins import scorer as scorer_module
from q2_plugins.io.inputs import count_records, read_rows
from q2_plugins.io.outputs import PartialReplacedError, ResultFile, retire_results
from q2_plugins.io.rows import response_result, result_row, score_records, write_meta
from q2_plugins.jobs import report
from q2_plugins.jobs.partial import (
    PartialRows,
    ResumeError,
    RunRecord,
    StoppedRun,
    check_resume,
    committed_rows,
    input_identity,
    mark_stopped,
    record_path,
)
from q2_plugins.metric import spacy_worker
from q2_plugins.metric.precision import precision_line
from q2_plugins.metric.progress import Progress, loading_line
from q2_plugins.metric.results import Q2Stats, RowErrors, cache_line, print_summary
from q2_plugins.scorer import Q2Scorer

if TYPE_CHECKING:
    from q2_plugins.jobs import ScoreJob

__all__ = ["score_local", "write_report", "run_record", "resumable", "KeptRows", "Pace"]


def score_local(job: ScoreJob) -> int:
    """Run ``job`` here (its engine and outputs already checked: :func:`~q2_plugins.jobs.run_score_job`); prints
    the summary and returns the exit code. With ``job.resume`` the rows a stopped run committed to its
    ``.partial`` are kept and the rest scored after them (:mod:`q2_plugins.jobs.partial`)."""
    taxonomy = _taxonomy_model(job.taxonomy_model) if job.taxonomy_model else None
    config, spec = job.config, job.rows
    # the file and its columns are checked before anything else
    rows = read_rows(job.input, job.input_format, spec.required, spec.settings)
    run = run_record(job)
    resume = run is not None and job.resume and resumable(job, run)
    stopped = not resume and run is not None and Path(f"{job.output}.partial").is_file() and RunRecord.read(
        job.output) is not None  # type: ignore[arg-type]
    # OUTPUT.partial opened once, before the models load, and written through that descriptor only
    partial = PartialRows(job.output) if job.output and job.output != "-" else None
    try:
        scorer = _loaded(Q2Scorer(config), progress=job.progress)  # a model that cannot load stops here, once
        if run is not None:
            from dataclasses import replace

            run = replace(run, signature=str(scorer.signature))
            if resume:
                check_resume(job.output, RunRecord.read(job.output), run, signature=True)  # type: ignore[arg-type]
            else:
                if stopped:
                    print(f"q2 score: {job.output}.partial of a stopped run is begun again (--resume would continue "
                          f"it)", file=sys.stderr)
                run.write(job.output)  # type: ignore[arg-type]
        report_rows: Optional[list[dict[str, Any]]] = [] if job.html else None
        kept = KeptRows(spec, report_rows)
        if resume:
            kept.take(job, rows, partial)
        elif partial is not None:
            partial.begin()
    except BaseException:
        if partial is not None:
            partial.close()
        raise
    progress = _run_progress(job)
    out = (partial.result_file(kept.n) if partial is not None else ResultFile("-")) if job.output else None
    try:
        stats, errors, signature = _score_rows(scorer, rows, job, out, report_rows, progress, taxonomy, kept)
    finally:
        _close(progress)
    summary = {**stats.summary(), **errors.summary()}
    signature = signature or scorer.signature
    code, problem = stats.exit_code(job.fail_on_error)
    extra: dict[str, Any] = {} if scorer.cache is None else {"cache": scorer.cache.counts()}
    if kept.n:
        extra["resumed_after"] = kept.n
    if job.taxonomy_model:
        extra["taxonomy_model"] = _taxonomy_model_id(job.taxonomy_model)
    if getattr(scorer, "precision_agreement", None) is not None:  # a setting the tests cannot run, checked
        extra["precision_check"] = scorer.precision_agreement.to_dict()
    if report_rows is not None and job.html:
        try:
            write_report(job.html, report_rows, signature, summary, [job.input], config.to_dict())
        except OSError as e:  # the results are saved: the run failed only to write its report, and says so
            code, extra["html_error"] = 2, f"--html {job.html} could not be written: {e}"
    if out is not None:
        try:  # the old results go, then the sidecar: results in place always have theirs, and only theirs
            if not out.stdout:
                retire_results(out.target)
                write_meta(out.target, engine="local", signature=signature, summary=summary, config=config,
                           rows=out.rows, input=job.input, spec=spec, exit_code=code, **extra)
            out.commit()
        except BaseException as e:
            raise _stopped(e, out, job, out.rows, True)  # noqa: B904 - e itself, with where its rows are
    if run is not None:
        record_path(job.output).unlink(missing_ok=True)  # type: ignore[arg-type]  # (the run is complete)
    stream = sys.stderr if out is not None and out.stdout else sys.stdout
    print_summary({**summary, **extra}, signature, job.summary_format, stream)
    if "cache" in extra and job.summary_format == "text":
        print(cache_line(extra["cache"], config.cache_dir), file=stream)
    if "precision_check" in extra and job.summary_format == "text":
        print(precision_line(extra["precision_check"]), file=stream)
    for line in (extra.get("html_error"), problem):
        if line:
            print(f"q2 score: {line}", file=sys.stderr)
    return code


def run_record(job: ScoreJob) -> Any:
    """What this run's ``.partial`` will hold (its signature filled in once the models load); None when the run
    writes no file, or its input is no regular file (a pipe: it cannot be read again, so it cannot be resumed)."""
    if not job.output or job.output == "-":
        return None
    if not Path(job.input).is_file():
        if job.resume:
            raise ResumeError("resume", f"{job.input} is not a regular file: a stopped run on it cannot be resumed")
        return None
    spec = job.rows
    settings = {**spec.columns(), "explain": spec.explain, "labels": spec.labels, "input_format": job.input_format,
                "taxonomy_model": _taxonomy_model_id(job.taxonomy_model) if job.taxonomy_model else None}
    return RunRecord(input=input_identity(job.input), signature="", rows=settings)


def resumable(job: ScoreJob, run: Any) -> bool:
    """Whether there is a ``.partial`` to resume (checked against ``run`` before the models load); without one the
    run starts from its first row, and says so."""
    partial = Path(f"{job.output}.partial")
    # (a file of rows, or the Ray engine's folder of staged blocks; an empty file without a record: a run stopped
    # while its models loaded, before it began)
    empty = partial.is_file() and not partial.is_symlink() and partial.stat().st_size == 0
    if not partial.exists() or (empty and RunRecord.read(job.output) is None):  # type: ignore[arg-type]
        print(f"q2 score: --resume: there is no {partial} to continue; scoring from the first row", file=sys.stderr)
        return False
    check_resume(job.output, RunRecord.read(job.output), run, signature=False)  # type: ignore[arg-type]
    return True


class KeptRows:
    """The rows a resumed run keeps from its ``.partial``: their count, figures and errors (and report rows)."""

    def __init__(self, spec: Any, report_rows: Optional[list[dict[str, Any]]]) -> None:
        self.spec, self.report_rows = spec, report_rows
        self.n, self.stats, self.errors = 0, Q2Stats(), RowErrors()
        self._rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.stats = self.stats + Q2Stats.of([response_result(row)])
        if isinstance(row.get("error"), str):
            self.errors.add(row["error"])
        if self.report_rows is not None:
            self._rows.append(row)

    def take(self, job: ScoreJob, rows: Iterator[dict[str, Any]], partial: PartialRows) -> None:
        """Keep the ``.partial``'s complete rows (a torn last line is cut off) and read past their input rows."""
        self.n = partial.keep(self.add)
        for result in self._rows:
            self.report_rows.append(_with_texts(result, next(rows, {}), self.spec))  # type: ignore[union-attr]
        for i in range(len(self._rows), self.n):
            if next(rows, None) is None:
                raise ResumeError("resume", f"{job.output}.partial holds {self.n} rows but {job.input} only {i}")
        self._rows = []
        print(f"q2 score: resuming {job.output}.partial after its {self.n} committed rows", file=sys.stderr)


def _score_rows(scorer: Any, rows: Iterator[dict[str, Any]], job: ScoreJob, out: Any,
                report_rows: Optional[list[dict[str, Any]]], progress: Optional[Progress],
                labeller: Any = None, kept: Optional[KeptRows] = None) -> tuple[Any, Any, Any]:
    """Score the rows chunk by chunk, streaming result rows out (after the ``kept`` rows of a resumed run); the
    caller commits the output once its sidecar is written. A run that stops (an interrupt, SIGTERM, a full disk)
    raises with a :class:`~q2_plugins.jobs.partial.StoppedRun` attached: how many rows are committed, and where."""
    spec = job.rows
    stats, errors = (kept.stats, kept.errors) if kept is not None else (Q2Stats(), RowErrors())
    signature, offset = "", kept.n if kept is not None else 0
    if progress is not None and offset:
        progress.rows_done(offset)
    writing = False
    try:
        # (a chunk of more rows is scored in parts, each part's candidates extracted ahead by the scorer itself)
        overlap = spacy_worker.off_cpu(job.config) and job.chunk_size <= scorer_module.AHEAD_ROWS
        ahead = getattr(scorer, "ahead", None) if overlap else None
        pace = Pace(job.chunk_size, job.commit_seconds)
        for chunk in _with_next(_chunks(rows, pace), ahead, spec.response_column):
            started = time.monotonic()
            if progress is not None:  # a slow batch names its row by its place in the input and its id
                progress.row_names = [f"row {offset + i}" + (f" (id {row['id']!r})" if "id" in row else "")
                                      for i, row in enumerate(chunk)]
            result = score_records(scorer, chunk, spec, progress=progress or False, labeller=labeller)
            writing = True
            for i, (row, res) in enumerate(zip(chunk, result.responses)):
                record = result_row(offset + i, row, res, spec.explain)
                if res.error is not None:
                    errors.add(res.error)
                if out is not None:
                    out.write(record)
                if report_rows is not None:
                    report_rows.append(_with_texts(record, row, spec))
            if out is not None:
                out.flush()
            writing = False
            pace.done(len(chunk), time.monotonic() - started)
            stats, signature, offset = stats + result.stats, result.signature, offset + len(chunk)
    except BaseException as e:
        _close(progress)
        raise _stopped(e, out, job, offset, writing)  # noqa: B904 - e itself, with where its rows are
    return stats, errors, signature


def _with_next(chunks: Iterator[list[dict[str, Any]]], ahead: Any,
               column: str) -> Iterator[list[dict[str, Any]]]:
    """The chunks; with ``ahead`` (models on a GPU), each one after the next chunk's responses were handed to it,
    so their candidates are extracted while this chunk is scored."""
    if ahead is None:
        yield from chunks
        return
    current = next(chunks, None)
    while current is not None:
        following = next(chunks, None)
        if following is not None:
            ahead([row.get(column) for row in following])
        yield current
        current = following


def _stopped(e: BaseException, out: Any, job: ScoreJob, offset: int, writing: bool) -> BaseException:
    """``e`` with the :class:`~q2_plugins.jobs.partial.StoppedRun` of this run attached: one count, the rows in
    the ``.partial`` (after a failed write: those complete on disk, as ``--resume`` will count them)."""
    partial = out.abandon() if out is not None else None
    if isinstance(e, PartialReplacedError):  # (its rows went with the file: nothing to resume)
        return mark_stopped(e, StoppedRun(0, None, job.output, text=f"{job.output} left as it was"))
    if out is None or partial is None:
        return mark_stopped(e, StoppedRun(out.rows if out is not None else offset, None, None))
    failed = getattr(e, "filename", None) or (str(out.partial if not out.stdout else "standard output")
                                              if writing and isinstance(e, OSError) else None)
    rows = out.rows
    if partial is not None and isinstance(e, OSError):
        try:
            rows = committed_rows(partial)[0]
        except OSError:
            pass
    return mark_stopped(e, StoppedRun(rows, partial, job.output, failed))


#: rows of a run's first chunk, before its pace is known (the next chunks follow the pace: :class:`Pace`)
FIRST_CHUNK = 16


class Pace:
    """How many rows the next chunk of a run takes: at most ``chunk_size``, and about ``seconds`` of work at the
    pace of the chunks so far (its first chunk :data:`FIRST_CHUNK` rows), so that every chunk's rows are committed
    (flushed to the ``.partial``) within about ``seconds`` of being begun, whatever the input's size."""

    def __init__(self, chunk_size: int, seconds: float) -> None:
        self.chunk_size, self.seconds = max(1, chunk_size), seconds
        self.rows, self.elapsed = 0, 0.0

    def next_size(self) -> int:
        if not self.rows:
            return min(self.chunk_size, FIRST_CHUNK)
        rate = self.rows / max(self.elapsed, 1e-6)
        return max(1, min(self.chunk_size, int(rate * self.seconds)))

    def done(self, rows: int, elapsed: float) -> None:
        """A chunk of ``rows`` was scored and committed in ``elapsed`` seconds."""
        self.rows, self.elapsed = self.rows + rows, self.elapsed + elapsed


def _chunks(rows: Iterator[dict[str, Any]], pace: Pace) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= pace.next_size():
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_progress(job: ScoreJob) -> Optional[Progress]:
    """The run's progress bars (None without ``progress``): the rows against the input's record count (unknown
    when the input is not a regular file), and, on a terminal, one bar per stage across all chunks."""
    if not job.progress:
        return None

    terminal = getattr(sys.stderr, "isatty", lambda: False)()
    return Progress(total=count_records(job.input, job.input_format), stage_bars=terminal)


def _close(progress: Optional[Progress]) -> None:
    if progress is not None:
        progress.close()


def _taxonomy_model(path: str) -> Any:
    return backends.load("taxonomy", model=path)  # TaxonomyModel loads without the libraries' loading bars


def _loaded(scorer: Any, progress: bool) -> Any:
    """``scorer.load()`` with one "loading models" line on standard error (none without progress) in place of the
    model libraries' own per-file loading bars."""
    if progress:
        print(loading_line(scorer.config), file=sys.stderr, flush=True)
    return scorer.load(quiet=True)


def _taxonomy_model_id(path: str) -> str:
    """The identity (content hash) of the five-way model that labelled the rows (``taxonomy_model``)."""
    return backends.identity("taxonomy", model=path)


def _with_texts(record: dict[str, Any], row: dict[str, Any], spec: Any) -> dict[str, Any]:
    """A result row plus the texts it scored (and the input's human label), for the HTML report."""
    texts = {"response": row.get(spec.response_column), "knowledge": row.get(spec.knowledge_column),
             report.HUMAN_LABEL: row.get(report.HUMAN_LABEL)}
    if spec.history_column:
        texts["history"] = row.get(spec.history_column)
    return {**record, **{k: v for k, v in texts.items() if isinstance(v, str)}}


def write_report(path: str, rows: list[dict[str, Any]], signature: str, summary: dict[str, Any],
                 sources: list[str], config: Optional[dict[str, Any]] = None) -> None:
    """Write the HTML report of result rows (with their texts) to ``path``, and say so on standard error."""
    report.write_html(path, rows, signatures=[signature], summary=summary,
                      title="Q² report: " + ", ".join(Path(s).name for s in sources), sources=sources,
                      version=__version__, config=config)
    print(f"HTML report: {path}", file=sys.stderr)
