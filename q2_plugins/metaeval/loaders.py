"""Loaders of annotated data into :class:`~q2_plugins.metaeval.data.MetaEvalData`.

Each checks the format it expects and raises :class:`DataFormatError` saying what is wrong and which loader or option
fits instead. Only the standard library is used (no pandas).
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..errors import SettingError
from ..io import InputFormatError, blank_lines, read_checked_rows, read_rows
from .data import Example, MetaEvalData, PairedContext, PerturbedPair, SkippedRow

__all__ = [
    "DataFormatError",
    "LabelOptions",
    "read_label_map",
    "WOW_SUBSETS",
    "BEGIN_LABELS",
    "DIALFACT_LABELS",
    "load_wow",
    "load_begin",
    "load_dialfact",
    "load_dnli",
    "load_faithdial",
    "load_usr",
    "USR_NO_FACT",
    "load_table",
    "load_stress",
    "load_llm_aggrefact",
    "load_ragtruth",
    "load_halludial",
    "load_dataset",
    "LOADERS",
]

WOW_SUBSETS = ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent")
_WOW_COLUMNS = ("episode_idx", "round", "response", "knowledge")
_CROSS_COLUMNS = ("episode_idx", "round", "knowledge", "dodeca_response", "memnet_response", "dodeca_label",
                  "memnet_label")
BEGIN_LABELS = ("entailment", "hallucination", "generic", "off-topic", "contradiction")
_BEGIN_COLUMNS = ("evidence", "response", "gold label")
_BEGIN2_COLUMNS = ("knowledge", "response", "begin_label")
BEGIN2_LABELS = ("Fully attributable", "Not fully attributable", "Generic")
DIALFACT_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
_DNLI_LABELS = {"entailment": "entailment", "positive": "entailment", "neutral": "neutral",
                "contradiction": "contradiction", "negative": "contradiction"}


class DataFormatError(InputFormatError):
    """A data file is not in the format its loader reads; the message says what to change."""


class DataSettingError(DataFormatError, SettingError):
    """A data file that does not fit the settings that say how to read it; ``setting`` names them."""


def _label_key(value: str) -> str:
    return " ".join(str(value).strip().lower().split())


@dataclass(frozen=True)
class LabelOptions:
    """What a loader does with label values it does not know (an annotator's typo such as ``entailmentt``).

    ``label_map`` maps a label value (whole cell, or one label of a multi-label cell; compared case- and
    space-insensitively) to the value to read instead. A row whose label is still unknown is not an example: it is
    listed in :attr:`MetaEvalData.skipped` with its line, and the run goes on; ``drop_unknown`` says that this is
    wanted (no warning is printed).
    """

    label_map: Mapping[str, str] = field(default_factory=dict)
    drop_unknown: bool = False

    def mapped(self, value: str) -> str:
        """``value`` as the label map rewrites it (unchanged when the map does not name it)."""
        if not self.label_map:
            return value
        table = {_label_key(k): v for k, v in self.label_map.items()}
        return table.get(_label_key(value), value)


def read_label_map(path: str | Path) -> dict[str, str]:
    """A label map file: a JSON object ``{"entailmentt": "entailment"}``, or CSV / TSV lines ``from,to`` (no header;
    lines starting with ``#`` are comments)."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(f"No label map file {path}")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise DataFormatError(f"Label map file {path} is empty")
    if text.lstrip().startswith("{"):
        try:
            table = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"Label map file {path} is not valid JSON: {e.msg} (line {e.lineno})") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
            raise DataFormatError(f"Label map file {path}: every key and value must be a string")
        return dict(table)
    delimiter = "\t" if "\t" in text else ","
    table = {}
    for n, row in enumerate(csv.reader(text.splitlines(), delimiter=delimiter), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) != 2:
            raise DataFormatError(f"Label map file {path} line {n}: expected two values 'from{delimiter}to', "
                                  f"got {row!r}")
        table[row[0].strip()] = row[1].strip()
    return table


class _Rows:
    """The rows of one file a loader leaves out, with their reasons, and the notes that say so."""

    def __init__(self, path: Path, labels: LabelOptions, expected: Sequence[str] = ()) -> None:
        self.path, self.labels, self.expected = path, labels, list(expected)
        self.skipped: list[SkippedRow] = []

    def skip(self, where: str, reason: str, detail: str = "") -> None:
        self.skipped.append(SkippedRow(where, reason, detail))

    def guarded(self, where: str, read: Callable[..., Optional[Example]], *args: Any) -> Optional[Example]:
        """``read(*args, self)``'s example; a :class:`DataFormatError` (a missing field, a wrong type) leaves the
        row out, listed."""
        try:
            return read(*args, self)
        except DataFormatError as e:
            self.skip(where, "malformed row", str(e))
            return None

    def texts(self, where: str, response: str, knowledge: str) -> bool:
        """True when both texts are there; else the row is skipped with the reason."""
        for name, text in (("response", response), ("knowledge", knowledge)):
            if not text.strip():
                self.skip(where, f"empty {name}")
                return False
        return True

    def notes(self) -> list[str]:
        if not self.skipped:
            return []
        counts = Counter(r.reason for r in self.skipped)
        out = [f"left out {len(self.skipped)} rows of {self.path.name}: "
               + ", ".join(f"{n} {reason}" for reason, n in counts.items())]
        unknown = [r for r in self.skipped if r.reason == "unknown label"]
        if unknown:
            listed = "; ".join(f"{r.where} {r.detail!r}" for r in unknown[:20])
            more = f" (and {len(unknown) - 20} more in report.json)" if len(unknown) > 20 else ""
            how = ("dropped as asked" if self.labels.drop_unknown else
                   "map them with a label map (setting label_map) or drop them knowingly (setting drop_unknown_labels)")
            known = f" (known: {', '.join(self.expected)})" if self.expected else ""
            out.append(f"unknown labels{known}: {listed}{more}; {how}")
        return out

    def check(self, examples: Sequence[Example]) -> None:
        """Refuse a file of which no row is an example, saying why."""
        if examples:
            return
        if not self.skipped:
            raise DataFormatError(f"{self.path} holds no rows")
        counts = dict(Counter(r.reason for r in self.skipped))
        first = "; ".join(r.describe() for r in self.skipped[:3])
        known = f"; the known labels are {self.expected}" if self.expected and "unknown label" in counts else ""
        raise DataFormatError(f"{self.path} holds no usable row: all {len(self.skipped)} left out {counts} "
                              f"(e.g. {first}){known}")


def _blank(row: Mapping[str, Any]) -> bool:
    return all(v is None or (isinstance(v, str) and not v.strip()) or v == [] for v in row.values())


def _skip_blank_lines(log: "_Rows", path: str | Path, fmt: Optional[str] = None, prefix: str = "") -> None:
    """List the empty lines of a CSV / TSV file as blank rows, with their line: its rows, read by
    :func:`~q2_plugins.io.read_rows`, pass over them (so row numbers stay those ``q2 score`` writes)."""
    for n in blank_lines(path, fmt):
        log.skip(f"{prefix}line {n}", "blank row")


def _csv_rows(path: Path, required: Sequence[str], what: str, delimiter: str = ",") -> tuple[list[str], list[dict]]:
    """The columns and rows of a CSV / TSV file, empty lines left out (as ``csv.DictReader`` does)."""
    columns, rows = _csv_lines(path, required, what, delimiter)
    return columns, [row for _, row in rows if row is not None]


def _csv_lines(path: Path, required: Sequence[str], what: str, delimiter: str = ","
               ) -> tuple[list[str], list[tuple[int, Optional[dict]]]]:
    """The columns and ``(first line, row)`` of every row of a CSV / TSV file; an empty line is ``(line, None)``."""
    if not path.is_file():
        raise DataFormatError(f"No {what} file {path}")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delimiter)
        columns = next(reader, [])
        if not columns:
            raise DataFormatError(f"{path} is empty (no header, no rows); expected a {what} file")
        missing = [c for c in required if c not in columns]
        if missing:
            raise DataFormatError(f"{path} is not a {what} file: no column(s) {missing}; its columns are {columns}")
        rows: list[tuple[int, Optional[dict]]] = []
        line = reader.line_num
        for values in reader:
            rows.append((line + 1, dict(zip(columns, values + [""] * (len(columns) - len(values))))
                         if values else None))
            line = reader.line_num
        return columns, rows


