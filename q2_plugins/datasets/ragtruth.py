"""RAGTruth at the response level (``--dataset ragtruth``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from q2_plugins.datasets.common import (
    DataFormatError,
    DataSettingError,
    LabelOptions,
    RowLog,
    first_field,
    json_objects,
)
from q2_plugins.datasets.types import Example, MetaEvalData, SkippedRow

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


#: the ``quality`` choices of :func:`load_ragtruth`: ``good`` keeps the responses RAGTruth's own evaluation keeps
#: (its ``quality`` is ``good``), ``all`` keeps every response (``incorrect_refusal`` and ``truncated`` too)
QUALITY_CHOICES = ("good", "all")


def _utf16_to_chars(text: str, start: int, end: int) -> Optional[tuple[int, int]]:
    """``[start, end)`` counted in UTF-16 code units (as JavaScript counts) as character offsets of ``text``, or
    None when an offset falls inside a character or past the end."""
    units = 0
    where: dict[int, int] = {}
    for i, ch in enumerate(text):
        where[units] = i
        units += 2 if ord(ch) > 0xFFFF else 1
    where[units] = len(text)
    if start not in where or end not in where:
        return None
    return where[start], where[end]


def judge_label(label: Any, response: str) -> tuple[Optional[tuple[int, int]], Optional[str], str]:
    """One RAGTruth label judged on its own: ``(span, problem, detail)``. ``span`` is the label's characters
    ``[start, end)`` in ``response`` (None when the label is left out), ``problem`` why it is left out or what was
    done to it (``utf-16 offsets``, converted; ``text not checked``: no ``text`` to compare), None when its offsets cut
    exactly its ``text``."""
    if not isinstance(label, dict):
        return None, "not an object", repr(label)[:60]
    start, end = label.get("start"), label.get("end")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        return None, "offsets not integers", f"start={start!r} end={end!r}"[:80]
    if start < 0 or end <= start:
        return None, "empty or reversed offsets", f"start={start} end={end}"
    text = label.get("text")
    if end > len(response):
        converted = _utf16_to_chars(response, start, end) if isinstance(text, str) else None
        if converted is None or response[converted[0]:converted[1]] != text:
            return None, "offsets past the end", f"end={end} > {len(response)} characters"
    if not isinstance(text, str):
        return (start, end), "text not checked", "the label has no text"
    if response[start:end] == text:
        return (start, end), None, ""
    converted = _utf16_to_chars(response, start, end)
    if converted is not None and response[converted[0]:converted[1]] == text:
        return converted, "utf-16 offsets", f"{start}:{end} -> {converted[0]}:{converted[1]} {text[:40]!r}"
    return None, "text mismatch", f"{text[:40]!r} != response[{start}:{end}] {response[start:end][:40]!r}"


class _LabelLog:
    """The labels judged on their own: those left out (bad offsets, text not at its offsets), those converted from
    UTF-16 offsets and those without a text to check, each with the response's line."""

    #: problems after which the label is kept (its span converted or unchecked)
    KEPT = ("utf-16 offsets", "text not checked")

    def __init__(self) -> None:
        self.n = 0
        self.rows: list[SkippedRow] = []

    def spans(self, where: str, labels: list, response: str) -> Optional[tuple[tuple[int, int], ...]]:
        """The response's good spans; None when none of its labels is usable (it then counts at the example level
        only)."""
        out = []
        for k, label in enumerate(labels):
            self.n += 1
            span, problem, detail = judge_label(label, response)
            if problem is not None:
                self.rows.append(SkippedRow(f"{where} label {k}", problem, detail))
            if span is not None:
                out.append(span)
        return tuple(sorted(set(out))) if out else (None if labels else ())

    def notes(self) -> list[str]:
        if not self.rows:
            return [f"labels: all {self.n} cut exactly their text"] if self.n else []
        counts = Counter(r.reason for r in self.rows)
        left = sum(n for reason, n in counts.items() if reason not in self.KEPT)
        listed = "; ".join(r.describe() for r in self.rows[:10])
        more = f" (all {len(self.rows)} in report.json, data.flagged_labels)" if len(self.rows) > 10 else ""
        return [f"labels: {self.n} judged one by one, {left} left out (the response keeps its other spans), "
                + ", ".join(f"{n} {reason}" for reason, n in counts.items()) + f": {listed}{more}"]


