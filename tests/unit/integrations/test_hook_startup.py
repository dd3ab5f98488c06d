"""The start-up hook (``q2_plugins_hook.pth`` -> ``_q2_plugins_hook.install``) imports nothing at start-up and never
warns, so that ``python -W error`` runs as it does without it (issue case 7; the cost: benchmarks/hook_startup.py);
``q2 hooks status`` checks a fresh interpreter's start-up without importing the frameworks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.conftest import optional_import

REPO = Path(__file__).resolve().parents[3]


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


# -- q2 hooks status: a fresh interpreter of a virtual environment that starts without our start-up file -----------
@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """The Python of a new virtual environment whose site-packages reads this one's packages (a path line) and
    holds no start-up file of ours; ``q2 hooks install`` in it writes there."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    exe = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(exe), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib, "outer_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return exe


@pytest.fixture()
def trapped(tmp_path) -> Path:
    """A folder of stand-ins for evaluate and ParlAI that fail on import: a check that imports them says so."""
    for name in ("evaluate", "parlai"):
        (tmp_path / "trap" / name).mkdir(parents=True)
        (tmp_path / "trap" / name / "__init__.py").write_text(f"raise RuntimeError('{name} was imported')\n")
    return tmp_path / "trap"


def in_bare(python: Path, code: str, *path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "Q2_PLUGINS_EVALUATE_HOOK",
                                                             "Q2_PARLAI_HOOK")}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    return subprocess.run([str(python), "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)


def status(python: Path, *path: Path, flags: str = "") -> subprocess.CompletedProcess:
    """``q2 hooks status`` run by ``python``, ``path`` its PYTHONPATH (this checkout put first on sys.path)."""
    return in_bare(python, f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from q2_plugins.cli import main
        sys.exit(main(["hooks", "status", *{flags.split()!r}]))
    """, *path)


def armed(python: Path, *path: Path) -> dict:
    out = in_bare(python, """
        import json
        from q2_plugins.integrations.hooks import armed
        print(json.dumps(armed(["evaluate", "parlai"])))
    """, *path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_status_checks_a_fresh_start_up_without_importing_the_frameworks(bare_python, trapped):
    not_run = "the start-up file did not run in a fresh interpreter"
    assert armed(bare_python, REPO, trapped) == {"evaluate": not_run, "parlai": not_run}  # a missing start-up file
    out = status(bare_python, REPO, trapped)
    assert out.returncode == 1 and "start-up file: not installed (q2 hooks install)" in out.stdout
    install = in_bare(bare_python, f"import sys; sys.path.insert(0, {str(REPO)!r}); from q2_plugins.cli import main; "
                                   f"sys.exit(main(['hooks', 'install']))", REPO)
    assert install.returncode == 0, install.stderr
    try:
        assert armed(bare_python, REPO, trapped) == {"evaluate": True, "parlai": True}
        out = status(bare_python, REPO, trapped)  # evaluate and ParlAI would fail on import: they were not imported
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines()[1:] == ["evaluate: hooked", "parlai: hooked"]
        out = status(bare_python, REPO, trapped, flags="--import")  # the full check imports them
        assert out.returncode == 1
        assert "evaluate: NOT hooked (RuntimeError: evaluate was imported)" in out.stdout
        # the start-up file is there but cannot import the hook (the module is not on the path): not hooked
        out = status(bare_python, trapped)
        assert out.returncode == 1
        assert ("evaluate: NOT hooked (the start-up file cannot import _q2_plugins_hook: reinstall q2-plugins)"
                in out.stdout)
    finally:
        in_bare(bare_python, "from q2_plugins.integrations.hooks import uninstall; uninstall()", REPO)