def _json_objects(path: Path, what: str, log: Optional["_Rows"] = None) -> Iterable[tuple[int, dict[str, Any]]]:
    """(line or position, object) of a JSONL file, or of a file holding one JSON list of objects (the Dialogue NLI
    release is such a list, whatever its extension). With ``log``, a line that is not a JSON object is left out
    and listed there; without, it stops the file."""
    if not path.is_file():
        raise DataFormatError(f"No {what} file {path}")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise DataFormatError(f"{path} is empty; expected a {what} file")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path} is not valid JSON: {e.msg} (line {e.lineno})") from None
        for i, obj in enumerate(items):
            if not isinstance(obj, dict):
                if log is None:
                    raise DataFormatError(f"{path}: item {i} is a JSON {type(obj).__name__}, expected an object")
                log.skip(f"record {i}", "malformed row", f"a JSON {type(obj).__name__}, not an object")
                continue
            yield i, obj
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if log is None:
                raise DataFormatError(f"{path} line {n} is not valid JSON ({e.msg}); the {what} loader reads JSONL, "
                                      f"one object per line") from None
            log.skip(f"line {n}", "invalid JSON", f"{e.msg}; the {what} loader reads JSONL, one object per line")
            continue
        if not isinstance(obj, dict):
            if log is None:
                raise DataFormatError(f"{path} line {n} is a JSON {type(obj).__name__}, expected an object")
            log.skip(f"line {n}", "malformed row", f"a JSON {type(obj).__name__}, not an object")
            continue
        yield n, obj


