"""LLM-AggreFact (``--dataset llm-aggrefact``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from q2_plugins.datasets.common import (
    DataFormatError,
    LabelOptions,
    RowLog,
    blank_row,
    cell_text,
    label_key,
    skip_blank_lines,
)
from q2_plugins.datasets.types import Example, MetaEvalData, SkippedRow
from q2_plugins.io.inputs import read_rows

#: the published benchmark its data is (``MetaEvalData.benchmark``)
BENCHMARK = "LLM-AggreFact"

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
        log = RowLog(file, labels, ["1", "0"])
        for i, row in enumerate(read_rows(file)):
            where = f"{file.name} row {i}"
            if "__error__" in row:
                log.skip(where, "unreadable row", str(row["__error__"]))
                continue
            if blank_row(row):
                log.skip(where, "blank row")
                continue
            missing = [c for c in _AGGREFACT_COLUMNS if c not in row]
            if missing:
                log.skip(where, "malformed row", f"no field(s) {missing}; LLM-AggreFact rows have "
                                                 f"{list(_AGGREFACT_COLUMNS)}")
                continue
            consistent = _BINARY.get(label_key(labels.mapped(cell_text(row["label"]))))
            if consistent is None:
                log.unknown_label(where, row["label"])
                continue
            if not log.texts(where, str(row["claim"] or ""), str(row["doc"] or "")):
                continue
            part = split or (str(row["split"]).strip().lower() if row.get("split") else None)
            examples.append(Example(
                id=f"aggrefact:{part or file.stem}:{i}", response=str(row["claim"]), knowledge=str(row["doc"]),
                consistent=consistent, label="supported" if consistent else "unsupported",
                subset=str(row["dataset"]), split=part))
        skip_blank_lines(log, file, prefix=f"{file.name} ")
        skipped += log.skipped
        notes += log.notes()
    if not examples:
        raise DataFormatError(f"{root} holds no usable row ({len(skipped)} left out"
                              + (f", e.g. {skipped[0].describe()})" if skipped else ")"))
    return MetaEvalData(name="llm-aggrefact", source=str(root), examples=examples, skipped=skipped, notes=notes,
                        benchmark=BENCHMARK, experiments=("response", "subsets", "benchmark"),
                        label_scheme="label 1 (supported) = consistent; 0 = inconsistent")
