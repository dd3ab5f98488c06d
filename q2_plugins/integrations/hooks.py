"""``q2 hooks install|status|uninstall``: the start-up file that hooks Q² into ``evaluate`` and ParlAI.

The mechanism (one finder, a table of target modules) is ``_q2_plugins_hook``, a top-level module that imports
nothing; this module only writes, checks and removes its ``.pth`` file in site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Optional

__all__ = ["LEGACY_PTH_NAMES", "mechanism", "site_dir", "install", "uninstall", "installed", "live", "armed"]

# start-up files written by earlier versions (the ParlAI-only hook): replaced by install, removed by uninstall
LEGACY_PTH_NAMES = ("q2_plugins_parlai.pth",)


def hook_module() -> Any:
    """The mechanism module ``_q2_plugins_hook``: installed beside ``q2_plugins`` (wheel, editable install), else
    loaded from the checkout's file (an editable install made before it was a module of the distribution)."""
    try:
        import _q2_plugins_hook
    except ImportError:
        import importlib.util

        path = Path(__file__).resolve().parents[2] / "_q2_plugins_hook.py"
        spec = importlib.util.spec_from_file_location("_q2_plugins_hook", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise
        _q2_plugins_hook = importlib.util.module_from_spec(spec)
        sys.modules["_q2_plugins_hook"] = _q2_plugins_hook
        spec.loader.exec_module(_q2_plugins_hook)
    return _q2_plugins_hook


mechanism = hook_module


def site_dir(target: Optional[str] = None) -> Path:
    """``target``, or this interpreter's site-packages."""
    return Path(target) if target else Path(sysconfig.get_paths()["purelib"])


def installed(target: Optional[str] = None) -> Optional[Path]:
    """The start-up file in ``target`` (default: site-packages), or None."""
    path = site_dir(target) / hook_module().PTH_NAME
    return path if path.is_file() else None


def install(target: Optional[str] = None) -> Path:
    """Write the start-up file (idempotent) and remove the files of earlier versions; returns its path."""
    hook = hook_module()
    directory = site_dir(target)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / hook.PTH_NAME
    path.write_text(hook.PTH_LINE, encoding="utf-8")
    for name in LEGACY_PTH_NAMES:
        (directory / name).unlink(missing_ok=True)
    return path


def uninstall(target: Optional[str] = None) -> list[Path]:
    """Remove the start-up file (and those of earlier versions); returns what was removed."""
    directory = site_dir(target)
    removed = []
    for name in (hook_module().PTH_NAME, *LEGACY_PTH_NAMES):
        path = directory / name
        if path.is_file():
            path.unlink()
            removed.append(path)
    return removed


_CHECK = r"""
import json, site, sys
if sys.argv[1]:
    site.addsitedir(sys.argv[1])
import _q2_plugins_hook as hook
out = {}
for framework in sys.argv[2:]:
    names = [n for n, (f, _) in hook.TARGETS.items() if f == framework]
    try:
        for name in names:
            __import__(name)
        out[framework] = all(hook.patched(n) for n in names)
    except Exception as e:
        out[framework] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""

_ARMED = r"""
import importlib.util, json, site, sys
if sys.path and sys.path[0] == "":  # the working folder, which start-up did not search
    del sys.path[0]
if sys.argv[1]:
    site.addsitedir(sys.argv[1])
hook = sys.modules.get("_q2_plugins_hook")  # imported by the start-up file only: never here
out = {}
for framework in sys.argv[2:]:
    if hook is None:
        out[framework] = ("the start-up file did not run in a fresh interpreter"
                          if importlib.util.find_spec("_q2_plugins_hook") else
                          "the start-up file cannot import _q2_plugins_hook: reinstall q2-plugins")
        continue
    first = any(f is hook.FINDER for f in sys.meta_path)
    problems = []
    for name, (owner, where) in hook.TARGETS.items():
        if owner != framework:
            continue
        if name in sys.modules and not hook.patched(name):
            problems.append(f"{name} was imported at start-up, unpatched")
        elif name not in sys.modules and not (first and name in hook.FINDER.watched):
            problems.append(f"the hook's finder does not watch {name}")
        elif importlib.util.find_spec(where.split(":")[0]) is None:
            problems.append(f"{where.split(':')[0]}, which patches {name}, is not importable")
    out[framework] = "; ".join(problems) or True
print(json.dumps(out))
"""


def _fresh(check: str, frameworks: list[str], target: Optional[str]) -> dict[str, object]:
    """``check``'s answer per framework from a fresh interpreter (this one's start-up, plus ``target``'s start-up
    files); a check that fails gives each framework its last line of standard error."""
    if not frameworks:
        return {}
    proc = subprocess.run([sys.executable, "-c", check, str(target or ""), *frameworks], capture_output=True,
                          text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=600)
    if proc.returncode != 0:
        return {f: (proc.stderr.strip().splitlines() or ["failed"])[-1] for f in frameworks}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def live(frameworks: list[str], target: Optional[str] = None) -> dict[str, object]:
    """In a fresh interpreter, for each framework: True when its modules are patched after import, False when not,
    or the import error. Importing the frameworks takes seconds; :func:`armed` checks without."""
    return _fresh(_CHECK, frameworks, target)


def armed(frameworks: list[str], target: Optional[str] = None) -> dict[str, object]:
    """In a fresh interpreter, without importing the frameworks: for each framework, True when the start-up file
    ran and the hook's finder is on ``sys.meta_path`` watching each of its target modules (or the module is
    imported already, patched), and the module holding each patch can be found; else what is wrong."""
    return _fresh(_ARMED, frameworks, target)
