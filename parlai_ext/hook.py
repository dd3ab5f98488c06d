"""How q2-plugins gets into ParlAI, which has no plugin entry point and ignores metric names it does not know.

``python -m parlai_ext.hook install`` writes ``q2_plugins_parlai.pth`` into the interpreter's site-packages.
Python's ``site`` runs that file's one line at start-up; the line puts a tiny finder (``_STUB`` below) first on
``sys.meta_path`` and imports nothing. On each later import the finder compares one string; when ``parlai`` itself
is imported it calls :func:`enable`, which registers a post-import hook for two ParlAI modules:

- ``parlai.core.params``: ``ParlaiParser.add_parlai_args`` also adds the ``--q2-*`` argument group, so the options
  appear in every script's ``--help`` and land in ``opt``;
- ``parlai.core.teachers``: teachers get :class:`parlai_ext.metric.Q2TeacherMetrics` (ParlAI's ``TeacherMetrics``
  plus a buffer of responses to score) and ``FixedDialogTeacher.observe`` hands each response to that buffer.

Cost: nothing is imported at start-up; a process that never imports ParlAI pays one string comparison per import.
Safety: every step runs inside ``try``; a broken or uninstalled q2-plugins leaves start-up and ParlAI as they were.
``Q2_PARLAI_HOOK=0`` turns the hook off. ``python -m parlai_ext.hook status`` says whether it is installed and live.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable, Optional

__all__ = ["PTH_NAME", "enable", "install", "uninstall", "installed_path", "is_enabled", "main"]

PTH_NAME = "q2_plugins_parlai.pth"
ENV_SWITCH = "Q2_PARLAI_HOOK"

# Runs at every interpreter start-up (from the .pth), so it must stay tiny, import nothing and never raise.
_STUB = '''\
import os, sys
class Q2PluginsParlAIStub:
    """q2-plugins: waits for `import parlai`, then hooks `--metrics q2` in (parlai_ext.hook)."""
    triggered = False
    def find_spec(self, name, path=None, target=None):
        if name != "parlai" or self.triggered:
            return None
        self.triggered = True
        try:
            from parlai_ext.hook import enable
            enable()
        except Exception:
            pass
        return None
if os.environ.get("Q2_PARLAI_HOOK", "1") != "0" and not any(
        type(f).__name__ == "Q2PluginsParlAIStub" for f in sys.meta_path):  # lib64 -> lib: the .pth may run twice
    sys.meta_path.insert(0, Q2PluginsParlAIStub())
'''
PTH_LINE = f"import sys; exec({_STUB!r}, {{'__name__': 'q2_plugins_parlai_stub'}})\n"


# -- the post-import hook ----------------------------------------------------------------------------------------
def _patch_params(module: Any) -> None:
    from .options import patch_parser

    patch_parser(module.ParlaiParser)


def _patch_teachers(module: Any) -> None:
    from .metric import patch_teachers

    patch_teachers(module)


_PATCHES: dict[str, Callable[[Any], None]] = {
    "parlai.core.params": _patch_params,
    "parlai.core.teachers": _patch_teachers,
}


def _apply(name: str, module: Any) -> None:
    try:
        _PATCHES[name](module)
    except Exception as e:  # never break ParlAI: it then runs without q2
        import warnings

        warnings.warn(f"q2-plugins could not hook into {name} ({type(e).__name__}: {e}); "
                      f"--metrics q2 is unavailable in this run", RuntimeWarning, stacklevel=2)


class _ThenPatch:
    """A module loader that runs the real loader, then the patch; anything else goes to the real loader."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _apply(self._name, module)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)


class _PostImportHook:
    """Finds nothing itself: for the modules in ``_PATCHES`` it asks the other finders and wraps their loader."""

    def __init__(self) -> None:
        self._resolving: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _PATCHES or name in self._resolving:
            return None
        self._resolving.add(name)
        try:
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if hasattr(spec.loader, "exec_module"):
                        spec.loader = _ThenPatch(spec.loader, name)
                    return spec
            return None
        except Exception:
            return None
        finally:
            self._resolving.discard(name)


_HOOK = _PostImportHook()


def enable() -> None:
    """Hook into ParlAI in this interpreter: patch its modules now if imported, else right after they are."""
    for name in _PATCHES:
        if name in sys.modules:
            _apply(name, sys.modules[name])
    if any(name not in sys.modules for name in _PATCHES) and _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def is_enabled() -> bool:
    """True when this interpreter's ParlAI knows ``--metrics q2`` (imports ParlAI)."""
    import parlai.core.params
    import parlai.core.teachers

    from .metric import Q2TeacherMetrics

    return (getattr(parlai.core.params.ParlaiParser.add_parlai_args, "__q2_plugins__", False)
            and parlai.core.teachers.TeacherMetrics is Q2TeacherMetrics)


# -- installing the start-up file --------------------------------------------------------------------------------
def _site_packages(target: Optional[str]) -> Path:
    return Path(target) if target else Path(sysconfig.get_paths()["purelib"])


def installed_path(target: Optional[str] = None) -> Optional[Path]:
    path = _site_packages(target) / PTH_NAME
    return path if path.is_file() else None


def install(target: Optional[str] = None) -> Path:
    """Write the start-up file into ``target`` (default: this interpreter's site-packages); idempotent."""
    path = _site_packages(target) / PTH_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PTH_LINE, encoding="utf-8")
    return path


def uninstall(target: Optional[str] = None) -> Optional[Path]:
    """Remove the start-up file; returns its path, or None when it was not there."""
    path = installed_path(target)
    if path is not None:
        path.unlink()
    return path


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parlai_ext.hook",
                                     description="Hook `--metrics q2` into ParlAI at interpreter start-up.")
    parser.add_argument("action", choices=("install", "uninstall", "status"))
    parser.add_argument("--target", help="site-packages directory (default: this interpreter's)")
    args = parser.parse_args(argv)
    if args.action == "install":
        print(f"installed {install(args.target)}")
    elif args.action == "uninstall":
        path = uninstall(args.target)
        print(f"removed {path}" if path else "not installed")
    else:
        path = installed_path(args.target)
        print(f"start-up file: {path or 'not installed (python -m parlai_ext.hook install)'}")
        if os.environ.get(ENV_SWITCH, "1") == "0":
            print(f"disabled by {ENV_SWITCH}=0")
        try:
            live = is_enabled()
        except ModuleNotFoundError as e:
            print(f"ParlAI not importable ({e}): bash scripts/install_parlai.sh")
            return 1
        print(f"ParlAI in this interpreter knows --metrics q2: {'yes' if live else 'no'}")
        return 0 if live else 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
