"""What every loader shares: the error types, label options and label maps, the log of the rows a loader
leaves out, and the CSV / TSV / JSON readers that check the columns they need."""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from q2_plugins.datasets.types import Example, SkippedRow
from q2_plugins.io.inputs import InputFormatError, blank_lines
from q2_plugins.metric.errors import SettingError

__all__ = ["DataFormatError", "DataSettingError", "LabelOptions", "read_label_map", "RowLog", "label_key",
           "cell_text", "blank_row", "skip_blank_lines", "csv_rows", "csv_lines", "json_objects", "first_field",
           "text_of"]


class DataFormatError(InputFormatError):
    """A data file is not in the format its loader reads; the message says what to change."""


class DataSettingError(DataFormatError, SettingError):
    """A data file that does not fit the settings that say how to read it; ``setting`` names them."""


def label_key(value: str) -> str:
    return " ".join(str(value).strip().lower().split())


def cell_text(value: Any) -> str:
    """A label cell or field as text: JSON ``null`` is an empty cell, not the label ``None``."""
    return "" if value is None else str(value)


@dataclass(frozen=True)


class LabelOptions:
    """What a loader does with label values it does not know (an annotator's typo such as ``entailmentt``).

    ``label_map`` maps a label value (whole cell, or one label of a multi-label cell; compared case- and
    space-insensitively) to the value to read instead. A row whose label is still unknown is not an example: it is
    listed in :attr:`MetaEvalData.skipped` with its line, and the run goes on; ``drop_unknown`` says that this is
    wanted (no warning is printed).
    """

    label_map: Mapping[str, str] = field(default_factory=dict)
    drop_unknown: bool = False

    def mapped(self, value: str) -> str:
        """``value`` as the label map rewrites it (unchanged when the map does not name it)."""
        if not self.label_map:
            return value
        table = {label_key(k): v for k, v in self.label_map.items()}
        return table.get(label_key(value), value)


