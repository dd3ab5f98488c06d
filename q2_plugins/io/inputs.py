"""Reading scoring inputs from JSONL, CSV or Parquet files (the CLI's job; the core API takes lists).

Reading never gives up on a file because of one record: a record that cannot be read becomes a row
``{"__error__": message}`` whose message names its line, and the other records are read.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import gzip
import itertools
import json
import sys
import zlib
from pathlib import Path
from typing import IO, Any, Iterator, Optional, Sequence

from q2_plugins.metric.errors import SettingError

__all__ = ["read_rows", "read_records", "read_checked_rows", "missing_fields", "input_columns", "count_records",
           "blank_lines", "named_settings", "InputFormatError", "MissingColumnsError", "UnknownFormatError",
           "MAX_RECORD_BYTES", "FORMATS", "suffixes", "format_suffix", "open_input", "INTERNAL_FIELDS", "own_names",
           "named_errors", "ReadError", "JsonConstant", "as_value"]

#: a JSONL record longer than this is an error row (it is not parsed)
MAX_RECORD_BYTES = 64 * 1024 * 1024
#: integers with more digits than this are kept as their digit string (Python refuses to convert longer ones)
MAX_INT_DIGITS = 1000
_BOM = b"\xef\xbb\xbf"
#: the names the readers and engines keep for themselves (the mark of an unreadable record, the Ray engine's record
#: columns): an input field named so is read as ``input_<name>`` (:func:`own_names`), never taken for one of them
INTERNAL_FIELDS = frozenset({"__error__", "__q2_record__", "__q2_read_error__", "__q2_row__"})


class InputFormatError(ValueError):
    """The input file cannot be read as asked; the message says what to change."""




class MissingColumnsError(InputFormatError, SettingError):
    """The input file lacks the columns that settings (``response_column``, ...) name; ``setting`` names them."""


class UnknownFormatError(InputFormatError, SettingError):
    """The file's extension does not say its format and the ``input_format`` setting is not set."""




#: the one table of file formats by file suffix: what every reader, writer and engine takes a path's format to be
FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".csv": "csv",
           ".tsv": "tsv"}


def suffixes(fmt: str) -> list[str]:
    """The suffixes of format ``fmt`` in :data:`FORMATS` (``jsonl``: ``.jsonl``, ``.json``, ``.ndjson``)."""
    return [suffix for suffix, kind in FORMATS.items() if kind == fmt]


def format_suffix(path: str | Path) -> str:
    """The suffix that names a file's format, lower case: ``.jsonl`` of ``rows.jsonl`` and of ``rows.jsonl.gz`` (a
    gzip-compressed file is read as the format it holds, :func:`open_input`)."""
    path = Path(path)
    suffix = path.suffix.lower()
    return Path(path.stem).suffix.lower() if suffix == ".gz" else suffix


_GZIP_MAGIC = b"\x1f\x8b"


def open_input(path: str | Path) -> IO[bytes]:
    """``path`` opened to read its bytes; a gzip-compressed file (told by its first two bytes, whatever its name)
    reads as the bytes it holds, so its rows, their positions and a resumed run are those of the plain file."""
    f = Path(path).open("rb")
    if f.peek(2)[:2] != _GZIP_MAGIC:
        return f
    unzipped = gzip.GzipFile(fileobj=f, mode="rb")
    unzipped.myfileobj = f  # (closed with it, as when GzipFile opens the file itself)
    return unzipped


def _check_gzip(path: Path) -> None:
    """Stop on a gzip file that cannot be read to its end (truncated or damaged), naming gzip, before any row."""
    with named_errors(path), open_input(path) as f:
        if isinstance(f, gzip.GzipFile):
            while f.read(1 << 20):
                pass


def _format_of(path: Path, fmt: Optional[str]) -> str:
    if fmt:
        return fmt
    kind = FORMATS.get(format_suffix(path))
    if kind in ("jsonl", "csv", "tsv"):
        return kind
    if kind == "parquet":
        raise UnknownFormatError("engine", f"{path} is a Parquet file, which the local engine does not read; set it "
                                           f"to ray (the ray extra), or convert the file to JSONL")
    raise UnknownFormatError("input_format", f"Cannot tell the format of {path} from its extension (.jsonl, .csv, "
                                             f".tsv, each also gzipped as .jsonl.gz, ...); set it to jsonl, csv or "
                                             f"tsv")


