"""The grounded rows a training recipe starts from (``q2 perturb --recipe``): a Q² WoW folder's consistent
responses, BEGIN's entailed (v1) or fully attributable (v2) ones, the wizard turns of ParlAI's
``wizard_of_wikipedia`` JSON, or every row of a table; the registered data sets are read by their loaders
(:data:`~q2_plugins.datasets.registry.DATASETS`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

from q2_plugins.datasets.registry import DATASETS
from q2_plugins.datasets.textcheck import cells
from q2_plugins.datasets.types import SourceRow
from q2_plugins.io.inputs import InputFormatError, read_checked_rows
from q2_plugins.metric.errors import SettingError


class SourceOptions(Protocol):
    """How an input is read (:class:`q2_plugins.training.perturb.PerturbOptions` is one): its reader (``dataset``), and
    for a table its format, the columns that hold each text and the ``keep`` filter."""

    @property
    def dataset(self) -> str: ...

    @property
    def input_format(self) -> Optional[str]: ...

    @property
    def response_column(self) -> str: ...

    @property
    def knowledge_column(self) -> str: ...

    @property
    def id_column(self) -> Optional[str]: ...

    @property
    def topic_column(self) -> Optional[str]: ...

    @property
    def previous_column(self) -> Optional[str]: ...

    @property
    def keep(self) -> Optional[str]: ...

__all__ = ["DatasetError", "SourceRow", "SourceOptions", "input_kind", "keep_filter", "read_sources",
           "table_rows"]


class DatasetError(InputFormatError, SettingError):
    """An input that the ``dataset`` setting's reader cannot read."""


def keep_filter(spec: Optional[str]) -> Optional[tuple[str, set[str]]]:
    """``COLUMN=VALUE[,VALUE...]`` (the ``keep`` setting) as ``(column, values)``; None for none."""
    if not spec:
        return None
    column, sep, values = spec.partition("=")
    if not sep or not column or not values:
        raise SettingError("keep", f"expects COLUMN=VALUE[,VALUE...], got {spec!r}")
    return column, {v.strip() for v in values.split(",")}


_PREVIOUS = ("previous turn", "previous_turn", "message", "history")


def input_kind(path: Path, dataset: str) -> str:
    """The reader of a recipe input: ``dataset`` itself, or for ``auto`` what the path looks like (a folder: the
    Q² WoW sets; a JSON list: ParlAI's ``wizard_of_wikipedia``; a TSV with BEGIN's columns: BEGIN; else a table)."""
    if dataset != "auto":
        return dataset
    if path.is_dir():
        return "wow"
    if path.suffix.lower() == ".json":
        with path.open(encoding="utf-8") as f:
            if f.read(4096).lstrip().startswith("["):  # a JSON list: ParlAI's dialogues (a table is JSON lines)
                return "wow-json"
    if path.suffix.lower() == ".tsv":
        with path.open(encoding="utf-8") as f:
            header = f.readline().rstrip("\n").split("\t")
        if "response" in header and ("gold label" in header or "begin_label" in header):
            return "begin"
    return "table"


def table_rows(path: str | Path, input_format: Optional[str], fields: Sequence[tuple[str, Optional[str]]],
               keep: Optional[str]) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any], int]:
    """The ``(row number, row)`` pairs of a JSONL / CSV / TSV table that ``keep`` (``COLUMN=VALUE[,VALUE...]``) lets
    through, its first readable row (whose fields name the columns) and how many rows were read. ``fields``: the
    (setting, column) pairs the first readable row must have. An unreadable record (``{"__error__": why}``) or a
    later row without a field is kept, for the recipes and stress pairs to skip and count
    (:func:`q2_plugins.datasets.textcheck.cells`), never dropped."""

    kept = keep_filter(keep)
    asked = [*fields, ("keep", kept[0] if kept else None)]
    read = list(read_checked_rows(str(path), input_format, asked, keep_bad_rows=True))
    rows = [(n, r) for n, r in read if not kept or "__error__" in r or str(r.get(kept[0])).strip() in kept[1]]
    return rows, next((r for _, r in rows if "__error__" not in r), {}), len(read)


def _table_rows(path: Path, options: SourceOptions) -> list[SourceRow]:
    fields = [("response_column", options.response_column), ("knowledge_column", options.knowledge_column),
              ("id_column", options.id_column), ("topic_column", options.topic_column),
              ("previous_column", options.previous_column)]
    rows, first, _ = table_rows(path, options.input_format, fields, options.keep)
    previous = options.previous_column or next((c for c in _PREVIOUS if c in first), None)
    topic = options.topic_column or ("topic" if "topic" in first else None)

    def value(r: dict[str, Any], column: str) -> Any:
        if "__error__" in r:
            return cells(r, column)[0]
        v = r.get(column)
        return "" if v is None and column in r else v  # an empty cell is empty; any other value is kept as read

    def label(r: dict[str, Any]) -> Optional[str]:
        return str(r[topic]) if topic and "__error__" not in r and r.get(topic) not in (None, "") else None

    return [SourceRow(id=str(r[options.id_column]) if options.id_column and options.id_column in r else str(n),
                      response=value(r, options.response_column), knowledge=value(r, options.knowledge_column),
                      previous=value(r, previous) if previous and "__error__" not in r else None,
                      dialogue=label(r), topic=label(r))
            for n, r in rows]


