"""The start-up hook that puts ``--metrics q2`` into ParlAI: lazy, safe, and effective on ``import parlai``.

Each case runs a fresh interpreter with ``-S`` (no site-packages processing), then processes only a temporary
directory holding the hook's ``.pth``, so the result does not depend on whether the hook is installed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # locally the parlai extra is optional; CI must run these tests
    pytest.importorskip("parlai")

from parlai_ext import hook  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def run(code: str, pth_dir: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` after a start-up that processed ``pth_dir`` only (plus the normal site-packages on sys.path)."""
    prologue = textwrap.dedent(f"""
        import site, sys
        site.addsitedir({str(pth_dir)!r})
        sys.path.append({sysconfig.get_paths()["purelib"]!r})
    """)
    environ = {k: v for k, v in os.environ.items() if k != hook.ENV_SWITCH}
    environ.update(PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore", **env)
    return subprocess.run([sys.executable, "-S", "-c", prologue + textwrap.dedent(code)], env=environ,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def pth_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("site")
    assert hook.main(["install", "--target", str(path)]) == 0
    return path


def test_the_pth_is_one_import_line(pth_dir):
    text = (pth_dir / hook.PTH_NAME).read_text()
    assert text == hook.PTH_LINE and text.startswith("import ") and text.count("\n") == 1


def test_start_up_imports_nothing_and_hooks_parlai_when_imported(pth_dir):
    out = run("""
        loaded = [m for m in sys.modules if m.split(".")[0] in ("parlai", "parlai_ext", "q2_plugins")]
        print("startup:", loaded)
        import parlai.core.teachers, parlai.core.params
        from parlai_ext.metric import Q2TeacherMetrics
        print("teachers:", parlai.core.teachers.TeacherMetrics is Q2TeacherMetrics)
        parser = parlai.core.params.ParlaiParser()
        print("option:", "--q2-qg-model" in parser._option_string_actions)
    """, pth_dir)
    assert out.returncode == 0, out.stderr
    assert "startup: []" in out.stdout
    assert "teachers: True" in out.stdout and "option: True" in out.stdout


def test_a_broken_package_never_breaks_start_up_or_parlai(pth_dir):
    out = run("""
        sys.modules["parlai_ext"] = None  # as if q2-plugins were uninstalled: its import fails
        import parlai.core.teachers
        from parlai.core.metrics import TeacherMetrics
        print("untouched:", parlai.core.teachers.TeacherMetrics is TeacherMetrics)
    """, pth_dir)
    assert out.returncode == 0, out.stderr
    assert "untouched: True" in out.stdout
    assert "Error processing line" not in out.stderr


def test_switched_off_by_environment(pth_dir):
    out = run("""
        import parlai.core.teachers
        from parlai.core.metrics import TeacherMetrics
        print("untouched:", parlai.core.teachers.TeacherMetrics is TeacherMetrics)
    """, pth_dir, **{hook.ENV_SWITCH: "0"})
    assert out.returncode == 0, out.stderr
    assert "untouched: True" in out.stdout


def test_install_is_idempotent_and_uninstall_removes(tmp_path, capsys):
    hook.install(str(tmp_path))
    hook.install(str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [hook.PTH_NAME]
    assert hook.main(["uninstall", "--target", str(tmp_path)]) == 0
    assert hook.installed_path(str(tmp_path)) is None
    assert hook.main(["uninstall", "--target", str(tmp_path)]) == 0
    assert "not installed" in capsys.readouterr().out
