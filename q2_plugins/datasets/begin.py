"""BEGIN, v1 and v2 releases (``--dataset begin``)."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from q2_plugins.datasets.common import DataFormatError, LabelOptions, RowLog, blank_row, csv_lines, label_key
from q2_plugins.datasets.types import Example, MetaEvalData

BEGIN_LABELS = ("entailment", "hallucination", "generic", "off-topic", "contradiction")
_BEGIN_COLUMNS = ("evidence", "response", "gold label")
_BEGIN2_COLUMNS = ("knowledge", "response", "begin_label")
BEGIN2_LABELS = ("Fully attributable", "Not fully attributable", "Generic")


def load_begin(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """BEGIN, either release, told apart by the columns.

    * v1 TSV (``evidence``, ``previous turn``, ``response``, ``gold label``, ...): binary view as in TRUE,
      ``entailment`` is consistent, the other four labels are not. The five-way label is kept in
      :attr:`Example.label` and is the subset, so the per-subset table shows the mean score per BEGIN label.
    * v2 TSV (``model_name``, ``data_source``, ``knowledge``, ``message``, ``response``, ``begin_label``):
      ``Fully attributable`` is consistent, ``Not fully attributable`` and ``Generic`` are not; the label is the
      subset, ``message`` the history.

    Labels are read case-insensitively; blank rows, rows with an empty response or knowledge and rows with a label
    the release does not have (after ``labels.label_map``) are left out and listed in
    :attr:`MetaEvalData.skipped`. Ids are ``begin:<data row index>``, blank rows counted.
    """
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"No BEGIN file {path}")
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f, delimiter="\t"), [])
    v2 = all(c in header for c in _BEGIN2_COLUMNS)
    what = "BEGIN v2 TSV" if v2 else "BEGIN (v1 TSV, or v2 TSV with knowledge / response / begin_label)"
    _, rows = csv_lines(path, _BEGIN2_COLUMNS if v2 else _BEGIN_COLUMNS, what, delimiter="\t")
    known = {k.lower(): k for k in (BEGIN2_LABELS if v2 else BEGIN_LABELS)}
    label_column, knowledge_column, history_column = (("begin_label", "knowledge", "message") if v2 else
                                                      ("gold label", "evidence", "previous turn"))
    log = RowLog(path, labels, list(known.values()))
    examples = []
    for i, (line, r) in enumerate(rows):
        where = f"line {line}"
        if r is None or blank_row(r):
            log.skip(where, "blank row")
            continue
        label = known.get(label_key(labels.mapped(r[label_column])))
        if label is None:
            log.unknown_label(where, r[label_column])
            continue
        if not log.texts(where, r["response"], r[knowledge_column]):
            continue
        examples.append(Example(
            id=f"begin:{i}", response=r["response"], knowledge=r[knowledge_column],
            consistent=label in ("entailment", "Fully attributable"), label=label, subset=label,
            history=r.get(history_column) or None))
    log.check(examples)
    if v2:
        systems = Counter(r.get("model_name") or "?" for _, r in rows if r is not None and not blank_row(r))
        return MetaEvalData(name="begin-v2", source=str(path), examples=examples, skipped=log.skipped,
                            benchmark="BEGIN v2",
                            notes=[f"responses by system: {dict(systems)}"] + log.notes(),
                            label_scheme="BEGIN v2 label: Fully attributable = consistent; Not fully attributable, "
                                         "Generic = inconsistent")
    return MetaEvalData(name="begin", source=str(path), examples=examples, skipped=log.skipped, notes=log.notes(),
                        benchmark="BEGIN",
                        label_scheme="BEGIN gold label: entailment = consistent; hallucination, generic, off-topic, "
                                     "contradiction = inconsistent")
