"""The one row pipeline of ``q2 score``, used by the local and the Ray engine alike, and the one reader of its output.

A record (one dict per input row, or ``{"__error__": message}`` for one that could not be read) becomes the
scorer's columns; a record that could not be read or lacks a field is scored as missing and gets its problem as its
error; every record gets one :class:`~q2_plugins.results.ResponseResult`. The run's sidecar ``OUTPUT.meta.json`` is
written by :func:`write_meta` for both engines, with the same keys (``docs/failures.md``).

Both engines write one row layout (``docs/usage.md``): ``row`` (the record's position in its input file), the
record's input fields (one named like a field of the layout kept as ``input_<name>``, see :func:`kept_name`), then
the result fields of :data:`~q2_plugins.results.RESULT_FIELDS` (with explanations, those of
:data:`~q2_plugins.results.EXPLANATION_FIELDS`). :func:`result_row` writes a row; :func:`read_results` reads a result
file of either engine, JSONL / Parquet / CSV / TSV, with its sidecar, for ``q2 report``, ``q2 compare`` and
``q2 meta-eval --scores``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from . import __version__
from .results import EXPLANATION_FIELDS, RESULT_FIELDS, ResponseResult

__all__ = ["RowSpec", "score_records", "result_row", "result_fields", "kept_name", "read_results", "ResultRows",
           "response_result", "write_meta", "scan_results", "read_sidecar", "dropped_path", "problems_of",
           "cache_line", "META_FORMAT", "ROW_FIELD", "INPUT_PREFIX", "RESERVED_FIELDS"]

#: the ``format`` of every ``q2 score`` sidecar
META_FORMAT = "q2-score-results"
#: the first field of every result row: the record's position in its input file (0-based)
ROW_FIELD = "row"
#: an input field named like a field of the layout is kept under this prefix (``score`` -> ``input_score``)
INPUT_PREFIX = "input_"
#: the names of the layout an input field may not take
RESERVED_FIELDS = frozenset({ROW_FIELD, *RESULT_FIELDS, *EXPLANATION_FIELDS})
# result fields as the Ray engine wrote them before the one layout (q2_score, ..., q2_explanation: JSON)
_LEGACY_PREFIX, _LEGACY_EXPLANATION = "q2_", "q2_explanation"


@dataclass(frozen=True)
class RowSpec:
    """Which fields of a record are scored, and what each result carries."""

    response_column: str = "response"
    knowledge_column: str = "knowledge"
    history_column: Optional[str] = None
    explain: bool = False
    labels: bool = False

    @property
    def settings(self) -> tuple[str, ...]:
        """The settings that name the fields every record needs: response, knowledge (and history when named)."""
        return ("response_column", "knowledge_column") + (("history_column",) if self.history_column else ())

    @property
    def required(self) -> tuple[str, ...]:
        """The fields every record needs, in the order of :attr:`settings`."""
        return tuple(getattr(self, setting) for setting in self.settings)

    def columns(self) -> dict[str, Optional[str]]:
        """The column names used, as the sidecar records them."""
        return {"response": self.response_column, "knowledge": self.knowledge_column, "history": self.history_column}


def problems_of(records: Sequence[dict[str, Any]], spec: RowSpec) -> list[Optional[str]]:
    """Per record: why it cannot be scored (it could not be read, or lacks a field), or None."""
    from .io import missing_fields

    return [r["__error__"] if "__error__" in r else missing_fields(r, spec.required) for r in records]


def score_records(scorer: Any, records: Sequence[dict[str, Any]], spec: RowSpec, *, progress: Any = False,
                  labeller: Any = None) -> Any:
    """The scorer's :class:`~q2_plugins.results.Q2Result` for ``records``, one response per record in order; a record
    that cannot be scored is scored as missing and its problem is its row's error. With ``labeller`` (a trained
    five-way model, :class:`~q2_plugins.train.TaxonomyModel`) the rows are labelled by it, not by the text rules."""
    problems = problems_of(records, spec)
    values = [[None if p else r.get(c) for r, p in zip(records, problems)] for c in spec.required]
    history = values[2] if spec.history_column else None
    result = scorer.score(responses=values[0], knowledge=values[1], history=history, explain=spec.explain,
                          progress=progress, label=spec.labels and labeller is None)
    if labeller is not None:
        labeller.label(result, responses=values[0], knowledge=values[1], history=history)
    for res, problem in zip(result.responses, problems):
        if problem:
            res.error = problem
    return result


def kept_name(name: str, reserved: Iterable[str] = RESERVED_FIELDS) -> str:
    """The name an input field keeps in a result row: :data:`INPUT_PREFIX` before it when, without its leading
    prefixes, it is a field of the layout (``score`` -> ``input_score``, ``input_score`` -> ``input_input_score``),
    so no two fields get one name."""
    base = name
    while base.startswith(INPUT_PREFIX):
        base = base[len(INPUT_PREFIX):]
    return INPUT_PREFIX + name if base in reserved else name


def result_fields(res: ResponseResult, explain: bool = False) -> dict[str, Any]:
    """The result fields of one response, in the declared order (:data:`~q2_plugins.results.RESULT_FIELDS`; with
    ``explain`` also :data:`~q2_plugins.results.EXPLANATION_FIELDS`, None where the response has none)."""
    values = res.to_dict()
    names = [*RESULT_FIELDS, *(EXPLANATION_FIELDS if explain else ())]
    return {name: values.get(name) for name in names}


def result_row(index: int, record: dict[str, Any], res: ResponseResult, explain: bool = False) -> dict[str, Any]:
    """One row of a result file, as both engines write it: ``row`` (the record's position), the record's input
    fields (renamed by :func:`kept_name` where they clash), then :func:`result_fields`."""
    res.index = index
    inputs = {} if "__error__" in record else {kept_name(str(k)): v for k, v in record.items()}
    return {ROW_FIELD: index, **inputs, **result_fields(res, explain)}


# -- reading result files ----------------------------------------------------------------------------------------------
@dataclass
class ResultRows:
    """A result file as :func:`read_results` reads it: its rows, its sidecar (None without one) and notes on what
    could not be read. A row with a ``status`` is a result row with typed result fields; an unreadable record is
    ``{"__error__": message}``; any other row (an id / score file of another metric) is as the file holds it."""

    path: Path
    rows: list[dict[str, Any]]
    meta: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)

    @property
    def signatures(self) -> list[str]:
        """The signatures the rows carry (a ``signature`` field), then the sidecar's, each once."""
        found = [r["signature"] for r in self.rows if isinstance(r.get("signature"), str)]
        if self.meta is not None and isinstance(self.meta.get("signature"), str):
            found.append(self.meta["signature"])
        return list(dict.fromkeys(found))

    @property
    def columns(self) -> dict[str, Optional[str]]:
        """The input columns that held the response, knowledge and history (the sidecar's; else the defaults)."""
        saved = (self.meta or {}).get("columns")
        return dict(saved) if isinstance(saved, dict) else {"response": "response", "knowledge": "knowledge",
                                                              "history": None}

    def results(self) -> list[ResponseResult]:
        """The result rows as :class:`~q2_plugins.results.ResponseResult` (every row must be one)."""
        return [response_result(r, i) for i, r in enumerate(self.rows)]


def read_results(path: str | Path, *, score_field: str = "score") -> ResultRows:
    """Read a result file of ``q2 score`` (either engine) or ``q2 replay``: JSONL, Parquet, CSV / TSV, or a directory
    of such part files (read in name order), with its sidecar ``PATH.meta.json``. Also read: a JSON
    ``Q2Result.to_dict()``, per-example files of the framework adapters (the result nested one level down), result
    files of the Ray engine before the one layout (``q2_`` before each result field) and files of ids and scores
    (a ``score_field``).

    The one verdict of ``q2 report``, ``q2 compare`` and ``q2 meta-eval --scores``: a file that is not one of these
    (a ``.partial``, no rows, a record that cannot be read, a row that is neither a result nor a score) raises
    :class:`~q2_plugins.io.InputFormatError` in one line naming the file and the line."""
    path = Path(path)
    out = ResultRows(path, list(scan_results(path, score_field=score_field)))
    out.meta, out.notes = read_sidecar(path)
    return out


def scan_results(path: str | Path, *, score_field: str = "score") -> Iterator[dict[str, Any]]:
    """The rows :func:`read_results` reads, one at a time (memory bounded by one row), checked as it checks them."""
    from .io import InputFormatError

    path = Path(path)
    _check_results_path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _RESULT_SUFFIXES) \
        if path.is_dir() else [path]
    n = 0
    for f in files:
        for where, raw in _raw_rows(f):
            row = _typed(raw)
            _check_row(f, where, row, score_field)
            n += 1
            yield row
    if not n:
        raise InputFormatError(f"{path} holds no rows" + (" (no result files in the folder)" if not files else ""))


