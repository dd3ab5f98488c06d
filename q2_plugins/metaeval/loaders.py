"""The data set loaders, by their former import path: they live in :mod:`q2_plugins.datasets` (one module per data
set family, and the registry ``q2 meta-eval --dataset`` reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable, Iterator

from ..datasets.begin import BEGIN2_LABELS, BEGIN_LABELS, load_begin
from ..datasets.common import DataFormatError, DataSettingError, LabelOptions, read_label_map
from ..datasets.dialfact import DIALFACT_LABELS, load_dialfact
from ..datasets.dnli import load_dnli
from ..datasets.faithdial import load_faithdial
from ..datasets.halludial import load_halludial
from ..datasets.llm_aggrefact import load_llm_aggrefact
from ..datasets.ragtruth import load_ragtruth
from ..datasets.registry import DATASETS, load_dataset
from ..datasets.stress import load_stress
from ..datasets.table import load_table
from ..datasets.types import MetaEvalData
from ..datasets.usr import USR_NO_FACT, load_usr
from ..datasets.wow import WOW_SUBSETS, load_wow

__all__ = [
    "DataFormatError",
    "DataSettingError",
    "LabelOptions",
    "read_label_map",
    "WOW_SUBSETS",
    "BEGIN_LABELS",
    "BEGIN2_LABELS",
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


class _Loaders(Mapping):
    """Name -> loader of every registered data set (a live view of :data:`q2_plugins.datasets.DATASETS`)."""

    def __getitem__(self, name: str) -> Callable[..., MetaEvalData]:
        return DATASETS[name].loader

    def __iter__(self) -> Iterator[str]:
        return iter(DATASETS)

    def __len__(self) -> int:
        return len(DATASETS)


LOADERS: Mapping[str, Callable[..., MetaEvalData]] = _Loaders()
