"""The start-up hook (``q2 hooks``) that puts ``--metrics q2`` into ParlAI and ``evaluate.load("q2")`` into evaluate:
lazy, safe, effective on import, switchable, silent when left over.

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

from tests.conftest import optional_import

optional_import("parlai", "parlai")

import _q2_plugins_hook  # noqa: E402
from parlai_ext import hook  # noqa: E402
from q2_plugins.cli import main as q2_main  # noqa: E402
from q2_plugins.integrations import hooks  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def run(code: str, pth_dir: Path, pythonpath: str = str(REPO), **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` after a start-up that processed ``pth_dir`` only (plus the normal site-packages on sys.path)."""
    prologue = textwrap.dedent(f"""
        import site, sys
        site.addsitedir({str(pth_dir)!r})
        sys.path.append({sysconfig.get_paths()["purelib"]!r})
    """)
    environ = {k: v for k, v in os.environ.items() if k not in _q2_plugins_hook.FRAMEWORKS.values()}
    environ.update({"PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore", **env})
    return subprocess.run([sys.executable, "-S", "-c", prologue + textwrap.dedent(code)], env=environ,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def pth_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("site")
    assert q2_main(["hooks", "install", "--target", str(path)]) == 0
    return path


def test_the_pth_is_one_import_line_and_the_wheel_ships_the_same(pth_dir):
    text = (pth_dir / _q2_plugins_hook.PTH_NAME).read_text()
    assert text == _q2_plugins_hook.PTH_LINE and text.startswith("import ") and text.count("\n") == 1
    assert (REPO / _q2_plugins_hook.PTH_NAME).read_text() == text


def test_start_up_imports_nothing_and_hooks_parlai_when_imported(pth_dir):
    out = run("""
        loaded = [m for m in sys.modules if m.split(".")[0] in ("parlai", "parlai_ext", "q2_plugins", "evaluate")]
        print("startup:", loaded)
        import parlai.core.teachers, parlai.core.params
        from parlai_ext.metric import Q2TeacherMetrics
        print("teachers:", parlai.core.teachers.TeacherMetrics is Q2TeacherMetrics)
        parser = parlai.core.params.ParlaiParser()
        print("option:", getattr(parser.parse_known_args(["--q2-qg-model", "m"])[0], "q2_qg_model", None) == "m")
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


def test_switch_values(monkeypatch):
    for value, off in (("0", True), ("false", True), ("No", True), (" OFF ", True), ("1", False), ("", False),
                       ("yes", False)):
        monkeypatch.setenv(hook.ENV_SWITCH, value)
        assert _q2_plugins_hook.switched_off("parlai") is off, value


def test_switched_off_by_environment(pth_dir):
    value = "False"
    out = run("""
        import parlai.core.teachers
        from parlai.core.metrics import TeacherMetrics
        print("untouched:", parlai.core.teachers.TeacherMetrics is TeacherMetrics)
    """, pth_dir, **{hook.ENV_SWITCH: value})
    assert out.returncode == 0, out.stderr
    assert "untouched: True" in out.stdout


def test_one_switch_leaves_the_other_framework_hooked(pth_dir):
    optional_import("evaluate", "evaluate")
    out = run("""
        import _q2_plugins_hook as h
        print("watched:", sorted(h.FINDER.watched))
    """, pth_dir, Q2_PLUGINS_EVALUATE_HOOK="false")
    assert out.returncode == 0, out.stderr
    assert "watched: ['parlai.core.opt', 'parlai.core.params', 'parlai.core.teachers']" in out.stdout


def test_parlai_starts_without_the_pkg_resources_warning_and_other_warnings_stay(pth_dir):
    """ParlAI 1.7.2 imports pkg_resources, whose deprecation warning (setuptools 80.10, as locked) the hook leaves
    out while ParlAI loads; any other warning still shows, and with the hook off the ParlAI one is back."""
    code = """
        import warnings
        import parlai.core.params
        warnings.warn("another warning")
    """
    hooked = run(code, pth_dir, PYTHONWARNINGS="default")
    plain = run(code, pth_dir, PYTHONWARNINGS="default", **{hook.ENV_SWITCH: "0"})
    assert hooked.returncode == 0 and plain.returncode == 0, (hooked.stderr, plain.stderr)
    assert "pkg_resources is deprecated" in plain.stderr
    assert "pkg_resources" not in hooked.stderr, hooked.stderr
    assert "another warning" in hooked.stderr


def test_a_left_over_pth_whose_module_is_gone_is_silent(pth_dir, tmp_path):
    out = run("print('started')", pth_dir, pythonpath=str(tmp_path))  # _q2_plugins_hook not importable
    assert out.returncode == 0 and out.stdout.strip() == "started"
    assert out.stderr == ""


def test_install_is_idempotent_replaces_the_old_parlai_file_and_uninstall_removes(tmp_path, capsys):
    (tmp_path / "q2_plugins_parlai.pth").write_text("import sys\n")  # written by earlier versions
    hooks.install(str(tmp_path))
    hooks.install(str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [_q2_plugins_hook.PTH_NAME]
    assert q2_main(["hooks", "uninstall", "--target", str(tmp_path)]) == 0
    assert hooks.installed(str(tmp_path)) is None
    assert q2_main(["hooks", "uninstall", "--target", str(tmp_path)]) == 0
    assert "not installed" in capsys.readouterr().out


def test_status_checks_both_frameworks_in_a_fresh_interpreter(pth_dir, tmp_path, capsys, monkeypatch):
    optional_import("evaluate", "evaluate")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for name in _q2_plugins_hook.FRAMEWORKS.values():
        monkeypatch.delenv(name, raising=False)
    assert hooks.live(["evaluate", "parlai"], str(pth_dir)) == {"evaluate": True, "parlai": True}
    assert q2_main(["hooks", "status", "--target", str(tmp_path)]) == 1
    assert "not installed" in capsys.readouterr().out