def _checked_path(path: str | Path) -> Path:
    path = Path(path)
    if path.is_dir():
        raise InputFormatError(f"{path} is a folder; name a JSONL, CSV or TSV file in it (the ray engine reads a "
                               f"folder of files)")
    if not path.is_file():
        raise InputFormatError(f"No input file {path}")
    return path


_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))
_HEAD_RECORDS = 100  # a file none of whose first records can be decoded is in another encoding, not a bad row


def _check_encoding(path: Path, kind: str) -> None:
    """Stop on a file in another encoding than UTF-8, naming it: UTF-16 / UTF-32 (by its byte-order mark or its
    zero bytes), or bytes that are not UTF-8 in every one of the first records (Windows-1252 / Latin-1 when they read
    as such). One record with a bad byte among good ones is that row's error, not the file's."""
    with open_input(path) as f:
        head = f.read(1 << 16)
        for bom, name in _BOMS:
            if head.startswith(bom):
                raise InputFormatError(f"{path} is {name} (has a {name} byte-order mark); save it as UTF-8")
        if len(head) >= 4 and max(head[0::2].count(0), head[1::2].count(0)) >= len(head) // 4:
            raise InputFormatError(f"{path} is UTF-16 (every other byte is zero); save it as UTF-8")
        f.seek(0)
        errors = []
        for _, row in itertools.islice(read_records(f, kind), _HEAD_RECORDS):
            error = row.get("__error__")
            if not (isinstance(error, str) and " is not valid UTF-8: " in error):
                return
            errors.append(error)
    if not errors:
        return
    first = errors[0].replace(" is not valid UTF-8: ", ": ", 1)
    try:
        head.decode("cp1252")
    except UnicodeDecodeError:
        raise InputFormatError(f"{path} is not UTF-8: its records cannot be decoded "
                               f"({first}); save it as UTF-8") from None
    raise InputFormatError(f"{path} is not UTF-8 but reads as Windows-1252 / Latin-1 ({first} is not UTF-8): save "
                           f"it as UTF-8, e.g. iconv -f cp1252 -t utf-8 {path} > utf8{path.suffix}") from None


def _big_int(digits: str) -> Any:
    return int(digits) if len(digits.lstrip("-")) <= MAX_INT_DIGITS else digits


def _not_utf8(line: int, raw: bytes, e: UnicodeDecodeError, start: int) -> str:
    """The one wording of a line that is not UTF-8 (``start``: the line's byte offset in the file)."""
    return f"line {line} is not valid UTF-8: byte {raw[e.start]:#04x} at byte offset {start + e.start} of the file"


def _jsonl_records(f: IO[bytes]) -> Iterator[tuple[int, Any, Optional[str]]]:
    """``(line number, parsed value, None)`` or ``(line number, None, error message)`` per non-blank line of a byte
    stream; lines end at ``\\n`` only (a ``\\r`` before it is dropped), a UTF-8 BOM at the start is skipped."""
    offset = 0
    for n in range(1, sys.maxsize):
        raw = f.readline(MAX_RECORD_BYTES + 1)
        if not raw:
            return
        start = offset
        offset += len(raw)
        if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the line without holding it
                raw = f.readline(1 << 20)
                offset += len(raw)
            yield n, None, f"line {n} is over {MAX_RECORD_BYTES} bytes; not read"
            continue
        if n == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM):]
            start += len(_BOM)
        raw = raw.rstrip(b"\n").rstrip(b"\r")
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield n, None, _not_utf8(n, raw, e, start)
            continue
        try:
            yield n, json.loads(text, strict=False, parse_int=_big_int, parse_constant=JsonConstant,
                                object_pairs_hook=_unique_keys), None
        except _DuplicateKey as e:
            yield n, None, f"line {n} has the key {str(e)[:100]!r} twice; which value is meant cannot be told"
        except json.JSONDecodeError as e:
            yield n, None, f"line {n} is not valid JSON: {e.msg} (column {e.colno})"
        except RecursionError:
            yield n, None, f"line {n} is JSON nested too deeply to read"
        except ValueError as e:  # e.g. a number Python cannot hold
            yield n, None, f"line {n} cannot be read: {' '.join(str(e).split())[:200]}"


