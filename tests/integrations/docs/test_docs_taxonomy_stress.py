"""docs/taxonomy_stress.md: its commands run as written, and print what it shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import doc_block, run_doc_commands

DOC = Path(__file__).resolve().parents[3] / "docs" / "taxonomy_stress.md"


def block(kind: str, tag: str) -> str:
    return doc_block(DOC, kind, tag)



@pytest.mark.slow
@pytest.mark.parametrize("tag", ["taxonomy-begin", "stress-begin"])
def test_commands_print_what_the_doc_shows(tag, repo_dir, capsys):
    """BEGIN dev end to end: spaCy on 836 (taxonomy) or 957 (stress) pairs, about 10 s each."""
    run_doc_commands(DOC, tag, capsys)
    if tag == "taxonomy-begin":
        assert (repo_dir / "out" / "taxonomy-begin" / "confusion_text_rules.png").read_bytes()[:4] == b"\x89PNG"


def test_python_example():
    code = block("test", "python")
    *body, last, comment = code.splitlines()
    namespace: dict = {}
    exec("\n".join(body), namespace)
    assert repr(eval(last, namespace)) == comment.lstrip("# ")
