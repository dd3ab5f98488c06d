"""Q² on Ray Data: score or filter large datasets with an actor pool, each actor holding one :class:`Q2Scorer`.

Scoring is the core's: every batch goes through ``Q2Scorer.score``, so results are those of a single-process run.

    import ray
    from q2_plugins import Q2Config
    from q2_plugins.ray_data import score_dataset, dataset_stats

    ds = ray.data.read_parquet("turns/")
    scored = score_dataset(ds, Q2Config(device="cuda"), concurrency=8, num_gpus=1).materialize()
    scored.write_parquet("scored/")
    print(dataset_stats(scored).summary())

Needs the ``ray`` extra: ``pip install 'q2-plugins[ray]'``.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Mapping, Optional, Union

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import ray
    import ray.data
except ModuleNotFoundError as e:  # pragma: no cover - exercised by test_imports with ray hidden
    raise ModuleNotFoundError(f"q2_plugins.ray_data needs Ray Data ({e.name} is not installed): "
                              f"pip install 'q2-plugins[ray]'", name=e.name) from e

from . import __version__
from .config import Q2Config
from .results import Q2Stats, ResponseResult

__all__ = ["Q2BatchScorer", "score_dataset", "dataset_stats", "split_by_score", "check_models", "read_dataset",
           "write_dataset", "write_meta", "OUTPUT_COLUMNS"]

# Q² columns added to every row (each name gets the prefix, "q2_" by default), with their Arrow types
OUTPUT_COLUMNS: dict[str, pa.DataType] = {
    "score": pa.float64(), "score_no_nli": pa.float64(), "status": pa.string(), "num_questions": pa.int64(),
    "error": pa.string(),
}
_LABEL_COLUMNS = {"label": pa.string(), "label3": pa.string()}  # with labels=True
_EXPLANATION_COLUMN = {"explanation": pa.string()}  # with explain=True: the core's result row as JSON
_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv",
            ".tsv": "tsv"}


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
    cannot load raises its :class:`~q2_plugins.errors.ModelLoadError` here, before any row is read."""
    task = ray.remote(_loaded_signature).options(num_cpus=num_cpus, num_gpus=num_gpus or 0, max_retries=0)
    try:
        return ray.get(task.remote(_config(config)))
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
        response_column: str = "response",
        knowledge_column: str = "knowledge",
        history_column: Optional[str] = None,
        explain: bool = False,
        labels: bool = False,
        prefix: str = "q2_",
        expected_signature: Optional[str] = None,
    ) -> None:
        from .scorer import Q2Scorer

        self.config = _config(config)
        self.scorer = Q2Scorer(self.config)
        self.response_column, self.knowledge_column = response_column, knowledge_column
        self.history_column = history_column
        self.explain, self.labels, self.prefix = explain, labels, prefix
        self._load_models()
        if expected_signature is not None and self.scorer.signature != expected_signature:
            raise ValueError(f"This worker's models differ from those the run was checked with: its signature is\n  "
                             f"{self.scorer.signature}\nthe run's is\n  {expected_signature}\n"
                             f"Give every node the same model files (--qg-model / --qa-model / --nli-model).")

    def _load_models(self) -> None:
        s, c = self.scorer, self.config
        _ = s.candidate_extractor, s.question_generator, s.question_answerer
        if self.labels:
            _ = s.text_signals
        if c.remove_personal:
            _ = s.personal_filter
        if c.use_nli or c.fallback:
            _ = s.nli

    def __call__(self, batch: pa.Table) -> pa.Table:
        history = batch.column(self.history_column).to_pylist() if self.history_column else None
        result = self.scorer.score(responses=batch.column(self.response_column).to_pylist(),
                                   knowledge=batch.column(self.knowledge_column).to_pylist(),
                                   history=history, explain=self.explain, label=self.labels)
        for name, (kind, values) in _result_columns(result.responses, self.labels, self.explain).items():
            batch = batch.append_column(self.prefix + name, pa.array(values, type=kind))
        return batch


