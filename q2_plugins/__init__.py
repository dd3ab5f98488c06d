"""Q²: question-generation / question-answering factual consistency for knowledge-grounded dialogue.

Nothing heavy is imported here: torch, transformers and spaCy load when a scorer first needs them.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Q2Config",
    "Q2Scorer",
    "Q2Result",
    "ResponseResult",
    "QuestionResult",
    "Q2Stats",
    "Signature",
    "score",
    "METRIC_INFO",
    "SettingError",
    "ModelLoadError",
]

_LAZY = {
    "Q2Config": "metric.config",
    "Q2Scorer": "scorer",
    "score": "scorer",
    "Q2Result": "metric.results",
    "ResponseResult": "metric.results",
    "QuestionResult": "metric.results",
    "Q2Stats": "metric.results",
    "Signature": "metric.signature",
    "METRIC_INFO": "metric.names",
    "SettingError": "metric.errors",
    "ModelLoadError": "metric.errors",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'q2_plugins' has no attribute {name!r}")
