"""The Ray engine's staged rows: each scored block committed, as it finishes, to the folder ``OUTPUT.partial/`` beside
the output (one Arrow file per block, exact types), and the result files written from those blocks once every row is
scored, in each output's format (one file, or a folder of part files), filter mode split there. A stopped run keeps
its committed blocks and ``--resume`` scores only the rest (:mod:`q2_plugins.jobs.partial`).

The writers here (:func:`union_schema`, :func:`conformed`, :class:`RowWriter`) are also those of
:func:`q2_plugins.jobs.ray.dataset.write_dataset`: one serialised form whichever way the rows come.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

from q2_plugins.io.inputs import named_errors, suffixes
from q2_plugins.io.outputs import json_line, open_new, open_own, open_own_folder, partial_path, replace_own
from q2_plugins.metric.results import EXPLANATION_FIELDS

__all__ = ["Staging", "StagedOutput", "write_staged", "retire_old_parts", "commit_staged", "union_schema", "conformed",
           "RowWriter", "as_text", "nested_row", "select_by_score", "discard", "BLOCK_NAME", "PART_ROWS"]

#: a committed block of ``OUTPUT.partial/`` (its place in the run, from 0); written as ``NAME.tmp``, then renamed
BLOCK_NAME = "block-{:06d}.arrow"
#: rows of one part file of a folder output (consecutive blocks; the last part holds the rest)
PART_ROWS = 100_000
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


# -- the rows as files --------------------------------------------------------------------------------------------
def as_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as JSON (lone surrogates kept escaped)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # a lone surrogate (a JSON escape like "\\ud800"): keep it escaped
        return json.dumps(value, ensure_ascii=True)


def nested_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row for JSONL: its explanation columns (JSON text in Arrow) as the values they hold."""
    for name in EXPLANATION_FIELDS:
        if isinstance(row.get(name), str):
            row[name] = json.loads(row[name])
    return row