def _csv_reader(f: IO[str], kind: str) -> Any:
    try:
        csv.field_size_limit(sys.maxsize)
    except OverflowError:  # pragma: no cover - platforms whose C long is 32 bits
        csv.field_size_limit(2**31 - 1)
    return csv.reader(f, delimiter="\t" if kind == "tsv" else ",")


def _csv_text(f: IO[bytes]) -> IO[str]:
    # utf-8-sig: a BOM before the header is not part of the first column's name; surrogateescape: an invalid byte
    # fails its own row (below), not the file
    import io

    return io.TextIOWrapper(f, encoding="utf-8-sig", errors="surrogateescape", newline="")


def _bad_byte(values: Sequence[str]) -> Optional[str]:
    for v in values:
        for c in v:
            if "\udc80" <= c <= "\udcff":
                return f"{ord(c) - 0xDC00:#04x}"
    return None


def _csv_records(f: IO[str], kind: str) -> Iterator[tuple[int, Any]]:
    """``(line number, dict or error message)`` per CSV record; the first record is the header."""
    reader = _csv_reader(f, kind)
    header: Optional[list[str]] = None
    while True:
        line = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield line, f"line {line} is not valid {kind.upper()}: {e}"
            continue
        if header is None:
            _check_header(values, kind)
            header = values
            continue
        if not values:
            continue
        bad = _bad_byte(values)
        if bad is not None:
            yield line, f"line {line} is not valid UTF-8: byte {bad}"
            continue
        if len(values) != len(header):  # too many or too few: which value is which column cannot be told
            yield line, f"line {line} has {len(values)} fields; the header names {len(header)}"
            continue
        yield line, dict(zip(header, values))


def _check_header(names: Sequence[str], kind: str) -> None:
    """A header that names one column twice cannot be read: which value a row means would be a guess."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if name in seen:
            raise InputFormatError(f"the {kind.upper()} header names column {name!r} twice (columns {seen[name]} and "
                                   f"{i}); rename one")
        seen[name] = i


def own_names(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every field named like one of :data:`INTERNAL_FIELDS` (without its leading ``input_``
    prefixes) renamed to ``input_<name>``, as :func:`q2_plugins.io.rows.kept_name` renames a result field's name: an
    input can never pass for an unreadable record or lose its fields."""
    if not any(isinstance(k, str) and k.endswith("__") for k in record):
        return record
    return {_own_name(k) if isinstance(k, str) else k: v for k, v in record.items()}


def _own_name(name: str) -> str:
    base = name
    while base.startswith("input_"):
        base = base[len("input_"):]
    return "input_" + name if base in INTERNAL_FIELDS else name


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s object hook: an object with one key twice is an error, never its last value."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _DuplicateKey(twice)
    return obj


class _DuplicateKey(ValueError):
    pass


class JsonConstant(str):
    """A JSON file's ``NaN``, ``Infinity`` or ``-Infinity`` (not JSON, but common in files): kept as its text in a
    field that is only carried along (an id), and a number where a text is scored (:func:`as_value`), refused there
    as ``3.5`` is."""


def as_value(value: Any) -> Any:
    """``value`` as the scorer is given it: a :class:`JsonConstant` as the number it is, in a list too (knowledge as
    a list of passages), anything else unchanged."""
    if isinstance(value, list):
        return [as_value(v) for v in value]
    return float(value) if isinstance(value, JsonConstant) else value


def input_columns(path: str | Path, fmt: Optional[str] = None) -> list[str]:
    """The column names of a CSV/TSV header, or every key that occurs in some record of a JSONL file."""
    path = _checked_path(path)
    kind = _format_of(path, fmt)
    if kind == "jsonl":
        found: dict[str, None] = {}
        with open_input(path) as raw:
            for _, obj, _ in _jsonl_records(raw):
                if isinstance(obj, dict):
                    found.update(dict.fromkeys(own_names(obj)))
        return list(found)
    with _csv_text(open_input(path)) as f:
        try:
            names = next(_csv_reader(f, kind))
        except (StopIteration, csv.Error):
            return []
    _check_header(names, kind)
    return list(own_names(dict.fromkeys(names)))


