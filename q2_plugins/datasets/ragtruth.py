"""RAGTruth at the response level (``--dataset ragtruth``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from q2_plugins.datasets.common import DataFormatError, LabelOptions, RowLog, first_field, json_objects
from q2_plugins.datasets.types import Example, MetaEvalData

#: the published benchmark its data is (``MetaEvalData.benchmark``)
BENCHMARK = "RAGTruth"



def _ragtruth_knowledge(info: Any) -> tuple[str, Optional[str]]:
    """The knowledge and history of a RAGTruth ``source_info``: a summary's article; a QA item's passages (its
    question the history); a data-to-text item's record as JSON."""
    if isinstance(info, str):
        return info, None
    if isinstance(info, dict) and isinstance(info.get("passages"), str):
        question = info.get("question")
        return info["passages"], question if isinstance(question, str) else None
    return json.dumps(info, ensure_ascii=False, sort_keys=True), None


def _label_spans(labels: list, length: int) -> Optional[tuple[tuple[int, int], ...]]:
    """The characters of a response's hallucinated spans (``start`` / ``end`` of each label, within the response);
    None when a label has no usable offsets (the response then counts at the example level only)."""
    out = []
    for label in labels:
        start, end = (label.get("start"), label.get("end")) if isinstance(label, dict) else (None, None)
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start < end <= length:
            return None
        out.append((start, end))
    return tuple(sorted(out))


def load_ragtruth(path: str | Path) -> MetaEvalData:
    """RAGTruth (Niu et al. 2024) at the response level: ``path`` is the folder holding its ``response.jsonl``
    (``id``, ``source_id``, ``model``, ``labels``: the hallucinated spans, ``split``: train / test, ``quality``,
    ``response``) and ``source_info.jsonl`` (``source_id``, ``task_type``, ``source_info``).

    A response is consistent when it has no hallucinated span. The knowledge is the source (a QA item's passages,
    its question as history; a data-to-text record as JSON); the subset is the task type; the ``train`` split is
    the dev split the ``benchmark`` and ``spans`` experiments tune thresholds on. The labels' ``start`` / ``end``
    are the response's hallucinated characters (:attr:`Example.spans`), as RAGTruth's span-level task reads them.
    Responses whose ``labels`` is not a list or whose source is missing are left out and listed (RAGTruth's labels
    are spans, not values: no label map).
    """
    folder = Path(path)
    if not (folder / "response.jsonl").is_file() or not (folder / "source_info.jsonl").is_file():
        raise DataFormatError(f"The ragtruth loader reads the RAGTruth folder holding response.jsonl and "
                              f"source_info.jsonl; {folder} does not hold both")
    sources: dict[str, dict[str, Any]] = {}
    for n, obj in json_objects(folder / "source_info.jsonl", "RAGTruth source_info"):
        sources[str(first_field(obj, ("source_id",), f"source_info.jsonl line {n}"))] = obj
    log = RowLog(folder / "response.jsonl", LabelOptions())
    examples = []
    quality: Counter = Counter()
    for n, obj in json_objects(folder / "response.jsonl", "RAGTruth response", log):
        where = f"line {n}"
        spans, source = obj.get("labels"), sources.get(str(obj.get("source_id")))
        if not isinstance(spans, list):
            log.skip(where, "malformed labels", repr(spans)[:60])
            continue
        if source is None:
            log.skip(where, "unknown source_id", str(obj.get("source_id")))
            continue
        knowledge, history = _ragtruth_knowledge(source.get("source_info"))
        if not log.texts(where, str(obj.get("response") or ""), knowledge):
            continue
        split = str(obj.get("split", "")).strip().lower()
        quality[str(obj.get("quality", "good"))] += 1
        examples.append(Example(
            id=f"ragtruth:{obj.get('id', n)}", response=str(obj["response"]), knowledge=knowledge,
            consistent=not spans, label="hallucinated" if spans else "no hallucination",
            subset=str(source.get("task_type", "?")), history=history, dialogue=str(obj.get("source_id")),
            split="dev" if split == "train" else split or None,
            spans=_label_spans(spans, len(str(obj["response"])))))
    log.check(examples)
    issues = {k: v for k, v in quality.items() if k != "good"}
    notes = ([f"kept {sum(issues.values())} responses with quality issues {issues} (RAGTruth's 'quality')"]
             if issues else []) + log.notes()
    return MetaEvalData(name="ragtruth", source=str(folder), examples=examples, skipped=log.skipped,
                        notes=notes, benchmark=BENCHMARK, experiments=("response", "subsets", "benchmark", "spans"),
                        label_scheme="no hallucinated span = consistent; any span = inconsistent (response level)")