def load_ragtruth(path: str | Path, *, quality: str = "good") -> MetaEvalData:
    """RAGTruth (Niu et al. 2024) at the response level: ``path`` is the folder holding its ``response.jsonl``
    (``id``, ``source_id``, ``model``, ``labels``: the hallucinated spans, ``split``: train / test, ``quality``,
    ``response``) and ``source_info.jsonl`` (``source_id``, ``task_type``, ``source_info``).

    A response is consistent when it has no hallucinated span. The knowledge is the source (a QA item's passages,
    its question as history; a data-to-text item's record as JSON); the subset is the task type; the ``train`` split is
    the dev split the ``benchmark`` and ``spans`` experiments tune thresholds on. ``quality`` (:data:`QUALITY_CHOICES`):
    ``good``, the default, keeps the responses whose ``quality`` is ``good`` (RAGTruth's own evaluation leaves out
    ``incorrect_refusal`` and ``truncated``), ``all`` keeps them all; the summary's notes say which.

    The labels' ``start`` / ``end`` are the response's hallucinated characters (:attr:`Example.spans`), as
    RAGTruth's span-level task reads them. Each label is judged on its own (:func:`judge_label`): one whose offsets
    are unusable (past the end, empty, not integers) or do not cut its ``text`` is left out and listed in
    :attr:`MetaEvalData.flagged` (offsets counted in UTF-16 code units are converted), and the response keeps its
    other spans; a response none of whose labels is usable counts at the example level only. Responses whose
    ``labels`` is not a list or whose source is missing are left out and listed (RAGTruth's labels are spans, not
    values: no label map).
    """
    if quality not in QUALITY_CHOICES:
        raise DataSettingError("ragtruth_quality", f"RAGTruth's quality choice is one of {list(QUALITY_CHOICES)}, "
                                                   f"not {quality!r}")
    folder = Path(path)
    if not (folder / "response.jsonl").is_file() or not (folder / "source_info.jsonl").is_file():
        raise DataFormatError(f"The ragtruth loader reads the RAGTruth folder holding response.jsonl and "
                              f"source_info.jsonl; {folder} does not hold both")
    sources: dict[str, dict[str, Any]] = {}
    for n, obj in json_objects(folder / "source_info.jsonl", "RAGTruth source_info"):
        sources[str(first_field(obj, ("source_id",), f"source_info.jsonl line {n}"))] = obj
    log, labels = RowLog(folder / "response.jsonl", LabelOptions()), _LabelLog()
    examples = []
    kept: Counter = Counter()
    for n, obj in json_objects(folder / "response.jsonl", "RAGTruth response", log):
        where = f"line {n}"
        spans, source = obj.get("labels"), sources.get(str(obj.get("source_id")))
        if not isinstance(spans, list):
            log.skip(where, "malformed labels", repr(spans)[:60])
            continue
        if source is None:
            log.skip(where, "unknown source_id", str(obj.get("source_id")))
            continue
        grade = str(obj.get("quality", "good"))
        if quality == "good" and grade != "good":
            log.skip(where, "quality not good", grade)
            continue
        knowledge, history = _ragtruth_knowledge(source.get("source_info"))
        if not log.texts(where, str(obj.get("response") or ""), knowledge):
            continue
        split = str(obj.get("split", "")).strip().lower()
        kept[grade] += 1
        response = str(obj["response"])
        examples.append(Example(
            id=f"ragtruth:{obj.get('id', n)}", response=response, knowledge=knowledge,
            consistent=not spans, label="hallucinated" if spans else "no hallucination",
            subset=str(source.get("task_type", "?")), history=history, dialogue=str(obj.get("source_id")),
            split="dev" if split == "train" else split or None, spans=labels.spans(where, spans, response)))
    log.check(examples)
    return MetaEvalData(name="ragtruth", source=str(folder), examples=examples, skipped=log.skipped,
                        notes=[_quality_note(quality, kept, log)] + labels.notes() + log.notes(),
                        flagged=labels.rows, benchmark=BENCHMARK,
                        experiments=("response", "subsets", "benchmark", "spans"),
                        label_scheme="no hallucinated span = consistent; any span = inconsistent (response level)")


def _quality_note(quality: str, kept: Counter, log: RowLog) -> str:
    if quality == "good":
        left = Counter(r.detail for r in log.skipped if r.reason == "quality not good")
        return (f"quality: only responses of quality 'good', as RAGTruth's own evaluation ({sum(left.values())} left "
                f"out: {dict(left)}); quality 'all' keeps them")
    issues = {k: v for k, v in kept.items() if k != "good"}
    return (f"quality: every response kept (quality 'all'), {sum(issues.values())} with quality issues {issues}; "
            f"RAGTruth's own evaluation keeps only 'good' (the default)")