_NO_KNOWLEDGE = "no_passages_used"


def _wow_json_rows(path: Path) -> list[SourceRow]:
    """Every wizard turn of ParlAI's ``wizard_of_wikipedia`` JSON (a list of dialogues, each a ``dialog`` list of
    turns): the wizard's text, the sentence of its ``checked_sentence`` (empty when none or ``no_passages_used``, so
    the recipe counts it as skipped) and the previous turn's text (the chosen topic for an opening turn)."""
    import json

    with path.open(encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise DatasetError("dataset", f"{path}: not JSON ({e}); a JSONL table is dataset table") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("dialog"), list)
                                              for d in data):
        raise InputFormatError(f"{path}: not a list of dialogues with a 'dialog' list (ParlAI's wizard_of_wikipedia"
                               f" JSON); name another dataset")
    rows: list[SourceRow] = []
    for d, dialogue in enumerate(data):
        previous = str(dialogue.get("chosen_topic") or "") or None
        for t, turn in enumerate(dialogue["dialog"]):
            if not isinstance(turn, dict) or "speaker" not in turn or "text" not in turn:
                raise InputFormatError(f"{path}: dialogue {d} turn {t} has no 'speaker' / 'text'")
            if "Wizard" in str(turn["speaker"]):
                chosen = turn.get("checked_sentence") or {}
                sentence = str(next(iter(chosen.values()), "")) if isinstance(chosen, dict) else ""
                rows.append(SourceRow(id=f"{d}:{t}", response=turn["text"], previous=previous, dialogue=str(d),
                                      knowledge="" if sentence == _NO_KNOWLEDGE else sentence))
            previous = str(turn["text"])
    return rows


def read_sources(path: str, options: SourceOptions) -> list[SourceRow]:
    """The grounded rows of one input: a Q² WoW folder's consistent responses, BEGIN's entailed (v1) or fully
    attributable (v2) ones, the wizard turns of ParlAI's ``wizard_of_wikipedia`` JSON, or every row of a table
    (``options.keep`` filters)."""
    where = Path(path)
    kind = input_kind(where, options.dataset)
    if kind == "table":
        rows = _table_rows(where, options)
    elif kind == "wow-json":
        rows = _wow_json_rows(where)
    else:
        data = DATASETS[kind].recipe_input(where)  # type: ignore[misc]
        topics = _wow_topics(where) if kind == "wow" else {}
        source = _begin_source(where) if kind == "begin" else None
        rows = [SourceRow(id=ex.id, response=ex.response, knowledge=ex.knowledge, previous=ex.history,
                          dialogue=ex.dialogue, topic=topics.get((ex.response, ex.knowledge), source))
                for ex in data.examples if ex.consistent]
    name = where.name
    return [SourceRow(f"{name}/{r.id}", r.response, r.knowledge, r.previous, r.dialogue and f"{name}/{r.dialogue}",
                      f"{name} ({kind})", r.topic) for r in rows]


#: BEGIN's knowledge sources, by the name of a BEGIN file (v2: begin_dev_<source>.tsv in a folder of that source)
_BEGIN_SOURCES = {"wow": "Wizard of Wikipedia", "cmu": "CMU-DoG", "cmu-dog": "CMU-DoG", "tc": "Topical-Chat",
                  "topicalchat": "Topical-Chat"}


def _begin_source(path: Path) -> str:
    """The knowledge source of a BEGIN file, BEGIN's topic for its off-topic responses: v2 names it in the file
    (``begin_dev_tc.tsv``) and its folder; v1's responses are all Wizard of Wikipedia's."""
    for name in (path.stem.rsplit("_", 1)[-1], path.parent.name):
        if name.lower() in _BEGIN_SOURCES:
            return f"{_BEGIN_SOURCES[name.lower()]} (BEGIN's knowledge source)"
    return "Wizard of Wikipedia (BEGIN's knowledge source)"


def _wow_topics(folder: Path) -> dict[tuple[str, str], str]:
    """The ``topic`` of each (response, knowledge) of a Q² WoW folder's CSV files."""
    import csv

    out: dict[tuple[str, str], str] = {}
    for path in sorted(folder.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row.get("topic"):
                    out.setdefault((row.get("response", ""), row.get("knowledge", "")), row["topic"])
    return out
