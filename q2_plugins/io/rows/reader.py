"""The one reader of result files: ``q2 score`` output of either engine (JSONL / Parquet / CSV / TSV, or a
directory of part files) and ``q2 replay`` output, with its sidecar, for ``q2 report``, ``q2 compare`` and
``q2 meta-eval --scores``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from q2_plugins.io.columns import recorded_columns
from q2_plugins.io.inputs import FORMATS, InputFormatError, ReadError, read_records
from q2_plugins.io.outputs import meta_path
from q2_plugins.io.rows.layout import ROW_FIELD
from q2_plugins.metric.results import EXPLANATION_FIELDS, RESULT_FIELDS, ResponseResult

__all__ = ["ResultRows", "read_results", "scan_results", "read_sidecar", "response_result"]

# result fields as the Ray engine wrote them before the one layout (q2_score, ..., q2_explanation: JSON)
_LEGACY_PREFIX, _LEGACY_EXPLANATION = "q2_", "q2_explanation"


_REMOVE_REPEATED = "each response must come once: remove the repeated rows"


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
        return dict(saved) if isinstance(saved, dict) else recorded_columns()

    def results(self) -> list[ResponseResult]:
        """The result rows as :class:`~q2_plugins.metric.results.ResponseResult` (every row must be one)."""
        return [response_result(r, i) for i, r in enumerate(self.rows)]


def read_results(path: str | Path, *, score_field: str = "score", id_field: Optional[str] = "id",
                 repeated_ids: str = _REMOVE_REPEATED) -> ResultRows:
    """Read a result file of ``q2 score`` (either engine) or ``q2 replay``: JSONL, Parquet, CSV / TSV, or a directory
    of such part files (read in name order), with its sidecar ``PATH.meta.json``. Also read: a JSON
    ``Q2Result.to_dict()``, lm-eval's logged samples (the result row nested one level down, in ``q2_details``), result
    files of the Ray engine before the one layout (``q2_`` before each result field) and files of ids and scores
    (a ``score_field``).

    The one verdict of ``q2 report``, ``q2 compare`` and ``q2 meta-eval --scores``: a file that is not one of these
    (a ``.partial``, no rows, a record that cannot be read, a row that is neither a result nor a score) raises
    :class:`~q2_plugins.io.inputs.InputFormatError` in one line naming the file and the line (an ``id_field`` value
    that comes twice: the line ends with ``repeated_ids``, what to do; ``id_field=None`` lets ids repeat)."""
    path = Path(path)
    out = ResultRows(path, list(scan_results(path, score_field=score_field, id_field=id_field,
                                             repeated_ids=repeated_ids)))
    out.meta, out.notes = read_sidecar(path)
    return out


def scan_results(path: str | Path, *, score_field: str = "score", id_field: Optional[str] = "id",
                 repeated_ids: str = _REMOVE_REPEATED) -> Iterator[dict[str, Any]]:
    """The rows :func:`read_results` reads, one at a time (memory bounded by one row and the ids seen), checked as
    it checks them: each a result row whose result fields have their types, or a row whose ``score_field`` is a
    number (or empty), and no ``id_field`` value twice."""
    path = Path(path)
    _check_results_path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS) \
        if path.is_dir() else [path]
    n = 0
    seen: dict[str, str] = {}  # id -> where it first came
    for f in files:
        for where, raw in _raw_rows(f):
            row = _typed(raw)
            _check_row(f, where, row, score_field)
            _check_types(f, where, row, score_field)
            ident = row.get(id_field) if id_field else None
            if ident is not None and ident != "" and not isinstance(ident, (dict, list)):
                first = seen.setdefault(str(ident), f"{f.name} {where}")
                if first != f"{f.name} {where}":
                    raise InputFormatError(f"{f} {where}: {id_field} {ident!r} comes twice (first at {first}); "
                                           f"{repeated_ids}")
            n += 1
            yield row
    if not n:
        raise InputFormatError(f"{path} holds no rows" + (" (no result files in the folder)" if not files else ""))


def read_sidecar(path: str | Path) -> tuple[Optional[dict[str, Any]], list[str]]:
    """A result file's sidecar ``PATH.meta.json`` (None without a readable one) and notes on what went wrong."""
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