def _field(obj: dict[str, Any], names: Sequence[str], where: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    raise DataFormatError(f"{where}: no field {' / '.join(repr(n) for n in names)}; its fields are {sorted(obj)}")


def _text(value: Any, where: str) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return " ".join(v.strip() for v in value)
    if not isinstance(value, str):
        raise DataFormatError(f"{where} must be a string, got {type(value).__name__}")
    return value


# -- the paper's WoW annotations ---------------------------------------------------------------------------------
def load_wow(path: str | Path, *, cross_annotation: bool = True) -> MetaEvalData:
    """The Q² paper's Wizard-of-Wikipedia annotations.

    ``path`` is the folder holding ``dodeca_consistent.csv``, ``dodeca_inconsistent.csv``, ``memnet_consistent.csv``
    and ``memnet_inconsistent.csv`` (the 600 response-level examples; ids ``<file stem>:<row id>``, the ids the
    original run's outputs use) and, optionally, ``cross_annotation.csv`` (544 contexts answered by both systems,
    ``<system>_label`` 1 = inconsistent). A cross-annotated response that is one of the 600 (same system, episode,
    round and text) is that example; the others become :attr:`MetaEvalData.extra` examples
    ``cross_annotation:<row>:<system>``.
    """
    folder = _wow_folder(path)
    examples, by_turn = _wow_examples(folder)
    pool: dict[str, list[str]] = {}  # dialogue -> its knowledge texts
    for ex in examples:
        pool.setdefault(ex.dialogue, []).append(ex.knowledge)  # type: ignore[arg-type]
    contexts: list[PairedContext] = []
    extra: list[Example] = []
    notes: list[str] = []
    cross_file = folder / "cross_annotation.csv"
    if cross_annotation and cross_file.is_file():
        contexts, extra, disagree = _wow_cross_annotation(cross_file, by_turn, pool)
        shared = sum(1 for c in contexts for i in c.example_ids.values() if not i.startswith("cross_annotation:"))
        notes.append(f"cross annotation: {len(contexts)} contexts; {shared} of their {2 * len(contexts)} responses "
                     f"are response-level examples, {len(extra)} are not")
        if disagree:
            notes.append(f"cross annotation: {disagree} responses labelled differently from the response-level set "
                         f"(the system level uses the cross-annotation label)")
    elif cross_annotation:
        notes.append(f"no {cross_file.name} in {folder}: no system-level experiment")
    return MetaEvalData(
        name="wow", source=str(folder), examples=examples, contexts=contexts, extra=extra, benchmark="Q2",
        label_scheme="file name: <system>_consistent / <system>_inconsistent; cross annotation 1 = inconsistent",
        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()}, notes=notes,
    )


def _wow_folder(path: str | Path) -> Path:
    """``path`` as the WoW annotation folder, checked to hold the four response-level files."""
    folder = Path(path)
    if not folder.is_dir():
        raise DataFormatError(f"The wow loader reads a folder with {', '.join(f'{s}.csv' for s in WOW_SUBSETS)}; "
                              f"{folder} is not a folder")
    absent = [s for s in WOW_SUBSETS if not (folder / f"{s}.csv").is_file()]
    if absent:
        found = sorted(p.name for p in folder.iterdir())
        raise DataFormatError(f"{folder} is not the Q² WoW annotation folder: no {[f'{s}.csv' for s in absent]} "
                              f"(found {found})")
    return folder


_Turn = tuple[str, str, str]  # (system, episode, round) of a WoW response


def _wow_examples(folder: Path) -> tuple[list[Example], dict[_Turn, Example]]:
    """The response-level examples of the four ``<system>_<label>.csv`` files in file order, and each by its turn."""
    examples: list[Example] = []
    by_turn: dict[_Turn, Example] = {}
    for stem in WOW_SUBSETS:
        system, label = stem.split("_")
        columns, rows = _csv_rows(folder / f"{stem}.csv", _WOW_COLUMNS, "Q² WoW annotation")
        index_column = columns[0] if columns[0] not in _WOW_COLUMNS else None
        for pos, row in enumerate(rows):
            rid = row[index_column] if index_column else str(pos)
            ex = Example(
                id=f"{stem}:{rid}", response=row["response"], knowledge=row["knowledge"],
                consistent=label == "consistent", label=label, subset=stem, dialogue=row["episode_idx"],
                history=row.get("message"),
            )
            examples.append(ex)
            by_turn[(system, row["episode_idx"], row["round"])] = ex
    return examples, by_turn