def read_rows(path: str | Path, fmt: Optional[str] = None, required: tuple[str, ...] = (),
              settings: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
    """One dict per record, in file order. A record that cannot be read is ``{"__error__": message}`` naming its
    line.

    Checked at once, before any record is returned: the file exists, its format is known and every ``required``
    column occurs (in the CSV header; in some record of a JSONL file), else :class:`InputFormatError` listing the
    columns found. ``settings`` names the setting that chose each required column (e.g. ``response_column``): a
    file that has columns, but not these, raises :class:`MissingColumnsError` naming the settings to change."""
    path = _checked_path(path)
    kind = _format_of(path, fmt)
    _check_gzip(path)
    _check_encoding(path, kind)
    if required:
        empty = _no_record(path, kind)
        if empty:
            raise InputFormatError(f"{path} {empty}; there is nothing to score")
        columns = input_columns(path, kind)
        missing = [c for c in required if c not in columns]
        if missing:
            shown = columns[:30] + (["..."] if len(columns) > 30 else [])
            message = f"{path} has no column(s) {missing}; its columns are {shown}."
            if not columns:  # the cause first: why the file shows no column at all
                raise InputFormatError(f"{path}: {_why_no_columns(path, kind)} So it has no column(s) {missing}; "
                                       f"its columns are [].")
            if settings is None:
                raise InputFormatError(f"{message} Name the right ones.")
            raise MissingColumnsError(named_settings(required, settings, missing), f"{message} Name the right ones.")
    return _rows(path, kind)


def named_settings(required: Sequence[str], settings: Sequence[str], missing: Sequence[str]) -> str:
    """The settings that chose the ``missing`` ones of the ``required`` columns (``settings``: one per required
    column, in its order), as a :class:`~q2_plugins.metric.errors.SettingError` names several: ``a / b``."""
    return " / ".join(dict.fromkeys(settings[list(required).index(c)] for c in missing))


def _no_record(path: Path, kind: str) -> Optional[str]:
    """What a file without a single record holds ("is empty", "holds only a header"), or None when it has one (a
    record that cannot be read is one: it becomes that row's error)."""
    with open_input(path) as f:
        if next(read_records(f, kind), None) is not None:
            return None
    with open_input(path) as f:
        header = kind != "jsonl" and bool(f.read(1 << 16).strip(b"\xef\xbb\xbf \t\r\n"))
    return f"holds only a {kind.upper()} header, no record" if header else "is empty (no record)"


def _why_no_columns(path: Path, kind: str) -> str:
    """Why a file shows no column: it holds no record, or none of its records could be read (the first one's error)."""
    with open_input(path) as f:
        first = next((row["__error__"] for _, row in read_records(f, kind) if "__error__" in row), None)
    return ("It holds no record to score." if first is None
            else f"None of its records could be read; the first: {first}.")


def _rows(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    with open_input(path) as f:
        for _, row in read_records(f, kind):
            yield row


class ReadError(dict):  # type: ignore[type-arg]
    """The row of a record that cannot be read: ``{"__error__": message}``, the message naming its line."""


def read_records(f: IO[bytes], kind: str, *, rename: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` per record of a JSONL / CSV / TSV byte stream, as :func:`read_rows` reads a file: a
    record that cannot be read is a :class:`ReadError` ``{"__error__": message}`` naming its line; blank lines are
    no records. An input field named like one of :data:`INTERNAL_FIELDS` is renamed (:func:`own_names`; not with
    ``rename=False``, which reads a file back as it was written)."""
    keep = own_names if rename else (lambda record: record)
    if kind == "jsonl":
        for n, obj, error in _jsonl_records(f):
            if error is not None:
                yield n, ReadError(__error__=error)
            elif not isinstance(obj, dict):
                yield n, ReadError(__error__=f"line {n} is a JSON {type(obj).__name__}, expected an object")
            else:
                yield n, keep(obj)
        return
    for n, row in _csv_records(_csv_text(f), kind):
        yield n, ReadError(__error__=row) if isinstance(row, str) else keep(row)


def count_records(path: str | Path, fmt: Optional[str] = None) -> Optional[int]:
    """How many rows :func:`read_rows` gives for ``path``, counted without parsing a JSON record (for a progress
    total); None when ``path`` is not a regular file (a pipe, say), which can be read only once."""
    path = Path(path)
    if not path.is_file():
        return None
    kind = _format_of(path, fmt)
    if kind == "jsonl":
        return _count_jsonl(path)
    n, header = 0, False
    with _csv_text(open_input(path)) as f:
        reader = _csv_reader(f, kind)
        while True:
            try:
                values = next(reader)
            except StopIteration:
                return n
            except csv.Error:  # an error row
                n += 1
                continue
            n += bool(values) and header
            header = True


def _count_jsonl(path: Path) -> int:
    """The lines of a JSONL file that are not blank (each is one row, read or not), in 1 MiB blocks."""
    n, content, first = 0, False, True
    with open_input(path) as f:
        while block := f.read(1 << 20):
            if first and block.startswith(_BOM):
                block = block[len(_BOM):]
            first = False
            lines = block.split(b"\n")
            for line in lines[:-1]:
                n += content or bool(line.strip())
                content = False
            content = content or bool(lines[-1].strip())
    return n + content


def missing_fields(row: dict[str, Any], required: Sequence[str]) -> Optional[str]:
    """The error of a record that lacks some ``required`` field (None when it has them all)."""
    missing = [c for c in required if c not in row]
    if not missing:
        return None
    return f"no field(s) {missing}; this record's fields are {sorted(map(str, row))[:20]}"


def blank_lines(path: str | Path, fmt: Optional[str] = None) -> list[int]:
    """The line numbers of the empty lines after the header of a CSV / TSV file: the lines :func:`read_rows` passes
    over (an empty line inside a quoted value is part of its record, not one of them); ``[]`` for JSONL."""
    path = _checked_path(path)
    kind = _format_of(path, fmt)
    if kind == "jsonl":
        return []
    found: list[int] = []
    with _csv_text(open_input(path)) as f:
        reader = _csv_reader(f, kind)
        header = False
        while True:
            line = reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                return found
            except csv.Error:  # read_rows reports it as that line's error row
                continue
            if header and not values:
                found.append(line)
            header = True


def read_checked_rows(path: str | Path, fmt: Optional[str] = None, fields: Sequence[tuple[str, Optional[str]]] = (),
                      *, error: type[InputFormatError] = InputFormatError,
                      missing_error: type[SettingError] = MissingColumnsError,
                      keep_bad_rows: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, row)`` of rows that all have the fields ``fields`` names, as (setting, column) pairs (a None
    column is not asked for): an unreadable row raises ``error``; a missing field raises ``missing_error`` naming
    the setting that chose it. ``keep_bad_rows``: an unreadable row comes as read (``{"__error__": why}``) and only
    the first readable row must have every field (a later one may lack one), for a caller that skips and counts
    bad rows."""
    asked = [(setting, column) for setting, column in fields if column]
    checked = False
    for n, row in enumerate(read_rows(path, fmt)):
        if "__error__" in row:
            if not keep_bad_rows:
                raise error(f"{path}: {row['__error__']}")
            yield n, row
            continue
        missing = [] if checked else [(setting, column) for setting, column in asked if column not in row]
        if missing:
            raise missing_error(" / ".join(dict.fromkeys(s for s, _ in missing)),
                                f"{path} row {n}: no field(s) {[c for _, c in missing]}; its fields are "
                                f"{sorted(row)}. Name the right ones.")
        checked = keep_bad_rows
        yield n, row


def _first_bad_line(path: Path) -> Optional[str]:
    """Where ``path`` first stops being UTF-8, in the words of the record readers ("line N is not valid UTF-8: byte
    0x.. at byte offset K of the file"); None when it cannot be read again or every line decodes (a line ends at
    ``\\n``, which no UTF-8 sequence holds, so lines decode one at a time)."""
    try:
        with open_input(path) as f:
            offset = 0
            for n, raw in enumerate(f, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return _not_utf8(n, raw, e, offset)
                offset += len(raw)
    except OSError:
        return None
    return None


@contextlib.contextmanager
def named_errors(path: str | Path) -> Iterator[None]:
    """An OS error (a full disk) or a codec error while ``path`` is read or written names it: the OS error gets
    ``path`` as its ``filename`` when it has none; a codec error becomes an :class:`InputFormatError` naming it
    (and, when reading, the line of the first byte that is not UTF-8)."""
    try:
        yield
    except UnicodeDecodeError as e:
        raise InputFormatError(f"{path} {_first_bad_line(Path(path)) or e}") from None
    except UnicodeError as e:
        raise InputFormatError(f"{path}: {e}") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:  # (a truncated or damaged .gz)
        raise InputFormatError(f"{path} is a damaged gzip file ({e}); gzip -t {path} checks it") from None
    except OSError as e:
        if not e.filename:
            e.filename = str(path)
        raise
