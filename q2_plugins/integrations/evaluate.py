"""Resolve the bare name ``evaluate.load("q2")`` to the Q² module shipped with this package, with no network.

``evaluate`` looks a bare name up on the Hugging Face Hub (a network request, or a "latest cached version" warning
offline) and has no plugin mechanism. So this package wraps ``evaluate.loading.evaluation_module_factory``: the
name ``q2`` (module type unset or ``metric``) becomes the path of the shipped module directory, which ``evaluate``
then loads as any local module. Every other name goes to ``evaluate`` untouched, and a directory ``./q2/q2.py``
still wins, as in ``evaluate`` itself.

The wrap is applied by :func:`patch_loading` when ``evaluate.loading`` is imported, by the import hook of
q2-plugins (``_q2_plugins_hook``): its start-up file ``q2_plugins_hook.pth`` comes with the wheel, and
``q2 hooks install`` writes it into any environment (editable installs included; ``scripts/setup.sh`` does).
:func:`enable` applies it to the running interpreter only. ``Q2_PLUGINS_EVALUATE_HOOK=0`` turns the hook off.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

__all__ = ["METRIC_NAME", "metric_path", "patch_loading", "enable"]

METRIC_NAME = "q2"


def metric_path() -> str:
    """The directory of the ``evaluate`` module (``hf_evaluate_metric/q2``: in the checkout and in site-packages)."""
    return str(Path(__file__).resolve().parents[2] / "hf_evaluate_metric" / METRIC_NAME)


def patch_loading(loading: Any) -> None:
    """Make ``loading.evaluation_module_factory`` resolve ``q2`` to :func:`metric_path` (idempotent)."""
    original = loading.evaluation_module_factory
    if getattr(original, "__q2_plugins__", False):
        return

    @functools.wraps(original)
    def evaluation_module_factory(path: str, module_type: Any = None, *args: Any, **kwargs: Any) -> Any:
        if (path == METRIC_NAME and module_type in (None, "metric")
                and not os.path.isfile(os.path.join(path, f"{METRIC_NAME}.py"))):
            shipped = metric_path()
            if os.path.isfile(os.path.join(shipped, f"{METRIC_NAME}.py")):
                path = shipped
        return original(path, module_type, *args, **kwargs)

    evaluation_module_factory.__q2_plugins__ = True  # type: ignore[attr-defined]
    evaluation_module_factory.__q2_plugins_original__ = original  # type: ignore[attr-defined]
    loading.evaluation_module_factory = evaluation_module_factory


def enable() -> None:
    """Patch ``evaluate`` in this interpreter now (imports it), without the start-up file."""
    import evaluate.loading

    patch_loading(evaluate.loading)
