"""HalluDial (``--dataset halludial``)."""

from __future__ import annotations

import re
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

#: the published benchmark its data is (``MetaEvalData.benchmark``)
BENCHMARK = "HalluDial"


def _halludial_example(n: int, obj: dict[str, Any], prefix: str, log: "RowLog") -> Optional[Example]:
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
    stem = log.path.stem.lower()
    return Example(
        id=f"halludial:{prefix}{n}", response=response, knowledge=knowledge, consistent=verdict,
        label="no hallucination" if verdict else "hallucination", subset=log.path.stem,
        dialogue=f"{prefix}{obj.get('dialogue_id')}" if obj.get("dialogue_id") is not None else None,
        history=history if isinstance(history, str) and history else None,
        split="dev" if "train" in stem or "dev" in stem else "test" if "test" in stem else None,
        spans=() if verdict else quoted_spans(response, target))


#: a quoted phrase of a rationale: "..." or “...”
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')


def quoted_spans(response: str, target: str) -> Optional[tuple[tuple[int, int], ...]]:
    """The hallucinated characters of a response that HalluDial's rationale names: each phrase quoted in the target
    ("The hallucination lies in \"80 metres\"") found in the response (its first occurrence, ignoring case); None
    when no quoted phrase is in the response (HalluDial locates the hallucination in words, not offsets)."""
    low = response.lower()
    out = set()
    for m in _QUOTED.finditer(target):
        phrase = (m.group(1) or m.group(2)).strip()
        at = low.find(phrase.lower()) if phrase else -1
        if at >= 0:
            out.add((at, at + len(phrase)))
    return tuple(sorted(out)) or None


def load_halludial(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """HalluDial (Luo et al. 2024): one JSON list (or JSONL) of turns with ``dialogue_id``, ``knowledge``,
    ``dialogue_history``, ``turn``, ``response`` and ``target``, whose first word says whether the response
    hallucinates (``Yes. ...`` inconsistent, ``No. ...`` consistent; the rest is the rationale).

    ``path`` may also be a folder of such files (e.g. HalluDial's train and test files: the train file's records
    are the dev split the ``spans`` experiment chooses its thresholds on); their ids and dialogues then begin with the
    file's stem (``halludial:spontaneous_test:3``).

    Ids are ``halludial:<position>``; the dialogue is ``dialogue_id``; the subset the file's stem (e.g.
    ``spontaneous_test``), and a stem holding ``train`` or ``dev`` makes the records the dev split (``test``: the
    test split). A hallucinated response's spans are the phrases its target quotes (:func:`quoted_spans`). Records
    whose target starts with neither (after ``labels.label_map``, applied to the
    first word), records with an empty response or knowledge and records without a field are left out and listed.
    """
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    if not files:
        raise DataFormatError(f"The halludial loader reads a HalluDial .json / .jsonl file, or a folder of them; "
                              f"{path} holds none")
    examples: list[Example] = []
    skipped: list = []
    notes: list[str] = []
    pool: dict[str, list[str]] = {}
    for file in files:
        log = RowLog(file, labels, ["Yes", "No"])
        prefix = f"{file.stem}:" if path.is_dir() else ""  # (files of a folder: ids and dialogues apart)
        found = []
        for n, obj in json_objects(file, "HalluDial", log):
            ex = log.guarded(f"record {n}", _halludial_example, n, obj, prefix)
            if ex is None:
                continue
            found.append(ex)
            if ex.dialogue is not None:
                pool.setdefault(ex.dialogue, []).append(ex.knowledge)
        log.check(found)
        examples += found
        skipped += log.skipped
        notes += log.notes()
    return MetaEvalData(name="halludial", source=str(path), examples=examples, skipped=skipped,
                        notes=notes, benchmark=BENCHMARK,
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        label_scheme="target 'No' (no hallucination) = consistent; 'Yes' = inconsistent")