def union_schema(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """Every column of every block, in order of first appearance; a column with values of several types is text."""
    types: dict[str, list[pa.DataType]] = {}
    for schema in schemas:
        for field in schema:
            seen = types.setdefault(field.name, [])
            if field.type != pa.null() and field.type not in seen:
                seen.append(field.type)
    return pa.schema([(n, t[0] if len(t) == 1 else pa.null() if not t else pa.string()) for n, t in types.items()])


def conformed(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """``batch`` with the columns of ``schema``: nulls where it has none, text where its type is another."""
    columns = []
    for field in schema:
        if field.name not in batch.column_names:
            columns.append(pa.nulls(batch.num_rows, field.type))
            continue
        column = batch.column(field.name).combine_chunks()
        if column.type != field.type:
            column = pa.array([None if v is None else as_text(v) for v in column.to_pylist()], field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


class RowWriter:
    """Rows into one open file of format ``kind`` (JSONL, Parquet, CSV or TSV) with the columns of ``schema`` (the
    union of every block's): Parquet conformed to it, CSV / TSV with it as header (lists and dicts as JSON), JSONL
    with the explanations nested, as the local engine writes them. Closing it closes the file (flushed to disk)."""

    def __init__(self, fd: int, kind: str, schema: pa.Schema) -> None:
        self.kind, self.schema, self.rows = kind, schema, 0
        self._f = os.fdopen(fd, "wb") if kind == "parquet" else os.fdopen(fd, "w", encoding="utf-8", newline="")
        self._parquet: Any = None
        self._csv: Optional[csv.DictWriter] = None
        if kind == "parquet":
            import pyarrow.parquet as pq

            self._parquet = pq.ParquetWriter(self._f, schema)
        elif kind != "jsonl":
            self._csv = csv.DictWriter(self._f, fieldnames=schema.names, delimiter="\t" if kind == "tsv" else ",")
            self._csv.writeheader()

    def write(self, batch: pa.Table) -> None:
        self.rows += batch.num_rows
        if self._parquet is not None:
            self._parquet.write_table(conformed(batch, self.schema))
        elif self._csv is not None:
            self._csv.writerows({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in r.items()}
                                for r in batch.to_pylist())
        else:
            self._f.writelines(json_line(nested_row(r)) + "\n" for r in batch.to_pylist())

    def close(self) -> None:
        try:
            if self._parquet is not None:
                self._parquet.close()
            self._f.flush()
            os.fsync(self._f.fileno())
        finally:
            self._f.close()


def select_by_score(batch: pa.Table, min_score: float, keep_unscored: bool, kept: bool, prefix: str = "") -> pa.Table:
    """The rows of ``batch`` filter mode keeps (``kept``: ``score >= min_score``, and unscored rows with
    ``keep_unscored``), or the others: every row is on exactly one side."""
    mask = pc.fill_null(pc.greater_equal(batch.column(prefix + "score"), min_score), keep_unscored)
    return batch.filter(mask if kept else pc.invert(mask))


# -- the staging folder -------------------------------------------------------------------------------------------
class Staging:
    """The folder ``path`` (``OUTPUT.partial/``, mode 0700: :func:`~q2_plugins.io.outputs.open_own_folder` refuses a
    link or another user's folder there) holding a run's committed blocks, each an Arrow file written under a
    temporary name and renamed, so a block file present is complete. Every file is reached through the open folder,
    never through a link."""

    def __init__(self, path: str | Path, setting: str = "output") -> None:
        self.path, self.setting = Path(path), setting
        self.fd = open_own_folder(self.path, setting=setting)
        self.blocks: list[int] = []  # rows of each committed block, in order

    @property
    def rows(self) -> int:
        return sum(self.blocks)

    def committed(self, on_block: Optional[Callable[[pa.Table], None]] = None) -> int:
        """Count the complete blocks a stopped run left (from the first, in order, up to the first one missing,
        unreadable or whose rows are not the next positions of the input) and return their rows; ``on_block`` gets
        each one. The blocks after them are not counted (:meth:`keep` removes them)."""
        self.blocks = []
        while True:
            try:
                table = self._read(BLOCK_NAME.format(len(self.blocks)))
            except (OSError, pa.ArrowException):
                return self.rows
            rows = table.column("row") if "row" in table.column_names else None
            if rows is not None and rows.null_count == 0 and rows.to_pylist() != list(
                    range(self.rows, self.rows + table.num_rows)):
                return self.rows
            if on_block is not None:
                on_block(table)
            self.blocks.append(table.num_rows)

    def keep(self, on_block: Optional[Callable[[pa.Table], None]] = None) -> int:
        """:meth:`committed`, and every other file of the folder removed (what a resume continues after)."""
        n = self.committed(on_block)
        self._remove(lambda name: name not in {BLOCK_NAME.format(i) for i in range(len(self.blocks))})
        return n

    def clear(self) -> None:
        """Begin again: every file of the folder removed."""
        self.blocks = []
        self._remove(lambda name: True)

    def add(self, table: pa.Table) -> None:
        """Commit one finished block: on disk, complete, before the next one is taken."""
        name = BLOCK_NAME.format(len(self.blocks))
        tmp = self.path / f"{name}.tmp"
        with named_errors(tmp):
            with os.fdopen(open_new(tmp, setting=self.setting, dir_fd=self.fd), "wb") as f:
                with pa.ipc.new_file(f, table.schema) as writer:
                    writer.write_table(table)
                f.flush()
                os.fsync(f.fileno())
            replace_own(tmp, self.path / name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        self.blocks.append(table.num_rows)

    def tables(self) -> Iterator[pa.Table]:
        """The committed blocks, in order."""
        for i in range(len(self.blocks)):
            yield self._read(BLOCK_NAME.format(i))

    def schema(self) -> pa.Schema:
        """The union of the committed blocks' columns (:func:`union_schema`), read from the files' schemas."""
        return union_schema(self._read(BLOCK_NAME.format(i), schema=True) for i in range(len(self.blocks)))

    def remove(self) -> None:
        """The run is complete: its files and the folder removed (the folder is left if something else is in it)."""
        self._remove(lambda name: True)
        self.close()
        try:
            os.rmdir(self.path)
        except OSError:
            pass

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None  # type: ignore[assignment]

    def _read(self, name: str, schema: bool = False) -> Any:
        with named_errors(self.path / name):
            with os.fdopen(os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=self.fd), "rb") as f:
                reader = pa.ipc.open_file(pa.py_buffer(f.read()))
        return reader.schema if schema else reader.read_all()

    def _remove(self, which: Callable[[str], bool]) -> None:
        import stat

        for name in os.listdir(self.fd):
            if which(name) and not stat.S_ISDIR(os.lstat(name, dir_fd=self.fd).st_mode):
                os.unlink(name, dir_fd=self.fd)


def discard(path: str | Path, setting: str = "output") -> None:
    """Remove what a stopped run left at ``OUTPUT.partial`` before a run begins again: the file of a JSONL output's
    rows, or the folder of staged blocks (a link or another user's file or folder there is refused)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        Staging(path, setting).remove()
    elif path.exists() or path.is_symlink():
        os.close(open_own(path, setting=setting))  # (refuses what is not ours to remove)
        path.unlink()


# -- the result files, written from the staged blocks -------------------------------------------------------------
@dataclass
class StagedOutput:
    """One result of a staged run: ``path`` (a file, or with ``folder`` a folder of part files) in format ``kind``;
    ``kept``: all rows (None), or filter mode's kept (True) or dropped (False) rows; ``setting`` names it. Filled in by
    :func:`write_staged`: the temporaries written (each renamed to its place by :func:`commit_staged`) and the rows."""

    path: Path
    kind: str
    folder: bool = False
    kept: Optional[bool] = None
    setting: str = "output"
    rows: int = 0
    pending: tuple[tuple[Path, Path, Optional[int]], ...] = ()  # (temporary, target, folder fd of the temporary)


def write_staged(staging: Staging, outputs: list[StagedOutput], min_score: Optional[float] = None,
                 keep_unscored: bool = False) -> None:
    """Write each output's rows from the committed blocks (in their order) to temporaries beside it, complete on
    disk; nothing is in place until :func:`commit_staged`. Filter mode (``min_score``) splits each block there."""
    schema = staging.schema()
    for out in outputs:
        def rows(out: StagedOutput = out) -> Iterator[pa.Table]:
            for table in staging.tables():
                yield table if out.kept is None else select_by_score(table, min_score, keep_unscored, out.kept)

        out.rows, out.pending = (_write_parts if out.folder else _write_file)(staging, out, rows(), schema)


def _write_file(staging: Staging, out: StagedOutput, tables: Iterator[pa.Table],
                schema: pa.Schema) -> tuple[int, tuple[tuple[Path, Path, Optional[int]], ...]]:
    """One result file: through a temporary in the staging folder when it is the run's output (beside it), else
    through ``FILE.partial`` (filter mode's dropped rows)."""
    ours = partial_path(out.path) == staging.path
    tmp, fd = (staging.path / out.path.name, staging.fd) if ours else (partial_path(out.path), None)
    with named_errors(tmp):
        writer = RowWriter(open_new(tmp, setting=out.setting, dir_fd=fd) if ours else
                           open_own(tmp, setting=out.setting), out.kind, schema)
        try:
            for table in tables:
                writer.write(table)
        finally:
            writer.close()
    return writer.rows, ((tmp, out.path, fd),)


def _write_parts(staging: Staging, out: StagedOutput, tables: Iterator[pa.Table],
                 schema: pa.Schema) -> tuple[int, tuple[tuple[Path, Path, Optional[int]], ...]]:
    """A folder of part files (``part-00000.parquet``, ... of about :data:`PART_ROWS` rows each, at least one),
    each through a hidden temporary in the folder."""
    out.path.mkdir(parents=True, exist_ok=True)
    suffix, pending, rows = suffixes(out.kind)[0], [], 0
    writer: Optional[RowWriter] = None
    try:
        for table in tables:
            if writer is None or writer.rows >= PART_ROWS:
                rows += _closed(writer)
                writer = _part(out, suffix, schema, pending)
            writer.write(table)
        if writer is None:  # (no row: one part with the columns alone)
            writer = _part(out, suffix, schema, pending)
    finally:
        rows += _closed(writer)
    return rows, tuple(pending)


def _part(out: StagedOutput, suffix: str, schema: pa.Schema, pending: list) -> RowWriter:
    name = f"part-{len(pending):05d}{suffix}"
    tmp = out.path / f".{name}.tmp"
    pending.append((tmp, out.path / name, None))
    with named_errors(tmp):
        return RowWriter(open_new(tmp, setting=out.setting), out.kind, schema)


def _closed(writer: Optional[RowWriter]) -> int:
    if writer is None:
        return 0
    writer.close()
    return writer.rows


def retire_old_parts(outputs: list[StagedOutput]) -> None:
    """Before the sidecars are written: the part files of an earlier run in each folder output removed (this run's
    are still at their temporary names), so a run killed before :func:`commit_staged` leaves no new sidecar beside
    old rows."""
    for out in outputs:
        if out.folder and out.pending:
            _remove_parts(out)


def commit_staged(staging: Staging, outputs: list[StagedOutput]) -> None:
    """Put each output's temporaries in place (a folder: the part files of an earlier run beyond this run's last
    removed, and their temporaries a stopped run left), then remove the staging folder: the run is complete."""
    for out in outputs:
        for tmp, target, fd in out.pending:
            with named_errors(target):
                replace_own(tmp, target, src_dir_fd=fd)
        if out.folder:
            _remove_parts(out, keep={target.name for _, target, _ in out.pending}, temporaries=True)
    staging.remove()


def _remove_parts(out: StagedOutput, *, keep: Collection[str] = (), temporaries: bool = False) -> None:
    """The part files in a folder output that are not ``keep`` removed (a link there: the link, never its target);
    ``temporaries``: also the ``.part-NNNNN.EXT.tmp`` files a stopped run left."""
    name = r"part-\d{5}" + re.escape(out.pending[0][1].suffix)
    pattern = re.compile(r"\.?" + name + r"(\.tmp)?$" if temporaries else name + "$")
    for old in out.path.iterdir():
        if pattern.match(old.name) and old.name not in keep and (old.is_file() or old.is_symlink()):
            old.unlink()