def read_sidecar(path: str | Path) -> tuple[Optional[dict[str, Any]], list[str]]:
    """A result file's sidecar ``PATH.meta.json`` (None without a readable one) and notes on what went wrong."""
    from .io import meta_path

    meta = meta_path(path)
    if not meta.is_file():
        return None, []
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return None, [f"{meta.name} could not be read ({e}); the summary is computed from the rows"]
    if not isinstance(data, dict):
        return None, [f"{meta.name} is not a JSON object; ignored"]
    return data, []


_RESULT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet", ".csv", ".tsv")


def _check_results_path(path: Path) -> None:
    """A path the readers can take: it exists, is no ``.partial``, and its extension names a format."""
    from .io import InputFormatError

    if path.name.endswith(".partial"):
        raise InputFormatError(f"{path} is a .partial file: still being written or left by a stopped run; read "
                               f"{path.name.removesuffix('.partial')} once the run is done (a stopped q2 score run "
                               f"can be resumed)")
    if not path.exists():
        raise InputFormatError(f"No results file {path}")
    if path.is_file() and path.suffix.lower() not in _RESULT_SUFFIXES:
        raise InputFormatError(f"Cannot tell the format of {path} from its extension; name a .jsonl, .parquet, "
                               f".csv or .tsv results file")


