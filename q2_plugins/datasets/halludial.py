"""HalluDial (``--dataset halludial``)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
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


def _halludial_example(n: int, obj: dict[str, Any], prefix: str, quotes: Counter, log: "RowLog"
                       ) -> Optional[Example]:
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
    located = None if verdict else locate_quotes(response, target, knowledge)
    if located is not None:
        quotes.update(in_response=located.in_response, in_knowledge=located.in_knowledge, nowhere=located.nowhere,
                      unlocated=located.spans is None)
    stem = log.path.stem.lower()
    return Example(
        id=f"halludial:{prefix}{n}", response=response, knowledge=knowledge, consistent=verdict,
        label="no hallucination" if verdict else "hallucination", subset=log.path.stem,
        dialogue=f"{prefix}{obj.get('dialogue_id')}" if obj.get("dialogue_id") is not None else None,
        history=history if isinstance(history, str) and history else None,
        split="dev" if "train" in stem or "dev" in stem else "test" if "test" in stem else None,
        spans=() if located is None else located.spans)


#: a quoted phrase of a rationale: "..." or “...”
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')
#: what a rationale keeps inside its quotes that the response need not have: the sentence's own punctuation
_TRIM = " \t\n.,;:!?…"


def _whole_words(phrase: str) -> re.Pattern:
    """``phrase`` as whole words (no letter or digit just before or after it), any run of spaces, case aside."""
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


@dataclass
class QuotedPhrases:
    """What a rationale's quoted phrases gave: the response's ``spans`` (None when no phrase was found in it) and
    the phrases quoting the knowledge (``in_knowledge``: the facts, no span) or found nowhere."""

    spans: Optional[tuple[tuple[int, int], ...]]
    in_response: int = 0
    in_knowledge: int = 0
    nowhere: int = 0


def locate_quotes(response: str, target: str, knowledge: str = "") -> QuotedPhrases:
    """Each phrase quoted in HalluDial's rationale ("The hallucination lies in \"80 metres.\"") located in the
    response: its closing punctuation trimmed (the rationale's sentence may end inside the quotes), as whole words
    ("he" is not in "them"), case aside, its first occurrence. A phrase found in the knowledge and not in the
    response, or in both where the rationale introduces it as the knowledge's ("the knowledge states \"...\""), is
    the rationale quoting the facts: no span of the response, counted apart."""
    out: set[tuple[int, int]] = set()
    found = QuotedPhrases(None)
    for m in _QUOTED.finditer(target):
        phrase = next(g for g in m.groups() if g is not None).strip(_TRIM)
        if not phrase:
            continue
        hit = _whole_words(phrase).search(response)
        quoting_knowledge = "knowledge" in target[max(0, m.start() - 60):m.start()].lower()
        if hit is not None and quoting_knowledge and knowledge and _whole_words(phrase).search(knowledge):
            found.in_knowledge += 1  # "the knowledge states \"built in 1871\"": the facts, though the response has them
        elif hit is not None:
            out.add(hit.span())
            found.in_response += 1
        elif knowledge and _whole_words(phrase).search(knowledge):
            found.in_knowledge += 1
        else:
            found.nowhere += 1
    found.spans = tuple(sorted(out)) or None
    return found


def quoted_spans(response: str, target: str, knowledge: str = "") -> Optional[tuple[tuple[int, int], ...]]:
    """The hallucinated characters of a response that HalluDial's rationale names (:func:`locate_quotes`); None
    when no quoted phrase is in the response (HalluDial locates the hallucination in words, not offsets)."""
    return locate_quotes(response, target, knowledge).spans


#: the released layout's folders, under the folder given (``HalluDial/``, ``HalluDial/data/``)
_RELEASED = ("data/spontaneous", "data/induced", "spontaneous", "induced")


def halludial_files(path: Path) -> list[Path]:
    """The HalluDial files ``path`` names: the file itself; a folder's ``.json`` / ``.jsonl`` files; or, for a folder
    holding none, those of the released layout's scenario folders (``HalluDial/`` holding ``data/spontaneous`` and
    ``data/induced``). A folder holding neither is refused, naming the folder to pass."""
    if not path.is_dir():
        return [path]
    found = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
    if found:
        return found
    folders = [path / sub for sub in _RELEASED if (path / sub).is_dir()]
    found = sorted(p for f in folders for p in f.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
    if not found:
        raise DataFormatError(f"The halludial loader reads a HalluDial .json / .jsonl file, a folder of them, or the "
                              f"released folder (HalluDial/ holding data/spontaneous and data/induced); {path} holds "
                              f"none: pass the HalluDial folder, or HalluDial/data/spontaneous, or one file")
    return found


def load_halludial(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """HalluDial (Luo et al. 2024): one JSON list (or JSONL) of turns with ``dialogue_id``, ``knowledge``,
    ``dialogue_history``, ``turn``, ``response`` and ``target``, whose first word says whether the response
    hallucinates (``Yes. ...`` inconsistent, ``No. ...`` consistent; the rest is the rationale).

    ``path`` may also be a folder of such files (e.g. HalluDial's train and test files: the train file's records
    are the dev split the ``spans`` experiment chooses its thresholds on), or the released folder (``HalluDial/``,
    whose ``data/spontaneous`` and ``data/induced`` hold them: :func:`halludial_files`); their ids and dialogues
    then begin with the file's stem (``halludial:spontaneous_test:3``).

    Ids are ``halludial:<position>``; the dialogue is ``dialogue_id``; the subset the file's stem (e.g.
    ``spontaneous_test``), and a stem holding ``train`` or ``dev`` makes the records the dev split (``test``: the
    test split). A hallucinated response's spans are the phrases its target quotes, found in the response
    (:func:`locate_quotes`; the notes count those found only in the knowledge, or nowhere). Records
    whose target starts with neither (after ``labels.label_map``, applied to the
    first word), records with an empty response or knowledge and records without a field are left out and listed.
    """
    path = Path(path)
    files = halludial_files(path)
    examples: list[Example] = []
    skipped: list = []
    notes: list[str] = []
    pool: dict[str, list[str]] = {}
    quotes: Counter = Counter()
    for file in files:
        log = RowLog(file, labels, ["Yes", "No"])
        prefix = f"{file.stem}:" if path.is_dir() else ""  # (files of a folder: ids and dialogues apart)
        found = []
        for n, obj in json_objects(file, "HalluDial", log):
            ex = log.guarded(f"record {n}", _halludial_example, n, obj, prefix, quotes)
            if ex is None:
                continue
            found.append(ex)
            if ex.dialogue is not None:
                pool.setdefault(ex.dialogue, []).append(ex.knowledge)
        log.check(found)
        examples += found
        skipped += log.skipped
        notes += log.notes()
    if quotes:
        notes.insert(0, f"quoted phrases of the rationales: {quotes['in_response']} located in the response, "
                        f"{quotes['in_knowledge']} quoting the knowledge (no response span), "
                        f"{quotes['nowhere']} found in neither; {quotes['unlocated']} hallucinated responses have no "
                        f"located span (example level only)")
    return MetaEvalData(name="halludial", source=str(path), examples=examples, skipped=skipped,
                        notes=notes, benchmark=BENCHMARK,
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        label_scheme="target 'No' (no hallucination) = consistent; 'Yes' = inconsistent")
