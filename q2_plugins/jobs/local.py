"""The local engine: a :class:`~q2_plugins.jobs.ScoreJob` scored in this process, chunk by chunk, result rows
streamed to the output (committed once all are written), with its ``.meta.json`` and optional HTML report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from .. import __version__
from ..results import print_summary

if TYPE_CHECKING:
    from ..progress import Progress
    from . import ScoreJob

__all__ = ["score_local", "write_report"]


def score_local(job: ScoreJob) -> int:
    """Run ``job`` here (its engine and outputs already checked: :func:`~q2_plugins.jobs.run_score_job`); prints
    the summary and returns the exit code."""
    from ..io import ResultFile, read_rows
    from ..results import cache_line
    from ..rows import write_meta
    from ..scorer import Q2Scorer

    taxonomy = _taxonomy_model(job.taxonomy_model) if job.taxonomy_model else None
    config, spec = job.config, job.rows
    # the file and its columns are checked before anything else
    rows = read_rows(job.input, job.input_format, spec.required, spec.settings)
    scorer = _loaded(Q2Scorer(config), progress=job.progress)  # a model that cannot load stops here, once
    progress = _run_progress(job)
    out = ResultFile(job.output) if job.output else None
    report_rows: Optional[list[dict[str, Any]]] = [] if job.html else None
    try:
        stats, errors, signature = _score_rows(scorer, rows, job, out, report_rows, progress, taxonomy)
    finally:
        _close(progress)
    summary = {**stats.summary(), **errors.summary()}
    signature = signature or scorer.signature
    code, problem = stats.exit_code(job.fail_on_error)
    extra: dict[str, Any] = {} if scorer.cache is None else {"cache": scorer.cache.counts()}
    if job.taxonomy_model:
        extra["taxonomy_model"] = _taxonomy_model_id(job.taxonomy_model)
    if report_rows is not None and job.html:
        try:
            write_report(job.html, report_rows, signature, summary, [job.input], config.to_dict())
        except OSError as e:  # the results are saved: the run failed only to write its report, and says so
            code, extra["html_error"] = 2, f"--html {job.html} could not be written: {e}"
    if out is not None and not out.stdout:
        write_meta(out.target, engine="local", signature=signature, summary=summary, config=config, rows=out.rows,
                   input=job.input, spec=spec, exit_code=code, **extra)
    stream = sys.stderr if out is not None and out.stdout else sys.stdout
    print_summary({**summary, **extra}, signature, job.summary_format, stream)
    if "cache" in extra and job.summary_format == "text":
        print(cache_line(extra["cache"], config.cache_dir), file=stream)
    for line in (extra.get("html_error"), problem):
        if line:
            print(f"q2 score: {line}", file=sys.stderr)
    return code


def _score_rows(scorer: Any, rows: Iterator[dict[str, Any]], job: ScoreJob, out: Any,
                report_rows: Optional[list[dict[str, Any]]], progress: Optional[Progress],
                labeller: Any = None) -> tuple[Any, Any, Any]:
    """Score the rows chunk by chunk, streaming result rows out; the output is committed once all are written. A
    run that stops (an interrupt, SIGTERM, a full disk) says where its rows so far are, then raises."""
    from ..results import Q2Stats, RowErrors
    from ..rows import result_row, score_records

    spec = job.rows
    stats, errors, signature, offset = Q2Stats(), RowErrors(), "", 0
    try:
        for chunk in _chunks(rows, job.chunk_size):
            if progress is not None:  # a slow batch names its row by its place in the input and its id
                progress.row_names = [f"row {offset + i}" + (f" (id {row['id']!r})" if "id" in row else "")
                                      for i, row in enumerate(chunk)]
            result = score_records(scorer, chunk, spec, progress=progress or False, labeller=labeller)
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
            stats, signature, offset = stats + result.stats, result.signature, offset + len(chunk)
        if out is not None:
            out.commit()
    except BaseException as e:
        _close(progress)
        partial = out.abandon() if out is not None else None
        kept = f"; its {out.rows} rows so far are in {partial}, {job.output} is left as it was" if partial else ""
        print(f"q2 score: the run stopped after {offset} rows{kept} ({type(e).__name__})", file=sys.stderr)
        raise
    return stats, errors, signature


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_progress(job: ScoreJob) -> Optional[Progress]:
    """The run's progress bars (None without ``progress``): the rows against the input's record count (unknown
    when the input is not a regular file), and, on a terminal, one bar per stage across all chunks."""
    if not job.progress:
        return None
    from ..io import count_records
    from ..progress import Progress

    terminal = getattr(sys.stderr, "isatty", lambda: False)()
    return Progress(total=count_records(job.input, job.input_format), stage_bars=terminal)


def _close(progress: Optional[Progress]) -> None:
    if progress is not None:
        progress.close()


def _taxonomy_model(path: str) -> Any:
    from .. import backends

    return backends.load("taxonomy", model=path)  # TaxonomyModel loads without the libraries' loading bars


def _loaded(scorer: Any, progress: bool) -> Any:
    """``scorer.load()`` with one "loading models" line on standard error (none without progress) in place of the
    model libraries' own per-file loading bars."""
    if progress:
        print("q2: loading models", file=sys.stderr, flush=True)
    return scorer.load(quiet=True)


def _taxonomy_model_id(path: str) -> str:
    """The identity (content hash) of the five-way model that labelled the rows (``taxonomy_model``)."""
    from .. import backends

    return backends.identity("taxonomy", model=path)


def _with_texts(record: dict[str, Any], row: dict[str, Any], spec: Any) -> dict[str, Any]:
    """A result row plus the texts it scored (and the input's human label), for the HTML report."""
    from ..report import HUMAN_LABEL

    texts = {"response": row.get(spec.response_column), "knowledge": row.get(spec.knowledge_column),
             HUMAN_LABEL: row.get(HUMAN_LABEL)}
    if spec.history_column:
        texts["history"] = row.get(spec.history_column)
    return {**record, **{k: v for k, v in texts.items() if isinstance(v, str)}}


def write_report(path: str, rows: list[dict[str, Any]], signature: str, summary: dict[str, Any],
                 sources: list[str], config: Optional[dict[str, Any]] = None) -> None:
    """Write the HTML report of result rows (with their texts) to ``path``, and say so on standard error."""
    from ..report import write_html

    write_html(path, rows, signatures=[signature], summary=summary,
               title="Q² report: " + ", ".join(Path(s).name for s in sources), sources=sources, version=__version__,
               config=config)
    print(f"HTML report: {path}", file=sys.stderr)
