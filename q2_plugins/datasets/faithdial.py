"""FaithDial's data audit (``--dataset faithdial``)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional

from q2_plugins.datasets.common import DataFormatError, LabelOptions, RowLog, blank_row, csv_lines, label_key
from q2_plugins.datasets.types import Example, MetaEvalData

_FAITHDIAL_COLUMNS = ("knowledge", "begin_label")
_FAITHDIAL_GOLD_COLUMNS = ("evidence", "response", "BEGIN")
_FAITHDIAL_NOT_RESPONSE = {"knowledge", "history", "begin_label", "vrm_label"}
# the label a multi-label cell counts as in BEGIN's five-way taxonomy: the first of these it holds
_FAITHDIAL_PRIMARY = (("contradiction", "contradiction"), ("hallucination", "hallucination"),
                      ("partial hallucination", "hallucination"), ("off-topic", "off-topic"), ("generic", "generic"),
                      ("entailment", "entailment"), ("uncooperative", "entailment"))
_FAITHDIAL_LABELS = {name for name, _ in _FAITHDIAL_PRIMARY}


def _faithdial_layout(path: Path) -> tuple[list[str], list, str, str, str]:
    """Columns, rows, and the response, knowledge and label columns of either FaithDial audit layout."""
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    if all(c in header for c in _FAITHDIAL_GOLD_COLUMNS):
        columns, rows = csv_lines(path, _FAITHDIAL_GOLD_COLUMNS, "FaithDial gold audit CSV")
        return columns, rows, "response", "evidence", "BEGIN"
    columns, rows = csv_lines(path, _FAITHDIAL_COLUMNS, "FaithDial audit CSV (knowledge, history, <system>, "
                                                         "begin_label, vrm_label; or the gold files' evidence, "
                                                         "history, response, BEGIN, VRM)")
    candidates = [c for c in ("response", "model response") if c in columns] or \
        [c for c in columns if c not in _FAITHDIAL_NOT_RESPONSE and c]
    if len(candidates) != 1:
        raise DataFormatError(f"{path}: cannot tell the response column of a FaithDial audit file: expected "
                              f"'response', 'model response' or one system column besides "
                              f"{sorted(_FAITHDIAL_NOT_RESPONSE)}, found {columns}")
    return columns, rows, candidates[0], "knowledge", "begin_label"


def _faithdial_labels(cell: str, labels: LabelOptions) -> Optional[list[str]]:
    """The labels of a ``begin_label`` / ``BEGIN`` cell (lower-cased, each through the label map), or None when one
    is unknown or none is a BEGIN label."""
    cell = labels.mapped(cell)
    found = [label_key(labels.mapped(x)) for x in cell.split(",") if x.strip()]
    found = [y for x in found for y in x.split(",") if y]  # a label mapped to a multi-label value
    if not found or any(x not in _FAITHDIAL_LABELS for x in found):
        return None
    return found


def load_faithdial(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """FaithDial's data-audit CSVs, in either published layout.

    * the model audits (``CTRL/``, ``GPT2/``, ``DoHA/``): ``knowledge``, ``history``, the response column
      (``response`` or ``model response`` or, as in the released files, the one column named after the system:
      ``ctrl``, ``gpt2``, ``doha``), ``begin_label``, ``vrm_label``;
    * the gold audits (``gold/``): ``evidence``, ``history``, ``response``, ``BEGIN``, ``VRM``.

    Labels are read case-insensitively (``Partial Hallucination``). A label cell may hold several
    (``entailment,uncooperative``): the response is consistent when it holds ``entailment`` (or, as in the gold
    files, ``uncooperative`` alone: faithful but not cooperative) and none of hallucination, partial hallucination,
    off-topic, generic or contradiction. :attr:`Example.label` is the cell's BEGIN five-way label (the first of
    contradiction, hallucination, off-topic, generic, entailment it holds; partial hallucination counts as
    hallucination, uncooperative as entailment), the subset is the whole cell. Blank rows, rows with an empty
    response or knowledge and rows with a label outside this set (after ``labels.label_map``, applied to the cell
    and to each of its labels) are left out and listed in :attr:`MetaEvalData.skipped` with their line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"No FaithDial audit file {path}")
    _, rows, response_column, knowledge_column, label_column = _faithdial_layout(path)
    log = RowLog(path, labels, [name for name, _ in _FAITHDIAL_PRIMARY])
    examples = []
    for i, (line, r) in enumerate(rows):
        where = f"line {line}"
        if r is None or blank_row(r):
            log.skip(where, "blank row")
            continue
        found = _faithdial_labels(r[label_column] or "", labels)
        if found is None:
            log.unknown_label(where, r[label_column])
            continue
        if not log.texts(where, r[response_column] or "", r[knowledge_column] or ""):
            continue
        primary = next(begin for name, begin in _FAITHDIAL_PRIMARY if name in found)
        examples.append(Example(
            id=f"faithdial:{i}", response=r[response_column], knowledge=r[knowledge_column],
            consistent=primary == "entailment", label=primary, subset=",".join(found),
            history=r.get("history") or None,
        ))
    log.check(examples)
    gold = label_column == "BEGIN"
    return MetaEvalData(name="faithdial-gold" if gold else f"faithdial-{response_column}", source=str(path),
                        examples=examples, skipped=log.skipped, notes=log.notes(),
                        label_scheme=f"{label_column} holds entailment" + (" (or uncooperative alone)" if gold else "")
                        + " and no hallucination / partial hallucination / off-topic / generic / contradiction = "
                          "consistent; the rest inconsistent")
