"""Dialogue NLI-style data (``--dataset dnli``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from q2_plugins.datasets.common import LabelOptions, RowLog, cell_text, first_field, json_objects, label_key, text_of
from q2_plugins.datasets.types import Example, MetaEvalData

_DNLI_LABELS = {"entailment": "entailment", "positive": "entailment", "neutral": "neutral",
                "contradiction": "contradiction", "negative": "contradiction"}


def _dnli_example(n: int, obj: dict[str, Any], log: "RowLog") -> Optional[Example]:
    where = f"{log.path} record {n}"
    raw = cell_text(first_field(obj, ("label", "gold_label"), where))
    label = _DNLI_LABELS.get(label_key(log.labels.mapped(raw)))
    if label is None:
        log.unknown_label(f"record {n}", raw)
        return None
    return Example(
        id=str(obj.get("id", f"dnli:{n}")),
        response=text_of(first_field(obj, ("hypothesis", "sentence2"), where), where),
        knowledge=text_of(first_field(obj, ("premise", "sentence1"), where), where),
        consistent=label == "entailment", label=label, subset=label,
        dialogue=str(obj["dialogue_id"]) if "dialogue_id" in obj else None)


def load_dnli(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """Dialogue NLI-style data: JSONL (or a JSON list) of objects with ``premise`` / ``sentence1`` (the knowledge),
    ``hypothesis`` / ``sentence2`` (the response) and ``label`` / ``gold_label``: entailment (or positive) is
    consistent, neutral and contradiction (or negative) are not. A record with another label (after
    ``labels.label_map``), that is not JSON or lacks a field is left out and listed in
    :attr:`MetaEvalData.skipped`."""
    path = Path(path)
    examples = []
    log = RowLog(path, labels, sorted(_DNLI_LABELS))
    for n, obj in json_objects(path, "Dialogue NLI", log):
        ex = log.guarded(f"record {n}", _dnli_example, n, obj)
        if ex is not None:
            examples.append(ex)
    log.check(examples)
    return MetaEvalData(name="dnli", source=str(path), examples=examples, experiments=("dnli",),
                        skipped=log.skipped, notes=log.notes(),
                        label_scheme="entailment / positive = consistent; neutral, contradiction / negative = "
                                     "inconsistent")