def _result_columns(results: list[ResponseResult], labels: bool, explain: bool) -> dict[str, tuple[pa.DataType, list]]:
    kinds = {**OUTPUT_COLUMNS, **(_LABEL_COLUMNS if labels else {})}
    cols = {name: (kind, [getattr(r, name) for r in results]) for name, kind in kinds.items()}
    if explain:
        rows = [{k: v for k, v in r.to_dict().items() if k != "index"} for r in results]
        cols["explanation"] = (pa.string(), [json.dumps(row, ensure_ascii=False) for row in rows])
    return cols


def score_dataset(
    ds: "ray.data.Dataset",
    config: Union[Q2Config, Mapping[str, Any], None] = None,
    *,
    response_column: str = "response",
    knowledge_column: str = "knowledge",
    history_column: Optional[str] = None,
    explain: bool = False,
    labels: bool = False,
    prefix: str = "q2_",
    concurrency: int = 1,
    num_cpus: float = 1,
    num_gpus: Optional[float] = None,
    batch_size: int = 64,
    max_restarts: int = 3,
    max_task_retries: int = 3,
    signature: Optional[str] = None,
    scorer_class: type = Q2BatchScorer,
    ray_remote_args: Optional[Mapping[str, Any]] = None,
) -> "ray.data.Dataset":
    """``ds`` with the Q² columns added (``<prefix>score``, ``score_no_nli``, ``status``, ``num_questions``,
    ``error``; ``label`` and ``label3`` with ``labels=True``; ``explanation``, JSON, with ``explain=True``).

    Lazy, like every Ray Data transform. ``concurrency`` actors, each with ``num_cpus`` / ``num_gpus``, score
    ``batch_size`` rows per call. An actor whose process dies is restarted (``max_restarts``) and its unfinished
    batches are retried (``max_task_retries``), so every row comes out exactly once; an actor that cannot load the
    models fails the run. Rows come out in input order only if the dataset's ``DataContext`` preserves order.
    """
    cfg = _config(config)
    columns = ds.schema().names
    required = [c for c in (response_column, knowledge_column, history_column) if c]
    missing = [c for c in required if c not in columns]
    if missing:
        raise ValueError(f"The dataset has no column(s) {missing}; its columns are {columns}. Name the right ones "
                         f"with --response-column / --knowledge-column / --history-column.")
    added = [prefix + c for c in {**OUTPUT_COLUMNS, **_LABEL_COLUMNS, **_EXPLANATION_COLUMN}]
    clash = [c for c in added if c in columns]
    if clash:
        raise ValueError(f"The dataset already has column(s) {clash}, which Q² would add; rename them or choose "
                         f"another prefix.")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency (--concurrency) must be a positive integer, got {concurrency!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size (--ray-batch-size) must be a positive integer, got {batch_size!r}")
    kwargs = dict(response_column=response_column, knowledge_column=knowledge_column, history_column=history_column,
                  explain=explain, labels=labels, prefix=prefix,
                  expected_signature=signature if signature is not None else check_models(
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


def _batch_stats(batch: pa.Table, prefix: str) -> pa.Table:
    results = [ResponseResult(index=0, status=st, score=s, score_no_nli=n) for st, s, n in zip(
        batch.column(prefix + "status").to_pylist(), batch.column(prefix + "score").to_pylist(),
        batch.column(prefix + "score_no_nli").to_pylist())]
    return pa.Table.from_pylist([vars(Q2Stats.of(results))])


def dataset_stats(scored: "ray.data.Dataset", prefix: str = "q2_") -> Q2Stats:
    """The run's :class:`Q2Stats`: one per block, computed where the block is, then added.

    Materialise ``scored`` first (``.materialize()``) when it is also written, or it is scored twice.
    """
    cols = [prefix + c for c in ("status", "score", "score_no_nli")]
    parts = scored.select_columns(cols).map_batches(_batch_stats, fn_kwargs={"prefix": prefix},
                                                    batch_format="pyarrow", batch_size=None).take_all()
    return sum((Q2Stats(**p) for p in parts), Q2Stats())


def _keep_mask(batch: pa.Table, min_score: float, keep_unscored: bool, prefix: str) -> pa.Array:
    score = batch.column(prefix + "score")
    return pc.fill_null(pc.greater_equal(score, min_score), keep_unscored)


def _select(batch: pa.Table, min_score: float, keep_unscored: bool, prefix: str, kept: bool) -> pa.Table:
    mask = _keep_mask(batch, min_score, keep_unscored, prefix)
    return batch.filter(mask if kept else pc.invert(mask))


def split_by_score(scored: "ray.data.Dataset", min_score: float, *, keep_unscored: bool = False,
                   prefix: str = "q2_") -> tuple["ray.data.Dataset", "ray.data.Dataset"]:
    """``(kept, dropped)``: rows with ``score >= min_score`` and the others. Rows without a score (errors, no valid
    question) go with the kept rows if ``keep_unscored``, else with the dropped. Every row lands in exactly one."""
    def part(kept: bool) -> "ray.data.Dataset":
        return scored.map_batches(_select, fn_kwargs=dict(min_score=min_score, keep_unscored=keep_unscored,
                                                          prefix=prefix, kept=kept), batch_format="pyarrow")
    return part(True), part(False)


# -- files ----------------------------------------------------------------------------------------------------------
def _format_of(path: Path, fmt: Optional[str], flag: str) -> str:
    if fmt:
        return fmt
    if path.suffix.lower() in _FORMATS:
        return _FORMATS[path.suffix.lower()]
    if path.is_dir():
        found = {_FORMATS[p.suffix.lower()] for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _FORMATS}
        if len(found) == 1:
            return found.pop()
        raise ValueError(f"Cannot tell the format of directory {path} (files of format(s) {sorted(found)}); "
                         f"pass {flag}")
    raise ValueError(f"Cannot tell the format of {path} from its extension; pass {flag} or name it "
                     f".jsonl / .parquet / .csv")


def _csv_header(path: Path, delimiter: str) -> list[str]:
    first = path if path.is_file() else min(p for p in path.rglob("*") if p.is_file() and p.suffix in (".csv", ".tsv"))
    with first.open(newline="", encoding="utf-8") as f:
        return next(csv.reader(f, delimiter=delimiter), [])


def read_dataset(path: Union[str, os.PathLike], fmt: Optional[str] = None) -> "ray.data.Dataset":
    """A JSONL / Parquet / CSV / TSV file or directory as a Ray dataset. CSV cells stay text, as in ``q2 score``."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"No input file or directory {path}")
    kind = _format_of(path, fmt, "--input-format")
    # Read tasks reserve no CPU: the scoring actors may hold every CPU of the cluster, and a read waiting for one of
    # them would wait for ever (reading costs next to nothing beside scoring).
    if kind == "jsonl":
        return ray.data.read_json(str(path), num_cpus=0,
                                  file_extensions=None if path.is_file() else ["jsonl", "json", "ndjson"])
    if kind == "parquet":
        return ray.data.read_parquet(str(path), num_cpus=0)
    import pyarrow.csv as pcsv

    delimiter = "\t" if kind == "tsv" else ","
    header = _csv_header(path, delimiter)
    return ray.data.read_csv(str(path), num_cpus=0, parse_options=pcsv.ParseOptions(delimiter=delimiter),
                             convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in header}),
                             file_extensions=None if path.is_file() else [kind])


def write_dataset(ds: "ray.data.Dataset", path: Union[str, os.PathLike], fmt: Optional[str] = None) -> None:
    """Write ``ds`` to one file when ``path`` ends in .jsonl / .parquet / .csv / .tsv (rows in the dataset's order),
    else as a directory of part files written by the workers, in format ``fmt``."""
    path = Path(path)
    if path.suffix.lower() not in _FORMATS:
        kind = _format_of(path, fmt, "--input-format")
        path.mkdir(parents=True, exist_ok=True)
        if kind in ("csv", "tsv"):
            import pyarrow.csv as pcsv

            options = pcsv.WriteOptions(delimiter="\t" if kind == "tsv" else ",")
            ds.write_csv(str(path), arrow_csv_args_fn=lambda: {"write_options": options})
        else:
            {"jsonl": ds.write_json, "parquet": ds.write_parquet}[kind](str(path))
        return
    kind = _FORMATS[path.suffix.lower()]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    batches = ds.iter_batches(batch_format="pyarrow", batch_size=None)
    if kind == "parquet":
        import pyarrow.parquet as pq

        schema = ds.schema().base_schema
        with pq.ParquetWriter(str(tmp), schema) as writer:
            for batch in batches:
                writer.write_table(batch.select(schema.names).cast(schema))
    else:
        with tmp.open("w", encoding="utf-8", newline="") as f:
            writer = None
            for batch in batches:
                rows = batch.to_pylist()
                if kind == "jsonl":
                    f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                    continue
                if writer is None:
                    writer = csv.DictWriter(f, fieldnames=batch.column_names,
                                            delimiter="\t" if kind == "tsv" else ",")
                    writer.writeheader()
                writer.writerows({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()}
                                 for r in rows)
    os.replace(tmp, path)


def write_meta(output: Union[str, os.PathLike], signature: str, stats: Q2Stats, config: Q2Config,
               **extra: Any) -> Path:
    """The run's sidecar ``<output>.meta.json``: signature, summary, config and package version."""
    meta = {"signature": signature, "summary": stats.summary(), "config": config.to_dict(), "version": __version__,
            **extra}
    from .io import write_json_atomic

    target = Path(str(output) + ".meta.json")
    write_json_atomic(target, meta)
    return target


# -- q2 score --engine ray --------------------------------------------------------------------------------------------
def _dropped_path(output: str) -> str:
    path = Path(output)
    return str(path.with_name(path.stem + ".dropped" + path.suffix)) if path.suffix else str(path) + ".dropped"


def run_score(args: Any) -> int:
    """``q2 score --engine ray``: read, score on an actor pool, write (or split, in filter mode), print the summary."""
    from .config import config_from_args
    from .results import print_summary

    config = config_from_args(args)
    if args.keep_min_score is not None and not args.output:
        raise ValueError("--keep-min-score needs --output (the kept rows)")
    if not ray.is_initialized():
        ray.init(address=args.ray_address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # Ray Data's per-execution INFO lines
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # output rows in input order, as q2 score writes them
    ctx.enable_progress_bars = not args.no_progress
    ds = read_dataset(args.input, args.input_format)
    out_format = _format_of(Path(args.input), args.input_format, "--input-format")  # for directory outputs
    signature = check_models(config, num_cpus=args.num_cpus_per_worker, num_gpus=args.num_gpus_per_worker)
    scored = score_dataset(ds, config, response_column=args.response_column, knowledge_column=args.knowledge_column,
                           history_column=args.history_column, explain=args.explain, labels=args.labels,
                           concurrency=args.concurrency, num_cpus=args.num_cpus_per_worker,
                           num_gpus=args.num_gpus_per_worker, batch_size=args.ray_batch_size, signature=signature)
    scored = scored.materialize()
    stats = dataset_stats(scored)
    summary: dict[str, Any] = stats.summary()
    outputs: list[str] = []
    extra: dict[str, Any] = {}
    if args.keep_min_score is None:
        if args.output:
            write_dataset(scored, args.output, out_format)
            outputs.append(args.output)
    else:
        dropped_output = args.dropped_output or _dropped_path(args.output)
        kept, dropped = split_by_score(scored, args.keep_min_score, keep_unscored=args.unscored == "keep")
        write_dataset(kept, args.output, out_format)
        write_dataset(dropped, dropped_output, out_format)
        extra["filter"] = {"min_score": args.keep_min_score, "unscored": args.unscored, "kept": kept.count(),
                           "dropped": dropped.count(), "kept_output": args.output, "dropped_output": dropped_output}
        outputs += [args.output, dropped_output]
    for out in outputs:
        write_meta(out, signature, stats, config, **extra)
    print_summary({**summary, **extra}, signature, args.format)
    if "filter" in extra and args.format == "text":
        f = extra["filter"]
        print(f"filter        kept {f['kept']} -> {f['kept_output']}  dropped {f['dropped']} -> "
              f"{f['dropped_output']}  (q2 >= {f['min_score']}; unscored rows: {f['unscored']})")
    return 0
