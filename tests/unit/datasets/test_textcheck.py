"""Invisible text is no text: the per-cell check shared by ``q2 perturb`` and ``q2 train``."""

from __future__ import annotations

import pytest

from q2_plugins.datasets.textcheck import text_problem


@pytest.mark.parametrize("value, problem", [
    (5, "'response' is a number"),
    (2.5, "'response' is a number"),
    (True, "'response' is a boolean"),
    (["a"], "'response' is a list"),
    ({"a": 1}, "'response' is an object"),
    (None, "'response' is missing"),
    (" \n ", "'response' is empty"),
    ("a\x00b", "'response' holds a NUL character at character 1"),
    ("ab\x07", "'response' holds a control character U+0007 at character 2"),
    ("x\u200by", "'response' holds an invisible format character U+200B (zero width space) at character 1"),
    ("\ufeffhello", "'response' holds an invisible format character U+FEFF (zero width no-break space) at character 0"),
    ("x\ud800", "'response' holds a lone surrogate U+D800 at character 1"),
    ("x" * 11, "'response' is over its budget of 10 characters (11 characters)"),
])
def test_what_is_no_text_is_named(value, problem):
    assert text_problem(value, "response", 10) == problem


def test_text_passes_and_the_budget_is_checked_first():
    for text in ("plain text", "tabs\tand\nnew lines", "é ü 中文 😀"):
        assert text_problem(text, "response") is None
    assert text_problem(None, "previous turn", required=False) is None
    assert text_problem("", "previous turn", required=False) is None
    # an enormous cell is refused on its length alone, whatever it holds, naming the setting when given
    assert text_problem("\x00" * 50, "knowledge", 10, detail=False, setting="max_knowledge_chars") == (
        "'knowledge' is over its budget max_knowledge_chars=10")
    assert text_problem("a\x00b", "response", detail=False) == "'response' holds a NUL character"