def _wow_cross_annotation(cross_file: Path, by_turn: dict[_Turn, Example], pool: dict[str, list[str]]
                          ) -> tuple[list[PairedContext], list[Example], int]:
    """The paired contexts of ``cross_annotation.csv``, the examples it adds (responses that are not response-level
    examples) and how many shared responses it labels differently; each context's knowledge joins ``pool``."""
    columns, rows = _csv_rows(cross_file, _CROSS_COLUMNS, "Q² cross annotation")
    index_column = columns[0] if columns[0] not in _CROSS_COLUMNS else None
    contexts: list[PairedContext] = []
    extra: list[Example] = []
    disagree = 0
    for pos, row in enumerate(rows):
        rid = row[index_column] if index_column else str(pos)
        ids, consistent = {}, {}
        for system in ("dodeca", "memnet"):
            value = row[f"{system}_label"].strip()
            if value not in ("0", "1"):
                raise DataFormatError(f"{cross_file} row {rid}: {system}_label must be 0 or 1 "
                                      f"(1 = inconsistent), got {value!r}")
            consistent[system] = value == "0"
            match = by_turn.get((system, row["episode_idx"], row["round"]))
            if match is not None and match.response == row[f"{system}_response"]:
                ids[system] = match.id
                disagree += match.consistent != consistent[system]
                continue
            ex = Example(
                id=f"cross_annotation:{rid}:{system}", response=row[f"{system}_response"],
                knowledge=row["knowledge"], consistent=consistent[system],
                label="consistent" if consistent[system] else "inconsistent", subset=f"{system}_cross",
                dialogue=row["episode_idx"], history=row.get("message"),
            )
            extra.append(ex)
            ids[system] = ex.id
        contexts.append(PairedContext(f"cross_annotation:{rid}", ids, consistent))
        pool.setdefault(row["episode_idx"], []).append(row["knowledge"])
    return contexts, extra, disagree


# -- BEGIN ---------------------------------------------------------------------------------------------------------
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
    _, rows = _csv_lines(path, _BEGIN2_COLUMNS if v2 else _BEGIN_COLUMNS, what, delimiter="\t")
    known = {k.lower(): k for k in (BEGIN2_LABELS if v2 else BEGIN_LABELS)}
    label_column, knowledge_column, history_column = (("begin_label", "knowledge", "message") if v2 else
                                                      ("gold label", "evidence", "previous turn"))
    log = _Rows(path, labels, list(known.values()))
    examples = []
    for i, (line, r) in enumerate(rows):
        where = f"line {line}"
        if r is None or _blank(r):
            log.skip(where, "blank row")
            continue
        label = known.get(_label_key(labels.mapped(r[label_column])))
        if label is None:
            log.skip(where, "unknown label", r[label_column])
            continue
        if not log.texts(where, r["response"], r[knowledge_column]):
            continue
        examples.append(Example(
            id=f"begin:{i}", response=r["response"], knowledge=r[knowledge_column],
            consistent=label in ("entailment", "Fully attributable"), label=label, subset=label,
            history=r.get(history_column) or None))
    log.check(examples)
    if v2:
        systems = Counter(r.get("model_name") or "?" for _, r in rows if r is not None and not _blank(r))
        return MetaEvalData(name="begin-v2", source=str(path), examples=examples, skipped=log.skipped,
                            benchmark="BEGIN v2",
                            notes=[f"responses by system: {dict(systems)}"] + log.notes(),
                            label_scheme="BEGIN v2 label: Fully attributable = consistent; Not fully attributable, "
                                         "Generic = inconsistent")
    return MetaEvalData(name="begin", source=str(path), examples=examples, skipped=log.skipped, notes=log.notes(),
                        benchmark="BEGIN",
                        label_scheme="BEGIN gold label: entailment = consistent; hallucination, generic, off-topic, "
                                     "contradiction = inconsistent")


# -- DialFact-style JSONL ------------------------------------------------------------------------------------------
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


