"""docs/metaeval.md: the commands of the Tables 5 / 6 and BEGIN v2 / FaithDial sections run as written and print
what the doc shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import doc_block, run_doc_commands

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "metaeval.md"


def block(kind: str, tag: str) -> str:
    return doc_block(DOC, kind, tag)



@pytest.mark.parametrize("tag", ["usr", "dnli", pytest.param("begin-v2", marks=pytest.mark.slow)])
def test_commands_print_what_the_doc_shows(tag, repo_dir, capsys):
    run_doc_commands(DOC, tag, capsys)