def _check_row(path: Path, where: str, row: Any, score_field: str) -> None:
    """A row the readers can take: a record that was read, an object, a result row or a score row."""
    from .io import InputFormatError, ReadError

    if not isinstance(row, dict):
        raise InputFormatError(f"{path} {where} is a JSON {type(row).__name__}, expected an object (a result row)")
    if isinstance(row, ReadError):  # (the message names its line)
        raise InputFormatError(f"{path} {row['__error__']}")
    if "status" not in row and score_field not in row:
        raise InputFormatError(f"{path} {where} is not a result row: no 'status' or {score_field!r} field (its "
                               f"fields: {sorted(map(str, row))[:12]}); give q2 score output (an input file: score "
                               f"it first)")


def _raw_rows(path: Path) -> Iterable[tuple[str, Any]]:
    """``(where, record)`` per record of one file as it holds it (``line N`` for JSONL / CSV read by
    :func:`q2_plugins.io.read_records`, ``row N`` in Parquet, ``record N`` in a JSON document)."""
    from .io import InputFormatError

    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(f"reading {path} needs pyarrow ({e.name} is not installed): "
                                      f"pip install 'q2-plugins[ray]'", name=e.name) from e
        try:
            parquet = pq.ParquetFile(path)
        except (OSError, ValueError) as e:  # (pyarrow's errors are these)
            raise InputFormatError(f"{path} cannot be read as Parquet ({' '.join(str(e).split())[:200]}): a "
                                   f"damaged or unfinished file") from None
        return _parquet_rows(path, parquet)
    if path.suffix.lower() == ".json":
        whole = _json_document(path)
        if whole is not None:
            return ((f"record {n}", r) for n, r in enumerate(whole, start=1))
    kind = "jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else path.suffix.lower()[1:]
    return _records(path, kind)


def _records(path: Path, kind: str) -> Iterable[tuple[str, Any]]:
    from .io import read_records

    with path.open("rb") as f:
        for n, row in read_records(f, kind, rename=False):
            yield f"line {n}", row


def _parquet_rows(path: Path, parquet: Any) -> Iterable[tuple[str, Any]]:
    from .io import InputFormatError

    n = 0
    try:
        for batch in parquet.iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                yield f"row {n}", row
                n += 1
    except (OSError, ValueError) as e:
        raise InputFormatError(f"{path} row {n}: cannot be read as Parquet ({' '.join(str(e).split())[:200]}): a "
                               f"damaged or unfinished file") from None


def _json_document(path: Path) -> Optional[list[Any]]:
    """The rows of a ``.json`` file holding one JSON document (a ``Q2Result.to_dict()`` gives its ``responses``);
    None when the file is JSON lines (or not UTF-8: its lines then say which)."""
    try:
        text = path.read_text(encoding="utf-8")
        whole = json.loads(text)
    except ValueError:
        return None
    if isinstance(whole, dict) and isinstance(whole.get("responses"), list):
        return whole["responses"]
    return [whole]


def _typed(row: Any) -> Any:
    """A result row with its result fields of the declared types (a CSV cell "0.5" -> 0.5, "" -> None, JSON text of
    an explanation -> its value); a legacy or nested result row first brought to the one layout. A value that is not
    of its type stays as it is, for the reader to reject."""
    from .io import ReadError

    if not isinstance(row, dict) or isinstance(row, ReadError):
        return row
    if "status" not in row:
        row = _legacy(row)
    if "status" not in row:
        return row
    out = dict(row)
    if isinstance(out.get(ROW_FIELD), str) and out[ROW_FIELD].strip().isdigit():
        out[ROW_FIELD] = int(out[ROW_FIELD])
    for name, kind in {**RESULT_FIELDS, **EXPLANATION_FIELDS}.items():
        if name in out:
            out[name] = _of_type(out[name], kind)
    return out


