"""docs/metaeval.md: the commands of the Tables 5 / 6 and BEGIN v2 / FaithDial sections run as written and print
what the doc shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import doc_block, run_doc_commands

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "metaeval.md"


def block(kind: str, tag: str) -> str:
    return doc_block(DOC, kind, tag)



@pytest.mark.parametrize("tag", ["usr", "dnli", "scores-example", pytest.param("begin-v2", marks=pytest.mark.slow)])
def test_commands_print_what_the_doc_shows(tag, repo_dir, capsys):
    run_doc_commands(DOC, tag, capsys)


def test_python_settings_example_runs_as_written(repo_dir, capsys):
    code = block("test", "python-settings")
    exec(compile(code, "docs/metaeval.md", "exec"), {})
    assert 0.0 < float(capsys.readouterr().out.strip()) < 1.0
    assert (repo_dir / "out" / "faithdial-ctrl" / "report.html").is_file()


@pytest.mark.slow
def test_true_summary_example_prints_what_the_doc_shows(repo_dir, capsys):
    """Two baseline runs (BEGIN v1 dev, the WoW data: about 30 s on an idle 2-core machine) and the summary."""
    import shlex

    from q2_plugins.cli import main

    for line in block("test", "true-summary").splitlines():
        assert main(shlex.split(line)[1:]) == 0, line
    exec(compile(block("test", "true-summary-py"), "docs/metaeval.md", "exec"), {})
    printed = capsys.readouterr().out
    for expected in block("output", "true-summary-py").splitlines():
        assert expected in printed, expected
