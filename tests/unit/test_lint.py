"""ruff, with the project's configuration (pyproject.toml), finds nothing: run from this interpreter's
environment (the ``dev`` extra installs it), so the test command lints as it tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=cwd, capture_output=True, text=True)


def test_ruff_finds_nothing():
    done = _ruff(".")
    assert "No module named ruff" not in done.stderr, "ruff is missing: pip install -c requirements.lock '.[dev]'"
    assert done.returncode == 0, f"ruff check . (fix these, or `ruff check --fix .`):\n{done.stdout}{done.stderr}"


def test_ruff_sees_an_error_under_the_projects_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "bad.py").write_text("import os\nx = '" + "y" * 120 + "'\n", encoding="utf-8")
    done = _ruff(".", cwd=tmp_path)
    assert done.returncode == 1
    assert "bad.py:1:8: F401" in done.stdout and "bad.py:2:121: E501" in done.stdout, done.stdout