def _legacy(row: dict[str, Any]) -> dict[str, Any]:
    """A row of an older layout in the one layout: the Ray engine's ``q2_<field>`` columns, or a per-example record
    of a framework adapter with the result nested one level down; any other row as it is."""
    if _LEGACY_PREFIX + "status" in row:
        explained = row.get(_LEGACY_EXPLANATION)
        explained = _of_type(explained, dict) if explained is not None else {}
        names = {_LEGACY_PREFIX + f: f for f in RESULT_FIELDS}
        out = {k: v for k, v in row.items() if k not in names and k != _LEGACY_EXPLANATION}
        out.update({f: row[k] for k, f in names.items() if k in row})
        if isinstance(explained, dict):
            out.update({k: v for k, v in explained.items() if k in EXPLANATION_FIELDS or k not in out})
        return out
    nested = [v for v in row.values() if isinstance(v, dict) and "status" in v and "score" in v]
    if len(nested) == 1:
        return {**{k: v for k, v in row.items() if not isinstance(v, (dict, list))}, **nested[0]}
    return row


_TRUE, _FALSE = ("true", "1"), ("false", "0")


def _of_type(value: Any, kind: type) -> Any:
    """``value`` as ``kind`` when it is that value written as text (CSV) or JSON text (explanations); None for an
    empty cell (CSV writes a null as one); else unchanged."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if isinstance(value, float) and math.isnan(value) and kind is not float:
        return None
    if not isinstance(value, str) or kind is str:
        return value
    try:
        if kind is float:
            return float(value)
        if kind is int:
            return int(value)
        if kind is bool:
            low = value.strip().lower()
            return True if low in _TRUE else False if low in _FALSE else value
        return json.loads(value)
    except ValueError:
        return value


def response_result(row: Mapping[str, Any], index: int = 0) -> ResponseResult:
    """A result row (as :func:`read_results` gives it) as a :class:`~q2_plugins.results.ResponseResult`; its
    ``index`` is the row's ``row`` when it has one, else ``index``."""
    position = row.get(ROW_FIELD)
    values = {name: row.get(name) for name in RESULT_FIELDS}
    values["num_questions"] = values["num_questions"] or 0
    values["num_candidates"] = values["num_candidates"] or 0
    values["used_fallback"] = bool(values["used_fallback"])
    explained = {name: row.get(name) for name in EXPLANATION_FIELDS if row.get(name) is not None}
    return ResponseResult.from_dict({"index": position if isinstance(position, int) else index, **values,
                                     **explained})


def cache_line(counts: dict[str, int], cache_dir: Any) -> str:
    """The summary's cache line; entries that failed their check (recomputed, never used) are named."""
    failed = counts.get("failed_checks", 0)
    note = f"  failed checks {failed} (damaged or edited entries: computed again)" if failed else ""
    return f"cache         hits {counts['hits']}  misses {counts['misses']}{note}  ({cache_dir})"


def dropped_path(output: str | Path) -> Path:
    """Filter mode's default file of dropped rows: ``OUT.dropped.EXT`` beside ``OUT.EXT``."""
    path = Path(output)
    return path.with_name(path.stem + ".dropped" + path.suffix) if path.suffix else Path(str(path) + ".dropped")


def write_meta(output: str | Path, *, engine: str, signature: Any, summary: dict[str, Any], config: Any, rows: int,
               input: str | Path | Sequence[str | Path], spec: Optional[RowSpec], exit_code: int,
               **extra: Any) -> Path:
    """Write ``OUTPUT.meta.json`` (atomically) and return its path: the same keys from both engines and ``q2
    replay`` (``engine="replay"``, its ``config`` a dict, ``spec`` None, ``input`` its steps files), ``extra``
    (cache counts, filter mode, an HTML report's failure) after them."""
    from .io import meta_path, write_json_atomic
    from .versions import library_versions

    target = meta_path(output)
    write_json_atomic(target, {
        "format": META_FORMAT, "version": __version__, "engine": engine, "signature": str(signature),
        "signature_short": getattr(signature, "short", str(signature)), "summary": summary,
        "config": config if isinstance(config, Mapping) else config.to_dict(), "rows": rows,
        "input": [str(i) for i in input] if isinstance(input, (list, tuple)) else str(input), "output": str(output),
        "columns": spec.columns() if spec is not None else None, "exit_code": exit_code,
        "libraries": library_versions(), **extra,
    })
    return target
