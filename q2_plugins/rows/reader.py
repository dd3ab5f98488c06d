"""The one reader of result files: ``q2 score`` output of either engine (JSONL / Parquet / CSV / TSV, or a
directory of part files) and ``q2 replay`` output, with its sidecar, for ``q2 report``, ``q2 compare`` and
``q2 meta-eval --scores``."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from ..results import EXPLANATION_FIELDS, RESULT_FIELDS, ResponseResult
from .layout import ROW_FIELD

__all__ = ["ResultRows", "read_results", "response_result"]

# result fields as the Ray engine wrote them before the one layout (q2_score, ..., q2_explanation: JSON)
_LEGACY_PREFIX, _LEGACY_EXPLANATION = "q2_", "q2_explanation"


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


def read_results(path: str | Path) -> ResultRows:
    """Read a result file of ``q2 score`` (either engine) or ``q2 replay``: JSONL, Parquet, CSV / TSV, or a directory
    of such part files (read in name order), with its sidecar ``PATH.meta.json``. Also read: a JSON
    ``Q2Result.to_dict()``, per-example files of the framework adapters (the result nested one level down) and result
    files of the Ray engine before the one layout (``q2_`` before each result field)."""
    from ..io import FORMATS, meta_path

    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS) \
        if path.is_dir() else [path]
    out = ResultRows(path, [])
    for f in files:
        out.rows.extend(_typed(r) for r in _raw_rows(f))
    meta = meta_path(path)
    if meta.is_file():
        try:
            out.meta = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            out.notes.append(f"{meta.name} could not be read ({e}); the summary is computed from the rows")
        else:
            if not isinstance(out.meta, dict):
                out.notes.append(f"{meta.name} is not a JSON object; ignored")
                out.meta = None
    return out


def _raw_rows(path: Path) -> Iterable[Any]:
    """The records of one file as it holds them (:func:`q2_plugins.io.read_rows`; Parquet through pyarrow)."""
    from ..io import InputFormatError, read_rows

    if not path.is_file():
        raise InputFormatError(f"No results file {path}")
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(f"reading {path} needs pyarrow ({e.name} is not installed): "
                                      f"pip install 'q2-plugins[ray]'", name=e.name) from e
        return pq.read_table(path).to_pylist()
    if path.suffix.lower() == ".json":
        whole = _json_document(path)
        if whole is not None:
            return whole
    return read_rows(path)


def _json_document(path: Path) -> Optional[list[Any]]:
    """The rows of a ``.json`` file holding one JSON document (a ``Q2Result.to_dict()`` gives its ``responses``);
    None when the file is JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
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
    if not isinstance(row, dict) or "__error__" in row:
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
