"""docs/metaeval.md: the commands of the Tables 5 / 6 and BEGIN v2 / FaithDial sections run as written and print
what the doc shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from q2_plugins.cli import main
from tests.conftest import shared_data_dir

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "metaeval.md"


def block(kind: str, tag: str) -> str:
    found = re.search(rf"<!-- {kind}: {re.escape(tag)} -->\s*\n```\w*\n(.*?)\n```", DOC.read_text(), flags=re.S)
    assert found, f"no <!-- {kind}: {tag} --> block in {DOC}"
    return found.group(1)


@pytest.fixture()
def repo_dir(tmp_path, monkeypatch) -> Path:
    """The repository as working directory, with ``../shared/data`` beside it as the doc assumes."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(shared_data_dir(), target_is_directory=True)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "repo")
    return tmp_path / "repo"


@pytest.mark.parametrize("tag", ["usr", "dnli", pytest.param("begin-v2", marks=pytest.mark.slow)])
def test_commands_print_what_the_doc_shows(tag, repo_dir, capsys):
    for line in block("test", tag).splitlines():
        argv = shlex.split(line)
        assert argv[0] == "q2"
        assert main(argv[1:]) == 0, line
    printed = capsys.readouterr().out
    for expected in block("output", tag).splitlines():
        assert expected in printed, expected
