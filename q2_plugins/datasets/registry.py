"""The data sets ``q2 meta-eval --dataset`` and ``q2 perturb --recipe`` read: one :class:`Dataset` entry each.

Meta-eval's ``--dataset`` choices and help, its default ``--data``, the benchmark experiment's per-data-set table
and the recipes' input kinds derive from these entries. A new data set is one module with its loader (returning a
:class:`~q2_plugins.datasets.types.MetaEvalData`) and one :func:`register` call, here or in the code that uses it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from q2_plugins.datasets import (
    begin,
    dialfact,
    dnli,
    faithdial,
    halludial,
    llm_aggrefact,
    ragtruth,
    stress,
    table,
    usr,
    wow,
)
from q2_plugins.datasets.bundled import bundled_path
from q2_plugins.datasets.common import LabelOptions
from q2_plugins.datasets.types import MetaEvalData

__all__ = ["Dataset", "DATASETS", "register", "load_dataset", "labelled", "per_subset_benchmarks", "default_data",
           "recipe_inputs"]


@dataclass(frozen=True)
class Dataset:
    """One data set kind.

    ``loader(path, **options)`` reads it; ``labelled``: it reads label values, so it takes ``labels=LabelOptions``
    (label maps, unknown labels); ``help``: what ``--data`` must be, for ``q2 meta-eval --help``; ``benchmark``: the
    published benchmark its data is (``MetaEvalData.benchmark``) when the benchmark experiment reports balanced
    accuracy per subset (data set), tuned on its dev split; ``bundled``: the file or folder under
    ``q2_plugins/data`` read when no path is given; ``recipe_input``: how ``q2 perturb --recipe`` reads it (a
    function of the path whose consistent examples are the grounded rows), None when it is no recipe input."""

    name: str
    loader: Callable[..., MetaEvalData]
    help: str
    labelled: bool = False
    benchmark: Optional[str] = None
    bundled: Optional[str] = None
    recipe_input: Optional[Callable[[Path], MetaEvalData]] = None


#: every data set kind by name, in registration order
DATASETS: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    """Add ``dataset`` to :data:`DATASETS` (its name must be new) and return it."""
    if dataset.name in DATASETS:
        raise ValueError(f"a data set named {dataset.name!r} is registered already")
    DATASETS[dataset.name] = dataset
    return dataset


def labelled() -> tuple[str, ...]:
    """The data sets that read label values, and so take ``labels=LabelOptions(...)``."""
    return tuple(name for name, d in DATASETS.items() if d.labelled)


def per_subset_benchmarks() -> tuple[str, ...]:
    """The ``MetaEvalData.benchmark`` names the benchmark experiment reports per data set."""
    return tuple(d.benchmark for d in DATASETS.values() if d.benchmark)


def recipe_inputs() -> tuple[str, ...]:
    """The data sets ``q2 perturb --recipe`` reads grounded rows from."""
    return tuple(name for name, d in DATASETS.items() if d.recipe_input is not None)


def default_data(name: str) -> Optional[Path]:
    """The bundled copy of data set ``name`` read when no path is given, or None when none is bundled."""
    bundled = DATASETS[name].bundled
    return bundled_path(bundled) if bundled else None


def load_dataset(kind: str, path: str | Path, **options: Any) -> MetaEvalData:
    """Load ``path`` with the loader named ``kind`` (one of :data:`DATASETS`). ``labels`` (a :class:`LabelOptions`)
    is refused by the loaders whose labels are fixed (wow, usr, stress) unless it is the default."""
    if kind not in DATASETS:
        raise ValueError(f"Unknown data set kind {kind!r}; expected one of {sorted(DATASETS)}")
    if "labels" in options and kind not in labelled():
        if options.pop("labels") != LabelOptions():
            raise ValueError(f"label_map / drop_unknown_labels apply to the data sets with label values "
                             f"{list(labelled())}, not to {kind!r}")
    return DATASETS[kind].loader(path, **options)


register(Dataset("wow", wow.load_wow, "the Q2 paper's WoW annotation folder",
                 bundled="q2_wow", recipe_input=functools.partial(wow.load_wow, cross_annotation=False)))
register(Dataset("begin", begin.load_begin, "BEGIN v1 or v2 TSV", labelled=True,
                 bundled="begin_dev/dev_05_24_21.tsv", recipe_input=begin.load_begin))
register(Dataset("dialfact", dialfact.load_dialfact, "JSONL", labelled=True))
register(Dataset("dnli", dnli.load_dnli, "JSONL", labelled=True))
register(Dataset("faithdial", faithdial.load_faithdial, "a FaithDial data-audit CSV (model or gold audit)",
                 labelled=True, bundled="faithdial_audit_ctrl_wow/ctrl_processed_wow.csv"))
register(Dataset("usr", usr.load_usr, "USR's Topical-Chat tc_usr_data.json"))
register(Dataset("table", table.load_table, "any CSV / TSV / JSONL with the columns named below", labelled=True))
register(Dataset("stress", stress.load_stress, "stress pairs written by q2 perturb"))
register(Dataset("llm-aggrefact", llm_aggrefact.load_llm_aggrefact, "a folder with dev / test files (or one file)",
                 labelled=True, benchmark=llm_aggrefact.BENCHMARK))
register(Dataset("ragtruth", ragtruth.load_ragtruth, "the folder with response.jsonl and source_info.jsonl",
                 benchmark=ragtruth.BENCHMARK))
register(Dataset("halludial", halludial.load_halludial, "a HalluDial JSON file", labelled=True,
                 benchmark=halludial.BENCHMARK))
