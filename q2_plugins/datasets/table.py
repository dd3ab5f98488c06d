"""Any CSV / TSV / JSONL table with response, knowledge and label columns (``--dataset table``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from q2_plugins.datasets.common import (
    DataFormatError,
    DataSettingError,
    LabelOptions,
    RowLog,
    blank_row,
    skip_blank_lines,
    text_of,
)
from q2_plugins.datasets.types import Example, MetaEvalData
from q2_plugins.io.columns import TextColumns
from q2_plugins.io.inputs import read_checked_rows


def _row_scores(row: Mapping[str, Any], score_columns: Sequence[str], where: str) -> dict[str, float]:
    """The metric scores stored in a row's ``score_columns`` (empty cells are missing scores)."""
    scores = {}
    for c in score_columns:
        value = row[c]
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        try:
            scores[c] = float(value)
        except (TypeError, ValueError):
            raise DataFormatError(f"{where}: score column {c!r} holds {value!r}, not a number") from None
    return scores


@dataclass(frozen=True, kw_only=True)
class TableColumns(TextColumns):
    """Where :func:`load_table` finds its fields besides the response and knowledge (:class:`TextColumns`), which
    label values mean consistent, and the file's format (None: from its suffix)."""

    consistent_labels: tuple[str, ...] = ()
    label_column: str = "label"
    id_column: Optional[str] = None
    subset_column: Optional[str] = None
    split_column: Optional[str] = None
    dialogue_column: Optional[str] = None
    history_column: Optional[str] = None
    score_columns: tuple[str, ...] = ()
    input_format: Optional[str] = None


def load_table(path: str | Path, *, table: TableColumns, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """Any CSV / TSV / JSONL file with response, knowledge and label columns, named by ``table``.

    ``table.consistent_labels`` are the label values (compared as stripped, lower-cased strings, after
    ``labels.label_map``) meaning consistent; every other value is inconsistent. Ids are the ``id_column`` values,
    else the row number (0-based), matching the ``row`` field that ``q2 score`` writes for the same file.
    ``score_columns`` are metric scores stored in the file itself (read as :attr:`Example.extra_scores`; empty cells
    are missing scores). Blank rows (empty cells, or an empty line of a CSV / TSV file, named by its line) and rows
    with an empty response, knowledge or label are left out and listed in :attr:`MetaEvalData.skipped`.
    """
    t = table
    consistent_labels, response_column, knowledge_column = t.consistent_labels, t.response_column, t.knowledge_column
    label_column, id_column, subset_column, split_column = t.label_column, t.id_column, t.subset_column, t.split_column
    dialogue_column, history_column, score_columns = t.dialogue_column, t.history_column, t.score_columns
    if not consistent_labels:
        raise DataSettingError("consistent_labels", "name the label values that mean consistent, e.g. 1 or "
                                                    "consistent,entailment (every other value is inconsistent)")
    positive = {str(v).strip().lower() for v in consistent_labels}
    fields = [("response_column", response_column), ("knowledge_column", knowledge_column),
              ("label_column", label_column), ("id_column", id_column), ("subset_column", subset_column),
              ("split_column", split_column), ("dialogue_column", dialogue_column),
              ("history_column", history_column), *(("score_columns", c) for c in score_columns)]
    examples = []
    if Path(path).is_file() and not Path(path).read_bytes()[:4096].strip():
        raise DataFormatError(f"{path} is empty")
    log = RowLog(Path(path), labels)
    for i, row in read_checked_rows(path, t.input_format, fields, error=DataFormatError,
                                    missing_error=DataSettingError):
        where = f"{path} row {i}"
        if blank_row(row):
            log.skip(f"row {i}", "blank row")
            continue
        label = str(labels.mapped(str(row[label_column] if row[label_column] is not None else ""))).strip()
        if not label:
            log.skip(f"row {i}", "empty label")
            continue
        if not log.texts(f"row {i}", text_of(row[response_column] or "", f"{where} {response_column}"),
                         text_of(row[knowledge_column] or "", f"{where} {knowledge_column}")):
            continue
        scores = _row_scores(row, score_columns, where)
        examples.append(Example(
            id=str(row[id_column]) if id_column else str(i),
            response=text_of(row[response_column], f"{where} {response_column}"),
            knowledge=text_of(row[knowledge_column], f"{where} {knowledge_column}"),
            consistent=label.lower() in positive, label=label,
            subset=str(row[subset_column]) if subset_column else "all",
            dialogue=str(row[dialogue_column]) if dialogue_column else None,
            history=text_of(row[history_column], where) if history_column and row[history_column] else None,
            split=str(row[split_column]).strip().lower() if split_column else None,
            extra_scores=scores,
        ))
    skip_blank_lines(log, path, t.input_format)
    log.check(examples)
    counts = Counter(ex.label for ex in examples)
    if all(ex.consistent for ex in examples) or not any(ex.consistent for ex in examples):
        raise DataSettingError("consistent_labels", f"{path}: with {sorted(positive)} every row is in one class; "
                                                    f"the labels in {label_column!r} are {dict(counts)}")
    pool: dict[str, list[str]] = {}
    for ex in examples:
        if ex.dialogue is not None:
            pool.setdefault(ex.dialogue, []).append(ex.knowledge)
    return MetaEvalData(
        name=Path(path).stem, source=str(path), examples=examples, skipped=log.skipped, notes=log.notes(),
        label_scheme=f"{label_column} in {sorted(positive)} = consistent; other values inconsistent",
        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
    )