def _dialfact_example(n: int, obj: dict[str, Any], log: "_Rows") -> Optional[Example]:
    where = f"{log.path} line {n}"
    raw = str(_field(obj, ("response_label", "label"), where))
    label = _label_key(log.labels.mapped(raw)).upper()
    if label not in DIALFACT_LABELS:
        log.skip(f"line {n}", "unknown label", raw)
        return None
    evidence = _field(obj, ("evidence_list", "evidence"), where)
    if isinstance(evidence, str):
        evidence = [evidence]
    if not isinstance(evidence, list):
        raise DataFormatError(f"{where}: the evidence must be a list, got {type(evidence).__name__}")
    knowledge = " ".join(_evidence_text(item, where).strip() for item in evidence)
    context = obj.get("context")
    return Example(
        id=str(obj.get("id", f"dialfact:{n}")), response=_text(_field(obj, ("response",), where), where),
        knowledge=knowledge, consistent=label == "SUPPORTS", label=label, subset=label,
        history=_text(context, where) if context else None,
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
    log = _Rows(path, labels, DIALFACT_LABELS)
    for n, obj in _json_objects(path, "DialFact", log):
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


# -- Dialogue NLI-style JSONL --------------------------------------------------------------------------------------
def _dnli_example(n: int, obj: dict[str, Any], log: "_Rows") -> Optional[Example]:
    where = f"{log.path} record {n}"
    raw = str(_field(obj, ("label", "gold_label"), where))
    label = _DNLI_LABELS.get(_label_key(log.labels.mapped(raw)))
    if label is None:
        log.skip(f"record {n}", "unknown label", raw)
        return None
    return Example(
        id=str(obj.get("id", f"dnli:{n}")), response=_text(_field(obj, ("hypothesis", "sentence2"), where), where),
        knowledge=_text(_field(obj, ("premise", "sentence1"), where), where),
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
    log = _Rows(path, labels, sorted(_DNLI_LABELS))
    for n, obj in _json_objects(path, "Dialogue NLI", log):
        ex = log.guarded(f"record {n}", _dnli_example, n, obj)
        if ex is not None:
            examples.append(ex)
    log.check(examples)
    return MetaEvalData(name="dnli", source=str(path), examples=examples, experiments=("dnli",),
                        skipped=log.skipped, notes=log.notes(),
                        label_scheme="entailment / positive = consistent; neutral, contradiction / negative = "
                                     "inconsistent")


# -- FaithDial's data audit ----------------------------------------------------------------------------------------
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
        columns, rows = _csv_lines(path, _FAITHDIAL_GOLD_COLUMNS, "FaithDial gold audit CSV")
        return columns, rows, "response", "evidence", "BEGIN"
    columns, rows = _csv_lines(path, _FAITHDIAL_COLUMNS, "FaithDial audit CSV (knowledge, history, <system>, "
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
    found = [_label_key(labels.mapped(x)) for x in cell.split(",") if x.strip()]
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
    log = _Rows(path, labels, [name for name, _ in _FAITHDIAL_PRIMARY])
    examples = []
    for i, (line, r) in enumerate(rows):
        where = f"line {line}"
        if r is None or _blank(r):
            log.skip(where, "blank row")
            continue
        found = _faithdial_labels(r[label_column] or "", labels)
        if found is None:
            log.skip(where, "unknown label", r[label_column] or "")
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


# -- USR's Topical-Chat annotations -------------------------------------------------------------------------------
USR_NO_FACT = "_nofact"
USR_RATING = "Uses Knowledge"


def _usr_no_fact(fact: str) -> bool:
    """The Topical-Chat marker of a turn without knowledge (``_nofact``; spacing, case and underscores aside)."""
    return fact.strip().lower().replace("_", "").replace(" ", "") == "nofact"


def load_usr(path: str | Path) -> MetaEvalData:
    """USR's Topical-Chat annotations (Mehri & Eskenazi 2020, ``tc_usr_data.json``): a JSON list of contexts with
    ``context``, ``fact`` and ``responses`` (``response``, ``model`` and per-dimension lists of annotator ratings).

    As in the Q² paper, contexts whose fact is the no-fact marker (:data:`USR_NO_FACT`) are dropped (and counted in
    the notes); every other response is an example scored against its context's fact, with its mean
    ``"Uses Knowledge"`` rating as :attr:`Example.rating`. Ids are ``usr:<context index>:<response index>`` (indices in
    the file), the subset is the response's ``model``. The binary view some tables need is a majority of
    annotators (mean rating >= 0.5) saying the response uses the knowledge.
    """
    path = Path(path)
    examples: list[Example] = []
    dropped = dropped_responses = 0
    for ci, obj in _json_objects(path, "USR Topical-Chat (tc_usr_data.json)"):
        where = f"{path} context {ci}"
        fact = _text(_field(obj, ("fact",), where), f"{where} fact")
        responses = _field(obj, ("responses",), where)
        if not isinstance(responses, list):
            raise DataFormatError(f"{where}: 'responses' must be a list, got {type(responses).__name__}")
        if _usr_no_fact(fact):
            dropped += 1
            dropped_responses += len(responses)
            continue
        context = obj.get("context")
        for ri, resp in enumerate(responses):
            rwhere = f"{where} response {ri}"
            if not isinstance(resp, dict):
                raise DataFormatError(f"{rwhere} is a JSON {type(resp).__name__}, expected an object")
            ratings = _field(resp, (USR_RATING,), rwhere)
            if not isinstance(ratings, list) or not ratings or \
                    not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ratings):
                raise DataFormatError(f"{rwhere}: {USR_RATING!r} must be a non-empty list of annotator ratings, "
                                      f"got {ratings!r:.80}")
            rating = sum(ratings) / len(ratings)
            model = str(resp.get("model", "?"))
            examples.append(Example(
                id=f"usr:{ci}:{ri}", response=_text(_field(resp, ("response",), rwhere), rwhere).strip(),
                knowledge=fact.strip(), consistent=rating >= 0.5,
                label="uses knowledge" if rating >= 0.5 else "does not use knowledge", subset=model,
                dialogue=f"usr:{ci}", history=_text(context, where).strip() if context else None, rating=rating,
            ))
    if not examples:
        raise DataFormatError(f"{path} holds no response with a fact")
    notes = [f"dropped {dropped} contexts whose fact is the no-fact marker {USR_NO_FACT!r} ({dropped_responses} "
             f"responses); {len(examples)} responses remain"]
    pool: dict[str, list[str]] = {}
    for ex in examples:
        pool.setdefault(ex.dialogue, []).append(ex.knowledge)  # type: ignore[arg-type]
    return MetaEvalData(name="usr-topicalchat", source=str(path), examples=examples, notes=notes,
                        label_scheme=f"mean {USR_RATING!r} rating (for correlations); binary view: mean >= 0.5",
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        experiments=("usr",))


# -- any table ------------------------------------------------------------------------------------------------------
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


def load_table(
    path: str | Path,
    *,
    consistent_labels: Sequence[str],
    response_column: str = "response",
    knowledge_column: str = "knowledge",
    label_column: str = "label",
    id_column: Optional[str] = None,
    subset_column: Optional[str] = None,
    split_column: Optional[str] = None,
    dialogue_column: Optional[str] = None,
    history_column: Optional[str] = None,
    score_columns: Sequence[str] = (),
    input_format: Optional[str] = None,
    labels: LabelOptions = LabelOptions(),
) -> MetaEvalData:
    """Any CSV / TSV / JSONL file with response, knowledge and label columns.

    ``consistent_labels`` are the label values (compared as stripped, lower-cased strings, after
    ``labels.label_map``) meaning consistent; every other value is inconsistent. Ids are the ``id_column`` values,
    else the row number (0-based), matching the ``row`` field that ``q2 score`` writes for the same file.
    ``score_columns`` are metric scores stored in the file itself (read as :attr:`Example.extra_scores`; empty cells
    are missing scores). Blank rows (empty cells, or an empty line of a CSV / TSV file, named by its line) and rows
    with an empty response, knowledge or label are left out and listed in :attr:`MetaEvalData.skipped`.
    """
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
    log = _Rows(Path(path), labels)
    for i, row in read_checked_rows(path, input_format, fields, error=DataFormatError, missing_error=DataSettingError):
        where = f"{path} row {i}"
        if _blank(row):
            log.skip(f"row {i}", "blank row")
            continue
        label = str(labels.mapped(str(row[label_column] if row[label_column] is not None else ""))).strip()
        if not label:
            log.skip(f"row {i}", "empty label")
            continue
        if not log.texts(f"row {i}", _text(row[response_column] or "", f"{where} {response_column}"),
                         _text(row[knowledge_column] or "", f"{where} {knowledge_column}")):
            continue
        scores = _row_scores(row, score_columns, where)
        examples.append(Example(
            id=str(row[id_column]) if id_column else str(i),
            response=_text(row[response_column], f"{where} {response_column}"),
            knowledge=_text(row[knowledge_column], f"{where} {knowledge_column}"),
            consistent=label.lower() in positive, label=label,
            subset=str(row[subset_column]) if subset_column else "all",
            dialogue=str(row[dialogue_column]) if dialogue_column else None,
            history=_text(row[history_column], where) if history_column and row[history_column] else None,
            split=str(row[split_column]).strip().lower() if split_column else None,
            extra_scores=scores,
        ))
    _skip_blank_lines(log, path, input_format)
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


# -- stress pairs (q2 perturb) -------------------------------------------------------------------------------------
_STRESS_FIELDS = ("method", "original_response", "original_knowledge", "perturbed_response", "perturbed_knowledge")


def load_stress(path: str | Path) -> MetaEvalData:
    """Stress pairs as ``q2 perturb`` writes them: JSONL with ``method``, ``original_response``,
    ``original_knowledge``, ``perturbed_response``, ``perturbed_knowledge`` and optionally ``id``, ``source_id`` and
    ``expected_label`` (a BEGIN label).

    Each original becomes one consistent example (``original:<source_id>``, subset ``original``), shared by its
    pairs; each perturbation an inconsistent example (the pair id, subset = the method, label = the expected label).
    """
    path = Path(path)
    examples: list[Example] = []
    pairs: list[PerturbedPair] = []
    originals: dict[str, tuple[str, str]] = {}
    for n, obj in _json_objects(path, "stress pairs"):
        where = f"{path} line {n}"
        missing = [f for f in _STRESS_FIELDS if f not in obj]
        if missing:
            raise DataFormatError(f"{where}: no field(s) {missing}; a stress-pair file (from `q2 perturb`) has "
                                  f"{list(_STRESS_FIELDS)}; its fields are {sorted(obj)}")
        expected = obj.get("expected_label")
        if expected is not None and expected not in BEGIN_LABELS:
            raise DataFormatError(f"{where}: expected_label {expected!r} is not one of {list(BEGIN_LABELS)}")
        method = str(obj["method"])
        source = str(obj.get("source_id", f"line{n}"))
        texts = tuple(_text(obj[f], f"{where} {f}") for f in _STRESS_FIELDS[1:])
        oid = f"original:{source}"
        if oid not in originals:
            originals[oid] = texts[:2]
            examples.append(Example(id=oid, response=texts[0], knowledge=texts[1], consistent=True, label="original",
                                    subset="original"))
        elif originals[oid] != texts[:2]:
            raise DataFormatError(f"{where}: source_id {source!r} names two different originals")
        pid = str(obj.get("id", f"{source}:{method}"))
        examples.append(Example(id=pid, response=texts[2], knowledge=texts[3], consistent=False,
                                label=expected or "perturbed", subset=method))
        pairs.append(PerturbedPair(pid, method, oid, pid, expected))
    if not pairs:
        raise DataFormatError(f"{path} holds no stress pairs")
    try:
        return MetaEvalData(name="stress", source=str(path), examples=examples, pairs=pairs,
                            label_scheme="originals consistent, perturbations inconsistent (subset = method)")
    except ValueError as e:  # duplicate ids
        raise DataFormatError(f"{path}: {e}") from None


# -- LLM-AggreFact, RAGTruth, HalluDial -----------------------------------------------------------------------------
_AGGREFACT_COLUMNS = ("dataset", "doc", "claim", "label")
_BINARY = {"1": True, "0": False, "true": True, "false": False, "1.0": True, "0.0": False}


def _split_files(path: Path, what: str) -> list[tuple[Optional[str], Path]]:
    """``[(split, file)]``: the file itself (split from its rows), or a folder's ``dev.*`` and ``test.*`` files."""
    if path.is_file():
        return [(None, path)]
    if not path.is_dir():
        raise DataFormatError(f"No {what} file or folder {path}")
    found = [(split, f) for split in ("dev", "test") for f in sorted(path.glob(f"{split}.*"))
             if f.suffix in (".jsonl", ".json", ".csv", ".tsv")]
    if not found:
        raise DataFormatError(f"{path} holds no dev.jsonl / test.jsonl (or .csv / .tsv) of {what}; export the "
                              f"splits with datasets: load_dataset(...)['test'].to_json('test.jsonl')")
    return found


def load_llm_aggrefact(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """LLM-AggreFact (Tang et al. 2024): rows with ``dataset``, ``doc`` (the knowledge), ``claim`` (the response)
    and ``label`` (1 supported = consistent, 0 not), as its published splits hold them; ``path`` is one exported
    split (JSONL / CSV / TSV, with an optional ``split`` column) or a folder holding ``dev.*`` and ``test.*``.

    The subset is the row's ``dataset``, so the ``benchmark`` experiment gives balanced accuracy per data set at a
    threshold tuned on its dev rows. Ids are ``aggrefact:<split>:<row>``. Blank rows, rows with an empty doc or
    claim, rows without one of the four fields and rows whose label is not 0 / 1 (after ``labels.label_map``) are
    left out and listed.
    """
    root = Path(path)
    examples: list[Example] = []
    skipped: list[SkippedRow] = []
    notes: list[str] = []
    for split, file in _split_files(root, "LLM-AggreFact"):
        if not file.read_bytes()[:4096].strip():
            raise DataFormatError(f"{file} is empty")
        log = _Rows(file, labels, ["1", "0"])
        for i, row in enumerate(read_rows(file)):
            where = f"{file.name} row {i}"
            if "__error__" in row:
                log.skip(where, "unreadable row", str(row["__error__"]))
                continue
            if _blank(row):
                log.skip(where, "blank row")
                continue
            missing = [c for c in _AGGREFACT_COLUMNS if c not in row]
            if missing:
                log.skip(where, "malformed row", f"no field(s) {missing}; LLM-AggreFact rows have "
                                                 f"{list(_AGGREFACT_COLUMNS)}")
                continue
            consistent = _BINARY.get(_label_key(labels.mapped(str(row["label"]))))
            if consistent is None:
                log.skip(where, "unknown label", str(row["label"]))
                continue
            if not log.texts(where, str(row["claim"] or ""), str(row["doc"] or "")):
                continue
            part = split or (str(row["split"]).strip().lower() if row.get("split") else None)
            examples.append(Example(
                id=f"aggrefact:{part or file.stem}:{i}", response=str(row["claim"]), knowledge=str(row["doc"]),
                consistent=consistent, label="supported" if consistent else "unsupported",
                subset=str(row["dataset"]), split=part))
        _skip_blank_lines(log, file, prefix=f"{file.name} ")
        skipped += log.skipped
        notes += log.notes()
    if not examples:
        raise DataFormatError(f"{root} holds no usable row ({len(skipped)} left out"
                              + (f", e.g. {skipped[0].describe()})" if skipped else ")"))
    return MetaEvalData(name="llm-aggrefact", source=str(root), examples=examples, skipped=skipped, notes=notes,
                        benchmark="LLM-AggreFact", experiments=("response", "subsets", "benchmark"),
                        label_scheme="label 1 (supported) = consistent; 0 = inconsistent")


def _ragtruth_knowledge(info: Any) -> tuple[str, Optional[str]]:
    """The knowledge and history of a RAGTruth ``source_info``: a summary's article; a QA item's passages (its
    question the history); a data-to-text item's record as JSON."""
    if isinstance(info, str):
        return info, None
    if isinstance(info, dict) and isinstance(info.get("passages"), str):
        question = info.get("question")
        return info["passages"], question if isinstance(question, str) else None
    return json.dumps(info, ensure_ascii=False, sort_keys=True), None


def load_ragtruth(path: str | Path) -> MetaEvalData:
    """RAGTruth (Niu et al. 2024) at the response level: ``path`` is the folder holding its ``response.jsonl``
    (``id``, ``source_id``, ``model``, ``labels``: the hallucinated spans, ``split``: train / test, ``quality``,
    ``response``) and ``source_info.jsonl`` (``source_id``, ``task_type``, ``source_info``).

    A response is consistent when it has no hallucinated span. The knowledge is the source (a QA item's passages,
    its question as history; a data-to-text record as JSON); the subset is the task type; the ``train`` split is
    the dev split the ``benchmark`` experiment tunes thresholds on. Responses whose ``labels`` is not a list or
    whose source is missing are left out and listed (RAGTruth's labels are spans, not values: no label map).
    """
    folder = Path(path)
    if not (folder / "response.jsonl").is_file() or not (folder / "source_info.jsonl").is_file():
        raise DataFormatError(f"The ragtruth loader reads the RAGTruth folder holding response.jsonl and "
                              f"source_info.jsonl; {folder} does not hold both")
    sources: dict[str, dict[str, Any]] = {}
    for n, obj in _json_objects(folder / "source_info.jsonl", "RAGTruth source_info"):
        sources[str(_field(obj, ("source_id",), f"source_info.jsonl line {n}"))] = obj
    log = _Rows(folder / "response.jsonl", LabelOptions())
    examples = []
    quality: Counter = Counter()
    for n, obj in _json_objects(folder / "response.jsonl", "RAGTruth response", log):
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
            split="dev" if split == "train" else split or None))
    log.check(examples)
    issues = {k: v for k, v in quality.items() if k != "good"}
    notes = ([f"kept {sum(issues.values())} responses with quality issues {issues} (RAGTruth's 'quality')"]
             if issues else []) + log.notes()
    return MetaEvalData(name="ragtruth", source=str(folder), examples=examples, skipped=log.skipped,
                        notes=notes, benchmark="RAGTruth", experiments=("response", "subsets", "benchmark"),
                        label_scheme="no hallucinated span = consistent; any span = inconsistent (response level)")


def _halludial_example(n: int, obj: dict[str, Any], log: "_Rows") -> Optional[Example]:
    where = f"record {n}"
    target = str(_field(obj, ("target",), f"{log.path} {where}"))
    first = target.strip().split(maxsplit=1)[0].strip(".,:;!").lower() if target.strip() else ""
    verdict = {"yes": False, "no": True}.get(_label_key(log.labels.mapped(first)))
    if verdict is None:
        log.skip(where, "unknown label", target[:60])
        return None
    response = _text(_field(obj, ("response",), f"{log.path} {where}"), where)
    knowledge = _text(_field(obj, ("knowledge",), f"{log.path} {where}"), where)
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
    log = _Rows(path, labels, ["Yes", "No"])
    examples = []
    pool: dict[str, list[str]] = {}
    for n, obj in _json_objects(path, "HalluDial", log):
        ex = log.guarded(f"record {n}", _halludial_example, n, obj)
        if ex is None:
            continue
        examples.append(ex)
        if ex.dialogue is not None:
            pool.setdefault(ex.dialogue, []).append(ex.knowledge)
    log.check(examples)
    return MetaEvalData(name="halludial", source=str(path), examples=examples, skipped=log.skipped,
                        notes=log.notes(), benchmark="HalluDial",
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        label_scheme="target 'No' (no hallucination) = consistent; 'Yes' = inconsistent")


LOADERS: dict[str, Callable[..., MetaEvalData]] = {
    "wow": load_wow,
    "begin": load_begin,
    "dialfact": load_dialfact,
    "dnli": load_dnli,
    "faithdial": load_faithdial,
    "usr": load_usr,
    "table": load_table,
    "stress": load_stress,
    "llm-aggrefact": load_llm_aggrefact,
    "ragtruth": load_ragtruth,
    "halludial": load_halludial,
}


#: the loaders that read label values, and so take ``labels=LabelOptions(...)``
LABELLED = ("begin", "dialfact", "dnli", "faithdial", "table", "llm-aggrefact", "halludial")


def load_dataset(kind: str, path: str | Path, **options: Any) -> MetaEvalData:
    """Load ``path`` with the loader named ``kind`` (one of :data:`LOADERS`). ``labels`` (a :class:`LabelOptions`)
    is refused by the loaders whose labels are fixed (wow, usr, stress) unless it is the default."""
    if kind not in LOADERS:
        raise ValueError(f"Unknown data set kind {kind!r}; expected one of {sorted(LOADERS)}")
    if "labels" in options and kind not in LABELLED:
        if options.pop("labels") != LabelOptions():
            raise ValueError(f"label_map / drop_unknown_labels apply to the data sets with label values "
                             f"{list(LABELLED)}, not to {kind!r}")
    return LOADERS[kind](path, **options)
