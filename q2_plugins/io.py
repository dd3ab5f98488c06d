"""Reading scoring inputs from JSONL or CSV files (the CLI's job; the core API takes lists)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

__all__ = ["read_rows", "read_checked_rows", "InputFormatError"]


class InputFormatError(ValueError):
    """The input file cannot be read as asked; the message says what to change."""


def _format_of(path: Path, fmt: Optional[str]) -> str:
    if fmt:
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    raise InputFormatError(f"Cannot tell the format of {path} from its extension; pass --input-format jsonl|csv|tsv")


def read_rows(path: str | Path, fmt: Optional[str] = None, required: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Yield one dict per row. A JSONL line that is not an object yields ``{"__error__": message}``."""
    path = Path(path)
    if not path.is_file():
        raise InputFormatError(f"No input file {path}")
    kind = _format_of(path, fmt)
    if kind == "jsonl":
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    yield {"__error__": f"line {n} is not valid JSON: {e.msg}"}
                    continue
                if not isinstance(obj, dict):
                    yield {"__error__": f"line {n} is a JSON {type(obj).__name__}, expected an object"}
                    continue
                yield obj
        return
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t" if kind == "tsv" else ",")
        columns = reader.fieldnames or []
        missing = [c for c in required if c not in columns]
        if missing:
            raise InputFormatError(
                f"{path} has no column(s) {missing}; its columns are {columns}. "
                f"Name the right ones with --response-column / --knowledge-column / --history-column."
            )
        yield from reader


def read_checked_rows(path: str | Path, fmt: Optional[str] = None, required: Sequence[str] = (), *, hint: str = "",
                      error: type[InputFormatError] = InputFormatError) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, row)`` of rows that all have the ``required`` fields: an unreadable row or a missing field
    raises ``error``, whose message ends with ``hint`` (which options name the fields)."""
    for n, row in enumerate(read_rows(path, fmt)):
        if "__error__" in row:
            raise error(f"{path}: {row['__error__']}")
        missing = [c for c in required if c not in row]
        if missing:
            raise error(f"{path} row {n}: no field(s) {missing}; its fields are {sorted(row)}. {hint}")
        yield n, row
