"""Annotated data sets: one module per data set family, a registry (:mod:`.registry`) of the kinds
``q2 meta-eval --dataset`` and ``q2 perturb --recipe`` read, and the reference data bundled with the package
(``q2_plugins/data``). Only the standard library is used (no pandas)."""

from __future__ import annotations

from q2_plugins.datasets.bundled import DATA_DIR, bundled_path
from q2_plugins.datasets.registry import DATASETS, Dataset, default_data, load_dataset, register

__all__ = ["DATA_DIR", "bundled_path", "Dataset", "DATASETS", "register", "load_dataset", "default_data"]