def read_label_map(path: str | Path) -> dict[str, str]:
    """A label map file: a JSON object ``{"entailmentt": "entailment"}``, or CSV / TSV lines ``from,to`` (no header;
    lines starting with ``#`` are comments)."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"No label map file {path}")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise DataFormatError(f"Label map file {path} is empty")
    if text.lstrip().startswith("{"):
        try:
            table = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"Label map file {path} is not valid JSON: {e.msg} (line {e.lineno})") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            raise DataFormatError(f"Label map file {path}: every key and value must be a string")
        return dict(table)
    delimiter = "\t" if "\t" in text else ","
    table = {}
    for n, row in enumerate(csv.reader(text.splitlines(), delimiter=delimiter), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) != 2:
            raise DataFormatError(f"Label map file {path} line {n}: expected two values 'from{delimiter}to', "
                                  f"got {row!r}")
        table[row[0].strip()] = row[1].strip()
    return table


class RowLog:
    """The rows of one file a loader leaves out, with their reasons, and the notes that say so."""

    def __init__(self, path: Path, labels: LabelOptions, expected: Sequence[str] = ()) -> None:
        self.path, self.labels, self.expected = path, labels, list(expected)
        self.skipped: list[SkippedRow] = []

    def skip(self, where: str, reason: str, detail: str = "") -> None:
        self.skipped.append(SkippedRow(where, reason, detail))

    def unknown_label(self, where: str, value: Any) -> None:
        """Leave out a row whose label the loader does not know: an empty cell (or none) is an ``empty label``, a
        value is an ``unknown label`` (listed with the value, for a label map)."""
        text = cell_text(value)
        if text.strip():
            self.skip(where, "unknown label", text)
        else:
            self.skip(where, "empty label")

    def guarded(self, where: str, read: Callable[..., Optional[Example]], *args: Any) -> Optional[Example]:
        """``read(*args, self)``'s example; a :class:`DataFormatError` (a missing field, a wrong type) leaves the
        row out, listed."""
        try:
            return read(*args, self)
        except DataFormatError as e:
            self.skip(where, "malformed row", str(e))
            return None

    def texts(self, where: str, response: str, knowledge: str) -> bool:
        """True when both texts are there; else the row is skipped with the reason."""
        for name, text in (("response", response), ("knowledge", knowledge)):
            if not text.strip():
                self.skip(where, f"empty {name}")
                return False
        return True

    def notes(self) -> list[str]:
        if not self.skipped:
            return []
        counts = Counter(r.reason for r in self.skipped)
        out = [f"left out {len(self.skipped)} rows of {self.path.name}: "
               + ", ".join(f"{n} {reason}" for reason, n in counts.items())]
        unknown = [r for r in self.skipped if r.reason == "unknown label"]
        if unknown:
            listed = "; ".join(f"{r.where} {r.detail!r}" for r in unknown[:20])
            more = f" (and {len(unknown) - 20} more in report.json)" if len(unknown) > 20 else ""
            how = ("dropped as asked" if self.labels.drop_unknown else
                   "map them with a label map (setting label_map) or drop them knowingly (setting drop_unknown_labels)")
            known = f" (known: {', '.join(self.expected)})" if self.expected else ""
            out.append(f"unknown labels{known}: {listed}{more}; {how}")
        return out

    def check(self, examples: Sequence[Example]) -> None:
        """Refuse a file of which no row is an example, saying why."""
        if examples:
            return
        if not self.skipped:
            raise DataFormatError(f"{self.path} holds no rows")
        counts = dict(Counter(r.reason for r in self.skipped))
        first = "; ".join(r.describe() for r in self.skipped[:3])
        known = f"; the known labels are {self.expected}" if self.expected and "unknown label" in counts else ""
        raise DataFormatError(f"{self.path} holds no usable row: all {len(self.skipped)} left out {counts} "
                              f"(e.g. {first}){known}")


def blank_row(row: Mapping[str, Any]) -> bool:
    return all(v is None or (isinstance(v, str) and not v.strip()) or v == [] for v in row.values())


def skip_blank_lines(log: "RowLog", path: str | Path, fmt: Optional[str] = None, prefix: str = "") -> None:
    """List the empty lines of a CSV / TSV file as blank rows, with their line: its rows, read by
    :func:`~q2_plugins.io.inputs.read_rows`, pass over them (so row numbers stay those ``q2 score`` writes)."""
    for n in blank_lines(path, fmt):
        log.skip(f"{prefix}line {n}", "blank row")


def csv_rows(path: Path, required: Sequence[str], what: str, delimiter: str = ",") -> tuple[list[str], list[dict]]:
    """The columns and rows of a CSV / TSV file, empty lines left out (as ``csv.DictReader`` does)."""
    columns, rows = csv_lines(path, required, what, delimiter)
    return columns, [row for _, row in rows if row is not None]


def csv_lines(path: Path, required: Sequence[str], what: str, delimiter: str = ","
               ) -> tuple[list[str], list[tuple[int, Optional[dict]]]]:
    """The columns and ``(first line, row)`` of every row of a CSV / TSV file; an empty line is ``(line, None)``."""
    if not path.is_file():
        raise DataFormatError(f"No {what} file {path}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delimiter)
        columns = next(reader, [])
        if not columns:
            raise DataFormatError(f"{path} is empty (no header, no rows); expected a {what} file")
        missing = [c for c in required if c not in columns]
        if missing:
            raise DataFormatError(f"{path} is not a {what} file: no column(s) {missing}; its columns are {columns}")
        rows: list[tuple[int, Optional[dict]]] = []
        line = reader.line_num
        for values in reader:
            rows.append((line + 1, dict(zip(columns, values + [""] * (len(columns) - len(values))))
                         if values else None))
            line = reader.line_num
        return columns, rows


def json_objects(path: Path, what: str, log: Optional["RowLog"] = None) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line or position, object) of a JSONL file, or of a file holding one JSON list of objects (the Dialogue NLI
    release is such a list, whatever its extension). With ``log``, a line that is not a JSON object is left out
    and listed there; without, it stops the file."""
    if not path.is_file():
        raise DataFormatError(f"No {what} file {path}")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise DataFormatError(f"{path} is empty; expected a {what} file")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path} is not valid JSON: {e.msg} (line {e.lineno})") from None
        for i, obj in enumerate(items):
            if not isinstance(obj, dict):
                if log is None:
                    raise DataFormatError(f"{path}: item {i} is a JSON {type(obj).__name__}, expected an object")
                log.skip(f"record {i}", "malformed row", f"a JSON {type(obj).__name__}, not an object")
                continue
            yield i, obj
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if log is None:
                raise DataFormatError(f"{path} line {n} is not valid JSON ({e.msg}); the {what} loader reads JSONL, "
                                      f"one object per line") from None
            log.skip(f"line {n}", "invalid JSON", f"{e.msg}; the {what} loader reads JSONL, one object per line")
            continue
        if not isinstance(obj, dict):
            if log is None:
                raise DataFormatError(f"{path} line {n} is a JSON {type(obj).__name__}, expected an object")
            log.skip(f"line {n}", "malformed row", f"a JSON {type(obj).__name__}, not an object")
            continue
        yield n, obj


def first_field(obj: dict[str, Any], names: Sequence[str], where: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    raise DataFormatError(f"{where}: no field {' / '.join(repr(n) for n in names)}; its fields are {sorted(obj)}")


def text_of(value: Any, where: str) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return " ".join(v.strip() for v in value)
    if not isinstance(value, str):
        raise DataFormatError(f"{where} must be a string, got {type(value).__name__}")
    return value
