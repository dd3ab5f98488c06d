"""HalluDial (``--dataset halludial``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from q2_plugins.datasets.common import LabelOptions, RowLog, cell_text, first_field, json_objects, label_key, text_of
from q2_plugins.datasets.types import Example, MetaEvalData

#: the published benchmark its data is (``MetaEvalData.benchmark``)
BENCHMARK = "HalluDial"


def _halludial_example(n: int, obj: dict[str, Any], log: "RowLog") -> Optional[Example]:
    where = f"record {n}"
    target = cell_text(first_field(obj, ("target",), f"{log.path} {where}"))
    first = target.strip().split(maxsplit=1)[0].strip(".,:;!").lower() if target.strip() else ""
    verdict = {"yes": False, "no": True}.get(label_key(log.labels.mapped(first)))
    if verdict is None:
        log.unknown_label(where, target[:60])
        return None
    response = text_of(first_field(obj, ("response",), f"{log.path} {where}"), where)
    knowledge = text_of(first_field(obj, ("knowledge",), f"{log.path} {where}"), where)
    if not log.texts(where, response, knowledge):
        return None
    history = obj.get("dialogue_history")
    return Example(
        id=f"halludial:{n}", response=response, knowledge=knowledge, consistent=verdict,
        label="no hallucination" if verdict else "hallucination", subset=log.path.stem,
        dialogue=str(obj.get("dialogue_id")) if obj.get("dialogue_id") is not None else None,
        history=history if isinstance(history, str) and history else None)


def load_halludial(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """HalluDial (Luo et al. 2024): one JSON list (or JSONL) of turns with ``dialogue_id``, ``knowledge``,
    ``dialogue_history``, ``turn``, ``response`` and ``target``, whose first word says whether the response
    hallucinates (``Yes. ...`` inconsistent, ``No. ...`` consistent; the rest is the rationale).

    Ids are ``halludial:<position>``; the dialogue is ``dialogue_id``; the subset the file's stem (e.g.
    ``spontaneous_test``). Records whose target starts with neither (after ``labels.label_map``, applied to the
    first word), records with an empty response or knowledge and records without a field are left out and listed.
    """
    path = Path(path)
    log = RowLog(path, labels, ["Yes", "No"])
    examples = []
    pool: dict[str, list[str]] = {}
    for n, obj in json_objects(path, "HalluDial", log):
        ex = log.guarded(f"record {n}", _halludial_example, n, obj)
        if ex is None:
            continue
        examples.append(ex)
        if ex.dialogue is not None:
            pool.setdefault(ex.dialogue, []).append(ex.knowledge)
    log.check(examples)
    return MetaEvalData(name="halludial", source=str(path), examples=examples, skipped=log.skipped,
                        notes=log.notes(), benchmark=BENCHMARK,
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        label_scheme="target 'No' (no hallucination) = consistent; 'Yes' = inconsistent")
