"""DialFact-style JSONL (``--dataset dialfact``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from q2_plugins.datasets.common import (
    DataFormatError,
    LabelOptions,
    RowLog,
    cell_text,
    first_field,
    json_objects,
    label_key,
    text_of,
)
from q2_plugins.datasets.types import Example, MetaEvalData

DIALFACT_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")


def _evidence_text(item: Any, where: str) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, (list, tuple)):
        # DialFact: [page title, url, sentence, index]; a bare pair is [page title, sentence]
        position = 2 if len(item) >= 3 else len(item) - 1
        if position >= 0 and isinstance(item[position], str):
            return item[position]
    if isinstance(item, dict):
        for key in ("sentence", "text", "evidence"):
            if isinstance(item.get(key), str):
                return item[key]
    raise DataFormatError(f"{where}: an evidence item must be a string, a list [title, url, sentence, index] (or "
                          f"[title, sentence]), or an object with 'sentence' / 'text'; got {item!r:.80}")


def _dialfact_example(n: int, obj: dict[str, Any], log: "RowLog") -> Optional[Example]:
    where = f"{log.path} line {n}"
    raw = cell_text(first_field(obj, ("response_label", "label"), where))
    label = label_key(log.labels.mapped(raw)).upper()
    if label not in DIALFACT_LABELS:
        log.unknown_label(f"line {n}", raw)
        return None
    evidence = first_field(obj, ("evidence_list", "evidence"), where)
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list):
        raise DataFormatError(f"{where}: the evidence must be a list, got {type(evidence).__name__}")
    knowledge = " ".join(_evidence_text(item, where).strip() for item in evidence)
    context = obj.get("context")
    return Example(
        id=str(obj.get("id", f"dialfact:{n}")), response=text_of(first_field(obj, ("response",), where), where),
        knowledge=knowledge, consistent=label == "SUPPORTS", label=label, subset=label,
        history=text_of(context, where) if context else None,
        dialogue=str(obj["context_id"]) if obj.get("context_id") is not None else None)


def load_dialfact(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """DialFact-style JSONL: one object per line with ``response``, ``evidence_list`` (or ``evidence``: a list of
    sentences, or of DialFact's ``[title, url, sentence, index]`` lists, whose sentence is taken) and
    ``response_label`` (or ``label``): SUPPORTS (consistent), REFUTES or NOT ENOUGH INFO. ``context`` (list of
    turns) becomes the history, ``context_id`` the dialogue, ``id`` the example id. A line whose label is none of
    the three (after ``labels.label_map``), a line that is not JSON and a line without a field it needs are left out
    and listed in :attr:`MetaEvalData.skipped`."""
    path = Path(path)
    examples = []
    pool: dict[str, list[str]] = {}
    log = RowLog(path, labels, DIALFACT_LABELS)
    for n, obj in json_objects(path, "DialFact", log):
        ex = log.guarded(f"line {n}", _dialfact_example, n, obj)
        if ex is None:
            continue
        examples.append(ex)
        if ex.dialogue is not None and ex.knowledge.strip():
            pool.setdefault(ex.dialogue, []).append(ex.knowledge)
    log.check(examples)
    no_evidence = sum(not ex.knowledge.strip() for ex in examples)
    notes = ([f"{no_evidence} examples have no evidence text"] if no_evidence else []) + log.notes()
    return MetaEvalData(name="dialfact", source=str(path), examples=examples, notes=notes, skipped=log.skipped,
                        benchmark="DialFact",
                        label_scheme="SUPPORTS = consistent; REFUTES, NOT ENOUGH INFO = inconsistent",
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()})
