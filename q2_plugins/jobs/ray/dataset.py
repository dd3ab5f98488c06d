"""Q² on Ray Data: score or filter large datasets with an actor pool, each actor holding one :class:`Q2Scorer`.

Scoring is the core's: every batch goes through ``Q2Scorer.score``, so results are those of a single-process run.

    import ray
    from q2_plugins import Q2Config
    from q2_plugins.jobs.ray.dataset import score_dataset, dataset_stats

    ds = ray.data.read_parquet("turns/")
    scored = score_dataset(ds, Q2Config(device="cuda"), concurrency=8, num_gpus=1).materialize()
    scored.write_parquet("scored/")
    print(dataset_stats(scored).summary())

Needs the ``ray`` extra: ``pip install 'q2-plugins[ray]'``.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

from q2_plugins.io.inputs import INTERNAL_FIELDS, named_settings, read_records, read_rows
from q2_plugins.io.outputs import partial_path
from q2_plugins.jobs.ray.stderr_filter import plain_cause
from q2_plugins.metric.errors import ModelLoadError
from q2_plugins.scorer import Q2Scorer

try:
    import pyarrow as pa
    import ray
    import ray.data
    from ray.data.datasource import FileBasedDatasource
except ModuleNotFoundError as e:  # pragma: no cover - exercised by test_imports with ray hidden
    raise ModuleNotFoundError(f"q2_plugins.jobs.ray.dataset needs Ray Data ({e.name} is not installed): "
                              f"pip install 'q2-plugins[ray]'", name=e.name) from e

from q2_plugins.io.inputs import FORMATS, JsonConstant, as_value, suffixes
from q2_plugins.io.outputs import open_own, replace_own
from q2_plugins.io.rows import INPUT_PREFIX, ROW_FIELD, RowSpec, kept_name, problems_of, result_fields, score_records
from q2_plugins.jobs.ray.staging import RowWriter, as_text, select_by_score, union_schema
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.results import (
    EXPLANATION_FIELDS,
    RESULT_FIELDS,
    Q2Stats,
    ResponseResult,
    ResponseStatus,
    RowErrors,
)

__all__ = ["Q2BatchScorer", "LostBlocks", "score_dataset", "dataset_stats", "dataset_summary", "split_by_score",
           "check_models", "read_dataset", "write_dataset", "OUTPUT_COLUMNS", "EXPLANATION_COLUMNS", "INPUT_PREFIX",
           "arrow_type"]


def arrow_type(kind: type) -> pa.DataType:
    """The Arrow type of a field of the row layout declared with Python type ``kind``: lists and dicts (the
    explanations) as JSON text."""
    return {str: pa.string(), float: pa.float64(), int: pa.int64(), bool: pa.bool_()}.get(kind, pa.string())


#: the result columns added to every row (after ``row`` and the input columns; each name gets the prefix, none by
#: default), with their Arrow types: :data:`~q2_plugins.metric.results.RESULT_FIELDS`, the one declaration
OUTPUT_COLUMNS: dict[str, pa.DataType] = {name: arrow_type(kind) for name, kind in RESULT_FIELDS.items()}
#: the columns ``explain=True`` adds after them, each JSON text
EXPLANATION_COLUMNS: dict[str, pa.DataType] = {name: arrow_type(kind) for name, kind in EXPLANATION_FIELDS.items()}
# the rows read_dataset makes of a JSONL / CSV / TSV record: its fields as JSON text, or why it cannot be read, and
# its position in its file (the result row's ``row``)
_RECORD, _READ_ERROR, _POSITION = "__q2_record__", "__q2_read_error__", "__q2_row__"


def _config(config: Union[Q2Config, Mapping[str, Any], None]) -> Q2Config:
    if config is None:
        return Q2Config()
    if isinstance(config, Q2Config):
        return config
    return Q2Config.from_dict(config)


def _loaded_signature(config: Q2Config) -> str:
    return Q2BatchScorer(config).scorer.signature


def check_models(config: Union[Q2Config, Mapping[str, Any], None] = None, *, num_cpus: float = 1,
                 num_gpus: Optional[float] = None) -> str:
    """Load the models once in a Ray worker with the actors' resources and return the run's signature; a model that
    cannot load raises its :class:`~q2_plugins.metric.errors.ModelLoadError` here, before any row is read."""
    return model_check_result(start_model_check(config, num_cpus, num_gpus))


def start_model_check(config: Union[Q2Config, Mapping[str, Any], None], num_cpus: float,
                 num_gpus: Optional[float]) -> "ray.ObjectRef":
    task = ray.remote(_loaded_signature).options(num_cpus=num_cpus, num_gpus=num_gpus or 0, max_retries=0)
    return task.remote(_config(config))


def model_check_result(check: "ray.ObjectRef") -> str:
    """The signature the model check returns, or the error it raised (a ModelLoadError naming the flag)."""
    try:
        return ray.get(check)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, Exception):
            raise e.cause from None
        raise


class Q2BatchScorer:
    """Callable class for ``Dataset.map_batches(..., batch_format="pyarrow")``: one :class:`Q2Scorer` per actor.

    The models load in the constructor, so an actor that cannot load them dies before taking any row, and each
    actor loads them once. Each batch is returned with its columns unchanged and the Q² columns appended.
    """

    def __init__(
        self,
        config: Union[Q2Config, Mapping[str, Any], None] = None,
        *,
        rows: RowSpec = RowSpec(),
        prefix: str = "",
        expected_signature: Union[str, list, None] = None,
        cache_counter: Optional[Any] = None,
        row_counter: Optional[Any] = None,
        precision_tally: Optional[Any] = None,
    ) -> None:
        self.config = _config(config)
        self.scorer = Q2Scorer(self.config)
        # a run's precision check (q2_plugins.metric.precision) is taken once, by the first actor to score a batch
        self.precision_tally, self._claimed = precision_tally if self.config.precision_check else None, False
        self.rows, self.prefix = rows, prefix
        self.reserved = _reserved(prefix)
        self.cache_counter, self.row_counter = cache_counter, row_counter
        self._load_models()
        if isinstance(expected_signature, list):  # [the run's model check, started with the actors]: its result
            expected_signature = model_check_result(expected_signature[0])
        if expected_signature is not None and self.scorer.signature != expected_signature:
            raise ValueError(f"This worker's models differ from those the run was checked with: its signature is\n  "
                             f"{self.scorer.signature}\nthe run's is\n  {expected_signature}\n"
                             f"Give every node the same model files (the qg_model / qa_model / nli_model settings).")

    def _load_models(self) -> None:
        """Load the models as ``q2 score`` does, without the model libraries' per-file loading bars (which would
        reach the driver's output once per actor); the driver prints the run's one "loading models" line."""
        self.scorer.load(quiet=True)
        if self.rows.labels:
            _ = self.scorer.text_signals

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.precision_tally is not None and not self._claimed:
            self._claimed = True
            if not ray.get(self.precision_tally.claim.remote("precision_check")):
                self.precision_tally = None
                self.scorer.skip_precision_check()
        cache = self.scorer.cache
        before = cache.counts() if cache is not None else {}
        records = set(batch.column_names) == {_RECORD, _READ_ERROR, _POSITION}  # (read_dataset's JSONL / CSV rows)
        out = self._score_records(batch) if records else self._score_columns(batch)
        if self.cache_counter is not None and cache is not None:
            ray.get(self.cache_counter.add.remote({k: v - before[k] for k, v in cache.counts().items()}))
        if self.row_counter is not None:  # (the driver's progress lines read it)
            ray.get(self.row_counter.add.remote({"rows": batch.num_rows}))
        agreement = getattr(self.scorer, "precision_agreement", None)
        if self.precision_tally is not None and agreement is not None:  # the check is done: the driver records it
            ray.get(self.precision_tally.put.remote("precision_check", agreement.to_dict()))
            self.precision_tally = None
        return out

    def _score(self, records: list[dict[str, Any]]) -> list[ResponseResult]:
        """The row pipeline's results for the records (``q2_plugins.io.rows``, as the local engine scores them). A
        call that raises (not a component: those fail their rows) is tried once more, then every row of the batch
        gets its cause as its error in one plain line (a model that cannot load stops the run)."""
        cause: BaseException = RuntimeError("no attempt")
        for _attempt in (1, 2):
            try:
                return score_records(self.scorer, records, self.rows).responses
            except ModelLoadError:
                raise
            except Exception as e:  # noqa: BLE001 - the batch's rows become error rows, the others go on
                cause = e
        why = f"its batch of {len(records)} rows failed twice: {plain_cause(cause)}"
        problems = problems_of(records, self.rows)
        return [ResponseResult(index=i, status=ResponseStatus.ERROR, error=problem or why)
                for i, problem in enumerate(problems)]

    def _score_columns(self, batch: pa.Table) -> pa.Table:
        """A dataset's own columns: scored, each kept (renamed by :func:`~q2_plugins.io.rows.kept_name` where it is
        named like a column of the layout), with ``row`` (null: a dataset's rows have no position in a file) and the
        result columns around them."""
        required = self.rows.required
        columns = [batch.column(c).to_pylist() for c in required]
        results = self._score([dict(zip(required, values)) for values in zip(*columns)])
        # (a column named like an engine's own is kept as input_<name>, as JSONL's)
        kept = batch.rename_columns([kept_name(c, self.reserved | INTERNAL_FIELDS) for c in batch.column_names])
        return _laid_out(pa.nulls(batch.num_rows, pa.int64()), kept, results, self.rows, self.prefix)

    def _score_records(self, batch: pa.Table) -> pa.Table:
        """Rows of :func:`read_dataset`'s JSONL / CSV reading: each record parsed, scored as ``q2 score`` scores it
        (a record that could not be read, or that lacks a column, is its row's error) and written back as columns,
        in the row layout of the local engine (``q2_plugins.io.rows``): ``row``, the input fields (one named like a
        field of the layout kept under :data:`INPUT_PREFIX`), the result columns."""
        records = _parsed(batch)
        return _records_laid_out(batch, records, self._score(records), self.rows, self.prefix)


class LostBlocks:
    """The rows of blocks that never came back from the actor pool (the worker scoring them died on every try: a
    crash, the out-of-memory killer), told by the positions of the rows that did (one JSONL / CSV / TSV input file:
    :meth:`applies`), each written as an error row in its place."""

    WHY = "its batch was lost: the worker process scoring it died on every try (a crash, or out of memory)"

    def __init__(self, job: Any, start: int, end: Optional[int]) -> None:
        self.job, self.next, self.end = job, start, end
        self.on = self.applies(job)

    @staticmethod
    def applies(job: Any) -> bool:
        path = Path(job.input)
        return path.is_file() and (job.input_format or FORMATS.get(path.suffix.lower())) in ("jsonl", "csv", "tsv")

    def _rows(self, start: int, end: int) -> list["pa.Table"]:
        if not self.on or end <= start:
            return []
        kind = format_of(Path(self.job.input), self.job.input_format, "input_format")
        return [_lost_rows(Path(self.job.input), kind, start, end, self.job.rows, self.WHY)]

    def before(self, batch: "pa.Table") -> list["pa.Table"]:
        """The lost rows between the last block and ``batch``."""
        positions = batch.column(ROW_FIELD) if self.on and batch.num_rows else None
        if positions is None or positions[0].as_py() is None:
            return []
        lost = self._rows(self.next, positions[0].as_py())
        self.next = positions[-1].as_py() + 1
        return lost

    def after(self) -> list["pa.Table"]:
        """The lost rows after the last block."""
        return self._rows(self.next, self.end) if self.end is not None else []


def _reserved(prefix: str) -> set[str]:
    """The names of the row layout's own columns (an input column named like one is kept as input_<name>)."""
    return {ROW_FIELD, *(prefix + name for name in (*OUTPUT_COLUMNS, *EXPLANATION_COLUMNS))}


def _parsed(batch: pa.Table) -> list[dict[str, Any]]:
    """The records of a block of :func:`read_dataset`'s JSONL / CSV rows (one that could not be read:
    ``{"__error__": why}``)."""
    return [{"__error__": e} if e is not None else {} if t is None else json.loads(t, parse_constant=JsonConstant)
            for t, e in zip(batch.column(_RECORD).to_pylist(), batch.column(_READ_ERROR).to_pylist())]


def _records_laid_out(batch: pa.Table, records: list[dict[str, Any]], results: list[ResponseResult], rows: RowSpec,
                      prefix: str) -> pa.Table:
    """A block of records with their results, in the row layout of the local engine."""
    table = _records_table([{} if "__error__" in r else r for r in records], reserved=_reserved(prefix))
    return _laid_out(batch.column(_POSITION), table, results, rows, prefix)


def _laid_out(position: Any, inputs: pa.Table, results: list[ResponseResult], rows: RowSpec, prefix: str) -> pa.Table:
    """``row``, the input columns, then the result columns (:func:`_result_columns`)."""
    table = inputs.add_column(0, ROW_FIELD, position.cast(pa.int64()))
    for name, (kind, values) in _result_columns(results, rows.explain).items():
        table = table.append_column(prefix + name, pa.array(values, type=kind))
    return table


def _lost_rows(path: Path, kind: str, start: int, end: int, rows: RowSpec, why: str) -> pa.Table:
    """The records at positions ``start`` to ``end`` (excluded) of the input file, each an error row saying
    ``why`` (a record that could not be read: its own reason), in the row layout the scoring step writes: the
    rows of a block that never came back (its worker died)."""
    texts: list[Optional[str]] = []
    errors: list[Optional[str]] = []
    with open(path, "rb") as f:  # (read as the datasource reads it: the same positions)
        for position, (_, row) in enumerate(read_records(f, kind)):
            if position >= end:
                break
            if position >= start:
                error = row.get("__error__")
                texts.append(None if error is not None else _record_text(row))
                errors.append(error)
    batch = _records_block(texts, errors, start)
    records = _parsed(batch)
    results = [ResponseResult(index=i, status=ResponseStatus.ERROR, error=problem or why)
               for i, problem in enumerate(problems_of(records, rows))]
    return _records_laid_out(batch, records, results, rows, "")


def _records_table(records: list[dict[str, Any]], reserved: frozenset[str] | set[str] = frozenset()) -> pa.Table:
    """The records as columns (the union of their keys, missing values null). A column whose values do not make one
    Arrow type (mixed types in this block) is stored as text: strings as they are, other values as JSON. A key
    named like one in ``reserved`` (the row layout's) is renamed by :func:`~q2_plugins.io.rows.kept_name`."""
    names = list(dict.fromkeys(k for r in records for k in r))
    columns = {}
    for name in names:
        values = [r.get(name) for r in records]
        kept = kept_name(name, reserved)
        try:
            columns[kept] = pa.array(values)
        except (pa.ArrowException, OverflowError, UnicodeEncodeError):
            columns[kept] = pa.array([None if v is None else as_text(v) for v in values], type=pa.string())
    if not columns:  # every record of the block unreadable: the Q² columns alone
        return pa.table({"__rows__": pa.nulls(len(records))}).drop_columns(["__rows__"])
    return pa.table(columns)


def _result_columns(results: list[ResponseResult], explain: bool) -> dict[str, tuple[pa.DataType, list]]:
    """The result columns of the results, each value the local engine's (:func:`~q2_plugins.io.rows.result_fields`);
    with ``explain`` the explanations too, as JSON text (None where a response has none)."""
    rows = [result_fields(r, explain) for r in results]
    kinds = {**OUTPUT_COLUMNS, **(EXPLANATION_COLUMNS if explain else {})}
    return {name: (kind, [_json_text(row[name]) if name in EXPLANATION_COLUMNS else row[name] for row in rows])
            for name, kind in kinds.items()}


def _json_text(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def score_dataset(
    ds: "ray.data.Dataset",
    config: Union[Q2Config, Mapping[str, Any], None] = None,
    *,
    rows: RowSpec = RowSpec(),
    prefix: str = "",
    concurrency: int = 1,
    num_cpus: float = 1,
    num_gpus: Optional[float] = None,
    batch_size: int = 64,
    max_restarts: int = -1,
    max_task_retries: int = 3,
    signature: Optional[str] = None,
    scorer_class: type = Q2BatchScorer,
    ray_remote_args: Optional[Mapping[str, Any]] = None,
) -> "ray.data.Dataset":
    """``ds`` in the row layout of ``q2 score`` (``docs/usage.md``): ``row`` (null: a dataset's rows have no position
    in a file; :func:`read_dataset`'s JSONL / CSV rows have theirs), the dataset's columns (one named like a column
    of the layout kept as ``input_<name>``), the result columns (:data:`OUTPUT_COLUMNS`, each after ``prefix``, none
    by default; ``label``, ``label3``, ``label_reason`` filled with ``rows.labels``) and, with ``rows.explain``,
    :data:`EXPLANATION_COLUMNS` as JSON text. ``rows`` names the response, knowledge and history columns as
    ``q2 score``'s :class:`~q2_plugins.io.rows.pipeline.RowSpec` does.

    Lazy, like every Ray Data transform. ``concurrency`` actors, each with ``num_cpus`` / ``num_gpus``, score
    ``batch_size`` rows per call. An actor whose process dies is restarted (``max_restarts``: -1, without limit, as
    Ray Data's pool expects; a pool actor past a finite limit is never replaced and the run waits until Ray Data's
    no-progress timeout) and its unfinished batches are retried (``max_task_retries``), so every row comes out exactly
    once; an actor that cannot load the models fails the run. Rows come out in input order only if the dataset's
    ``DataContext`` preserves order.
    """
    columns = ds.schema().names
    if _RECORD not in columns:  # (records read from JSONL / CSV are checked row by row)
        check_columns(columns, rows)
    return map_scorer(ds, _config(config), rows=rows, prefix=prefix,
                       concurrency=concurrency, num_cpus=num_cpus, num_gpus=num_gpus, batch_size=batch_size,
                       max_restarts=max_restarts, max_task_retries=max_task_retries, signature=signature,
                       scorer_class=scorer_class, ray_remote_args=ray_remote_args)


def check_columns(columns: list[str], spec: RowSpec) -> None:
    """The columns ``spec`` requires are there."""
    missing = [c for c in spec.required if c not in columns]
    if missing:
        raise SettingError(named_settings(spec.required, spec.settings, missing),
                           f"The dataset has no column(s) {missing}; its columns are {columns}. Name the right ones.")


def map_scorer(ds: "ray.data.Dataset", cfg: Q2Config, *, concurrency: int, num_cpus: float,
                num_gpus: Optional[float], batch_size: int, max_restarts: int, max_task_retries: int,
                signature: Optional[str], scorer_class: type, ray_remote_args: Optional[Mapping[str, Any]],
                **scorer_kwargs: Any) -> "ray.data.Dataset":
    """:func:`score_dataset` once its columns are checked: the actor pool over ``ds``."""
    if not isinstance(concurrency, int) or concurrency < 1:
        raise SettingError("concurrency", f"must be a positive integer, got {concurrency!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise SettingError("batch_size", f"must be a positive integer, got {batch_size!r}")
    kwargs = dict(scorer_kwargs, expected_signature=signature if signature is not None else check_models(
        cfg, num_cpus=num_cpus, num_gpus=num_gpus))
    remote_args = {"max_restarts": max_restarts, "max_task_retries": max_task_retries, **(ray_remote_args or {})}
    with warnings.catch_warnings():
        # Ray Data (before 2.64, see setup.cfg) has no named parameter for actor restarts: they go in ray_remote_args
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        return ds.map_batches(
            scorer_class, fn_constructor_args=(cfg,), fn_constructor_kwargs=kwargs, batch_format="pyarrow",
            batch_size=batch_size, compute=ray.data.ActorPoolStrategy(size=concurrency), num_cpus=num_cpus,
            num_gpus=num_gpus, **remote_args,
        )


def block_stats(batch: pa.Table, prefix: str) -> pa.Table:
    statuses = batch.column(prefix + "status").to_pylist()
    results = [ResponseResult(index=0, status=st, score=s, score_no_nli=n) for st, s, n in zip(
        statuses, batch.column(prefix + "score").to_pylist(), batch.column(prefix + "score_no_nli").to_pylist())]
    errors = RowErrors()
    for status, message in zip(statuses, batch.column(prefix + "error").to_pylist()):
        if status == ResponseStatus.ERROR and message:
            errors.add(message)
    return pa.Table.from_pylist([{**vars(Q2Stats.of(results)), "error_kinds": json.dumps(list(errors.kinds.values()))}])


def dataset_stats(scored: "ray.data.Dataset", prefix: str = "") -> Q2Stats:
    """The run's :class:`Q2Stats`: one per block, computed where the block is, then added.

    Materialise ``scored`` first (``.materialize()``) when it is also written, or it is scored twice.
    """
    return dataset_summary(scored, prefix)[0]


def dataset_summary(scored: "ray.data.Dataset", prefix: str = "") -> tuple[Q2Stats, RowErrors]:
    """The run's :class:`Q2Stats` and its row errors counted by kind, computed per block and combined."""
    cols = [prefix + c for c in ("status", "score", "score_no_nli", "error")]
    parts = scored.select_columns(cols).map_batches(block_stats, fn_kwargs={"prefix": prefix}, num_cpus=0,
                                                    batch_format="pyarrow", batch_size=None).take_all()
    stats, errors = Q2Stats(), RowErrors()
    for p in parts:
        for message, count in json.loads(p.pop("error_kinds")):
            errors.add(message, count)
        stats += Q2Stats(**p)
    return stats, errors


def _select(batch: pa.Table, min_score: float, keep_unscored: bool, prefix: str, kept: bool) -> pa.Table:
    return select_by_score(batch, min_score, keep_unscored, kept, prefix)


def split_by_score(scored: "ray.data.Dataset", min_score: float, *, keep_unscored: bool = False,
                   prefix: str = "") -> tuple["ray.data.Dataset", "ray.data.Dataset"]:
    """``(kept, dropped)``: rows with ``score >= min_score`` and the others. Rows without a score (errors, no valid
    question) go with the kept rows if ``keep_unscored``, else with the dropped. Every row lands in exactly one."""
    def part(kept: bool) -> "ray.data.Dataset":
        return scored.map_batches(_select, fn_kwargs=dict(min_score=min_score, keep_unscored=keep_unscored,
                                                          prefix=prefix, kept=kept), batch_format="pyarrow")
    return part(True), part(False)


# -- files ----------------------------------------------------------------------------------------------------------
def format_of(path: Path, fmt: Optional[str], setting: str) -> str:
    """``fmt``, else the format of ``path``'s extension (of its files', for a directory); a :class:`SettingError`
    naming ``setting`` when it cannot tell."""
    if path.suffix.lower() == ".gz" and path.is_file():  # (the local engine reads it as the plain file)
        raise SettingError("engine", f"{path} is gzipped, which the ray engine does not read: gunzip -k {path} "
                                     f"and score the plain file, or set it to local")
    if fmt:
        return fmt
    if path.suffix.lower() in FORMATS:
        return FORMATS[path.suffix.lower()]
    if path.is_dir():
        found = {FORMATS[p.suffix.lower()] for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS}
        if len(found) == 1:
            return found.pop()
        raise SettingError(setting, f"Cannot tell the format of directory {path} (files of format(s) "
                                    f"{sorted(found)}); set it")
    raise SettingError(setting, f"Cannot tell the format of {path} from its extension; set it or name the file "
                                f".jsonl / .parquet / .csv")


def read_dataset(path: Union[str, os.PathLike], fmt: Optional[str] = None, *,
                 rows_per_block: int = 64, skip: int = 0) -> "ray.data.Dataset":
    """A JSONL / Parquet / CSV / TSV file or directory as a Ray dataset.

    Parquet is read as it is. JSONL and CSV / TSV are read as ``q2 score`` reads them (:func:`q2_plugins.io.
    read_records`, so the same limits and messages): one row per record, holding the record (columns
    ``__q2_record__``, its fields as JSON text, CSV cells as text) or why it cannot be read (``__q2_read_error__``,
    naming its line, and its file when ``path`` is a directory), with its position in its file (``__q2_row__``,
    the result row's ``row``); the scoring step turns these rows back into columns and an unreadable record into
    its row's error. A file is read by one task, in blocks of up to
    ``rows_per_block`` records (Ray may merge or split them), so that one file's rows spread over the actors.
    ``skip``: leave out the first records of a JSONL / CSV / TSV file (those a stopped run kept: ``--resume``)."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"No input file or directory {path}")
    kind = format_of(path, fmt, "fmt")
    # Read tasks reserve no CPU: the scoring actors may hold every CPU of the cluster, and a read waiting for one of
    # them would wait for ever (reading costs next to nothing beside scoring).
    if kind == "parquet":
        return _read_parquet(path)
    source = _RecordsDatasource(str(path), kind=kind, name_files=path.is_dir(), rows_per_block=rows_per_block,
                                skip=skip, file_extensions=None if path.is_file() else [x[1:] for x in suffixes(kind)])
    return ray.data.read_datasource(source, num_cpus=0)


def _read_parquet(path: Path) -> "ray.data.Dataset":
    """``ray.data.read_parquet`` with read tasks that reserve no CPU, and without the bar of its sampling of the
    files (drawn even in a log). Ray Data's newer Parquet reader (2.60's ``use_datasource_v2``) lists the files in a
    task of its own that needs a CPU whatever the read's ``num_cpus``, and waits for ever beside actors holding every
    CPU: Parquet is read by the reader whose tasks all follow ``num_cpus``. The dataset keeps the caller's settings."""
    ctx = ray.data.DataContext.get_current()
    saved = {name: getattr(ctx, name) for name in ("use_datasource_v2", "enable_progress_bars") if hasattr(ctx, name)}
    for name in saved:
        setattr(ctx, name, False)
    try:
        ds = ray.data.read_parquet(str(path), num_cpus=0)
    finally:
        for name, value in saved.items():
            setattr(ctx, name, value)
    for name, value in saved.items():  # (the dataset holds a copy of the context it was read with)
        setattr(ds.context, name, value)
    return ds


class _RecordsDatasource(FileBasedDatasource):
    """JSONL / CSV / TSV files read by :func:`q2_plugins.io.inputs.read_records`: one row per record, its fields as JSON
    text or why it cannot be read, in blocks of ``rows_per_block`` records."""

    def __init__(self, paths: str, *, kind: str, name_files: bool, rows_per_block: int, skip: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(paths, **kwargs)
        self.kind, self.name_files, self.rows_per_block, self.skip = kind, name_files, rows_per_block, skip

    def _read_stream(self, f: "pa.NativeFile", path: str) -> Iterator[pa.Table]:
        import io

        texts: list[Optional[str]] = []
        errors: list[Optional[str]] = []
        start = 0  # the position in the file of the block's first record
        for _, row in read_records(io.BytesIO(f.readall()), self.kind):
            if start < self.skip:  # (kept by the stopped run this one resumes)
                start += 1
                continue
            error = row["__error__"] if "__error__" in row else None
            texts.append(None if error is not None else _record_text(row))
            errors.append(None if error is None else f"{path}: {error}" if self.name_files else error)
            if len(texts) == self.rows_per_block:
                yield _records_block(texts, errors, start)
                start, texts, errors = start + len(texts), [], []
        if texts:
            yield _records_block(texts, errors, start)


def _record_text(row: dict[str, Any]) -> str:
    """A record as the JSON text the scoring step parses back: values keep their types (``-1e999`` stays the number
    -inf, a file's ``NaN`` is written bare and read back as such: the scorer refuses them as the local engine does;
    lone surrogates stay escaped)."""
    return json.dumps({k: as_value(v) for k, v in row.items()}, ensure_ascii=True, allow_nan=True, default=str)


def _records_block(texts: list[Optional[str]], errors: list[Optional[str]], start: int) -> pa.Table:
    return pa.table({_RECORD: pa.array(texts, pa.string()), _READ_ERROR: pa.array(errors, pa.string()),
                     _POSITION: pa.array(range(start, start + len(texts)), pa.int64())})


def check_record_columns(path: Path, kind: str, required: tuple[str, ...], settings: tuple[str, ...]) -> None:
    """The required columns occur in the input (its first file, for a directory), checked as ``q2 score`` checks."""
    first = path if path.is_file() else min(p for p in path.rglob("*") if p.is_file() and
                                            p.suffix.lower() in suffixes(kind))
    read_rows(first, kind, required, settings)  # raises InputFormatError naming the columns found


def write_dataset(ds: "ray.data.Dataset", path: Union[str, os.PathLike], fmt: Optional[str] = None) -> int:
    """Write ``ds`` to one file when ``path`` ends in .jsonl / .parquet / .csv / .tsv (rows in the dataset's order,
    through ``FILE.partial``, renamed when complete), else as a directory of part files written by the workers, in
    format ``fmt``. A single file holds the union of the columns of every block (a column of several types across
    blocks is written as text). Returns the number of rows written."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        kind = format_of(path, fmt, "fmt")
        path.mkdir(parents=True, exist_ok=True)
        if kind in ("csv", "tsv"):
            import pyarrow.csv as pcsv

            options = pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ",")
            ds.write_csv(str(path), arrow_csv_args_fn=lambda: {"write_options": options})
        else:
            {"jsonl": ds.write_json, "parquet": ds.write_parquet}[kind](str(path))
        return ds.count()

    kind = FORMATS[path.suffix.lower()]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    schema = union_schema(b.schema for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)) \
        if kind != "jsonl" else pa.schema([])
    # (a planted link or another user's file at FILE.partial is refused, never written through)
    writer = RowWriter(open_own(tmp), kind, schema)
    try:
        for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            writer.write(batch)
    finally:
        writer.close()
    replace_own(tmp, path)
    return writer.rows
