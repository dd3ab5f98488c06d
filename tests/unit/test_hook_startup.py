"""The start-up hook (``q2_plugins_hook.pth`` -> ``_q2_plugins_hook.install``) imports nothing at start-up and never
warns, so that ``python -W error`` runs as it does without it (issue case 7; the cost: benchmarks/hook_startup.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import optional_import

REPO = Path(__file__).resolve().parents[2]


def python(code: str, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with ``flags``, this checkout's hook first on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "Q2_PLUGINS_EVALUATE_HOOK",
                                                             "Q2_PARLAI_HOOK")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(REPO)])
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_install_imports_no_module(tmp_path):
    out = python("""
        import os, sys  # (site has imported os before any .pth line runs)
        before = set(sys.modules)
        import _q2_plugins_hook
        _q2_plugins_hook.install()
        print(sorted(set(sys.modules) - before))
    """, tmp_path, "-S")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['_q2_plugins_hook']"


def test_under_w_error_a_patch_neither_warns_nor_breaks_the_import(tmp_path):
    (tmp_path / "q2_target_ok.py").write_text("VALUE = 1\n")
    (tmp_path / "q2_target_bad.py").write_text("VALUE = 2\n")
    (tmp_path / "q2_patches.py").write_text(textwrap.dedent("""
        import warnings
        warnings.warn("something deprecated in what Q2 imports", DeprecationWarning)  # an error under -W error

        def patch(module):
            module.PATCHED = True

        def broken(module):
            raise RuntimeError("cannot patch")
    """))
    out = python("""
        import _q2_plugins_hook as h
        h.TARGETS.update({"q2_target_ok": ("evaluate", "q2_patches:patch"),
                          "q2_target_bad": ("evaluate", "q2_patches:broken")})
        h.FINDER.watched.update(["q2_target_ok", "q2_target_bad"])
        h.enable(())
        import q2_target_ok, q2_target_bad
        print(q2_target_ok.PATCHED, q2_target_bad.VALUE)
    """, tmp_path, "-W", "error", "-S")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True 2"
    assert out.stderr == ("q2-plugins: could not hook into q2_target_bad (RuntimeError: cannot patch); Q² is "
                          "unavailable in evaluate in this run\n")


def test_evaluate_imports_under_w_error_with_the_hook(tmp_path):
    optional_import("evaluate", "evaluate")
    out = python("""
        import site
        site.addsitedir(%r)  # the .pth line, as site runs it (a second time when it is installed: idempotent)
        import evaluate.loading
        import _q2_plugins_hook as h
        print(h.patched("evaluate.loading"))
    """ % str(REPO), tmp_path, "-W", "error")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("True")
