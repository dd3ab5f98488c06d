"""docs/taxonomy_stress.md: its commands run as written, and print what it shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from q2_plugins.cli import main
from tests.conftest import shared_data_dir

DOC = Path(__file__).resolve().parent.parent / "docs" / "taxonomy_stress.md"


def block(kind: str, tag: str) -> str:
    """The fenced block after ``<!-- kind: tag -->``."""
    found = re.search(rf"<!-- {kind}: {re.escape(tag)} -->\s*\n```\w*\n(.*?)\n```", DOC.read_text(), flags=re.S)
    assert found, f"no <!-- {kind}: {tag} --> block in {DOC}"
    return found.group(1)


@pytest.fixture()
def repo_dir(tmp_path, monkeypatch) -> Path:
    """A working directory laid out as the doc assumes: the repository, with ``../shared/data`` beside it."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(shared_data_dir(), target_is_directory=True)
    (tmp_path / "repo" / "out").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    return tmp_path / "repo"


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["taxonomy-begin", "stress-begin"])
def test_commands_print_what_the_doc_shows(tag, repo_dir, capsys):
    """BEGIN dev end to end: spaCy on 836 (taxonomy) or 957 (stress) pairs, about 10 s each."""
    for line in block("test", tag).splitlines():
        argv = shlex.split(line)
        assert argv[0] == "q2"
        assert main(argv[1:]) == 0, line
    printed = capsys.readouterr().out
    for expected in block("output", tag).splitlines():
        assert expected in printed, expected
    if tag == "taxonomy-begin":
        assert (repo_dir / "out" / "taxonomy-begin" / "confusion_text_rules.png").read_bytes()[:4] == b"\x89PNG"


def test_python_example():
    code = block("test", "python")
    *body, last, comment = code.splitlines()
    namespace: dict = {}
    exec("\n".join(body), namespace)
    assert repr(eval(last, namespace)) == comment.lstrip("# ")
