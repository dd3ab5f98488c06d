"""Optional dependencies of the meta-evaluation, imported when used and failing with the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]

# import name -> (distribution on PyPI, extra of q2-plugins that installs it)
_PACKAGES = {
    "sklearn": ("scikit-learn", "metaeval"),
    "scipy": ("scipy", "metaeval"),
    "sacrebleu": ("sacrebleu", "metaeval"),
    "matplotlib": ("matplotlib", "metaeval"),
    "nltk": ("nltk", "metaeval"),
    "bert_score": ("bert-score", "bertscore"),
}


def require(module: str) -> ModuleType:
    """Import ``module`` (e.g. ``"sklearn.metrics"``); a missing package raises naming the extra that provides it."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] != top:
            raise
        dist, extra = _PACKAGES.get(top, (top, "metaeval"))
        raise ModuleNotFoundError(
            f"The meta-evaluation needs {dist} (import {top!r}), which is in the '{extra}' extra: "
            f"pip install 'q2-plugins[{extra}]'"
        ) from e
