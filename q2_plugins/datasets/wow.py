"""The Q² paper's Wizard of Wikipedia annotations (``--dataset wow``)."""

from __future__ import annotations

from pathlib import Path

from q2_plugins.datasets.common import DataFormatError, csv_rows
from q2_plugins.datasets.types import Example, MetaEvalData, PairedContext

WOW_SUBSETS = ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent")
_WOW_COLUMNS = ("episode_idx", "round", "response", "knowledge")
_CROSS_COLUMNS = ("episode_idx", "round", "knowledge", "dodeca_response", "memnet_response", "dodeca_label",
                  "memnet_label")


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
        columns, rows = csv_rows(folder / f"{stem}.csv", _WOW_COLUMNS, "Q² WoW annotation")
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
    columns, rows = csv_rows(cross_file, _CROSS_COLUMNS, "Q² cross annotation")
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
