"""Optional dependencies of the adapter suites: skipped locally when missing, a failure in CI (``CI=true``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import optional_import

TESTS = Path(__file__).resolve().parents[1]


def test_a_missing_module_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="q2_no_such_module is not installed: the 'ray' extra"):
        optional_import("q2_no_such_module", "ray")


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_a_missing_module_fails_in_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="q2_no_such_module is not installed.*CI installs every extra"):
        optional_import("q2_no_such_module", "ray")


def test_an_installed_module_is_returned_and_a_broken_one_is_an_error(monkeypatch, tmp_path):
    monkeypatch.delenv("CI", raising=False)
    assert optional_import("json", "dev").dumps([1]) == "[1]"
    (tmp_path / "q2_broken_extra.py").write_text("import q2_missing_inside\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="q2_missing_inside"):  # installed, but its own import fails
        optional_import("q2_broken_extra", "dev")


def test_no_suite_skips_on_a_missing_import_by_itself():
    """Every optional import of the suites goes through optional_import, so CI cannot pass by skipping."""
    users = [p.relative_to(TESTS).as_posix() for p in TESTS.rglob("*.py")
             if re.search(r"importorskip\(", p.read_text(encoding="utf-8")) and p.name != "test_optional_deps.py"]
    assert users == []
