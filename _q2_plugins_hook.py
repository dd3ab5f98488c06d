"""Start-up hook of q2-plugins, run by the one line of ``q2_plugins_hook.pth`` (Python's ``site`` executes ``.pth``
lines that start with ``import``).

:func:`install` only puts a finder at the front of ``sys.meta_path``; the finder ignores every import except
``evaluate.loading``, and after that module has run it calls ``q2_plugins.hf_evaluate.patch_loading`` so that
``evaluate.load("q2")`` finds the module shipped with q2-plugins. Nothing else is imported, so a Python process that
never imports ``evaluate`` pays one string comparison per import. Errors never propagate: start-up and
``import evaluate`` cannot fail because of this file. ``Q2_PLUGINS_EVALUATE_HOOK=0`` disables it.
"""

from __future__ import annotations

import os
import sys

__all__ = ["install"]

_TARGET = "evaluate.loading"


def _patch(module: object) -> None:
    try:
        from q2_plugins.hf_evaluate import patch_loading

        patch_loading(module)
    except Exception as e:  # never break `import evaluate`
        import warnings

        warnings.warn(f"q2-plugins could not register evaluate.load('q2'): {type(e).__name__}: {e}",
                      RuntimeWarning, stacklevel=2)


class _Loader:
    """Runs the real loader, then patches the module; everything else is delegated."""

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def create_module(self, spec: object) -> object:
        return self._loader.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: object) -> None:
        self._loader.exec_module(module)  # type: ignore[attr-defined]
        _patch(module)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


class _Finder:
    _busy = False

    @classmethod
    def find_spec(cls, fullname: str, path: object = None, target: object = None) -> object:
        if fullname != _TARGET or cls._busy:
            return None
        cls._busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is cls or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            if spec is not None and hasattr(getattr(spec, "loader", None), "exec_module"):
                spec.loader = _Loader(spec.loader)
            return spec
        except Exception:
            return None
        finally:
            cls._busy = False


def install() -> None:
    """Register the finder (or patch at once if ``evaluate.loading`` is already imported)."""
    try:
        if os.environ.get("Q2_PLUGINS_EVALUATE_HOOK", "1").strip().lower() in ("0", "false", "no", "off"):
            return
        if _TARGET in sys.modules:
            _patch(sys.modules[_TARGET])
        elif _Finder not in sys.meta_path:
            sys.meta_path.insert(0, _Finder)
    except Exception:  # pragma: no cover - never break interpreter start-up
        pass