def _check_results_path(path: Path) -> None:
    """A path the readers can take: it exists, is no ``.partial``, and its extension names a format."""
    if path.name.endswith(".partial"):
        raise InputFormatError(f"{path} is a .partial file: still being written or left by a stopped run; read "
                               f"{path.name.removesuffix('.partial')} once the run is done (a stopped q2 score run "
                               f"can be resumed)")
    if not path.exists():
        raise InputFormatError(f"No results file {path}")
    if path.is_file() and path.suffix.lower() not in FORMATS:
        raise InputFormatError(f"Cannot tell the format of {path} from its extension; name a .jsonl, .parquet, "
                               f".csv or .tsv results file")


def _check_row(path: Path, where: str, row: Any, score_field: str) -> None:
    """A row the readers can take: a record that was read, an object, a result row or a score row."""
    if not isinstance(row, dict):
        raise InputFormatError(f"{path} {where} is a JSON {type(row).__name__}, expected an object (a result row)")
    if isinstance(row, ReadError):  # (the message names its line)
        raise InputFormatError(f"{path} {row['__error__']}")
    if "status" not in row and score_field not in row:
        raise InputFormatError(f"{path} {where} is not a result row: no 'status' or {score_field!r} field (its "
                               f"fields: {sorted(map(str, row))[:12]}); give q2 score output (an input file: score "
                               f"it first)")


def _type_name(kind: type) -> str:
    return {float: "a number", int: "a whole number", bool: "true or false", str: "text"}.get(kind, kind.__name__)


def _of_kind(value: Any, kind: type) -> bool:
    if value is None:
        return True
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind) if kind in (bool, str) else True


def _check_types(path: Path, where: str, row: dict[str, Any], score_field: str) -> None:
    """A result row's result fields of their declared types; a score row's score a number (or empty)."""
    if "status" in row:
        for name, kind in RESULT_FIELDS.items():
            if name in row and not _of_kind(row[name], kind):
                raise InputFormatError(f"{path} {where}: {name} is {row[name]!r}, not {_type_name(kind)}; a result "
                                       f"row holds what q2 score writes (fix or drop the row)")
        return
    value = row.get(score_field)
    if value is None or (isinstance(value, str) and not value.strip()) or _of_kind(value, float):
        return
    if isinstance(value, str):
        try:
            float(value)
            return
        except ValueError:
            pass
    raise InputFormatError(f"{path} {where}: {score_field} is {value!r}, not a number")


def _raw_rows(path: Path) -> Iterable[tuple[str, Any]]:
    """``(where, record)`` per record of one file as it holds it (``line N`` for JSONL / CSV read by
    :func:`q2_plugins.io.inputs.read_records`, ``row N`` in Parquet, ``record N`` in a JSON document)."""
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
    with path.open("rb") as f:
        for n, row in read_records(f, kind, rename=False):
            yield f"line {n}", row


def _parquet_rows(path: Path, parquet: Any) -> Iterable[tuple[str, Any]]:
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
    """A row of an older layout in the one layout: the Ray engine's ``q2_<field>`` columns, or a record with the
    result row nested one level down (an lm-eval sample's ``q2_details``); any other row as it is."""
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
    """A result row (as :func:`read_results` gives it) as a :class:`~q2_plugins.metric.results.ResponseResult`; its
    ``index`` is the row's ``row`` when it has one, else ``index``."""
    position = row.get(ROW_FIELD)
    values = {name: row.get(name) for name in RESULT_FIELDS}
    values["num_questions"] = values["num_questions"] or 0
    values["num_candidates"] = values["num_candidates"] or 0
    values["used_fallback"] = bool(values["used_fallback"])
    explained = {name: row.get(name) for name in EXPLANATION_FIELDS if row.get(name) is not None}
    return ResponseResult.from_dict({"index": position if isinstance(position, int) else index, **values,
                                     **explained})
