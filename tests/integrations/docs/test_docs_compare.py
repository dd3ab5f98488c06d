"""docs/compare.md: the worked example on the bundled replay slice runs as written and prints what the page shows."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_doc_commands

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "compare.md"


def test_worked_example_on_the_bundled_replay_data(tmp_path, monkeypatch, capsys):
    (tmp_path / "q2_plugins").symlink_to(REPO / "q2_plugins", target_is_directory=True)  # the repository's root
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    run_doc_commands(DOC, "compare-replay", capsys)


def test_readme_links_the_page():
    assert "(docs/compare.md)" in (REPO / "README.md").read_text(encoding="utf-8")
