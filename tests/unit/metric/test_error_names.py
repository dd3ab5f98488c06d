"""Errors name settings; front ends name flags. The library's errors carry the setting (``.setting``) and write no
flag of any command line; the ``q2`` command line, ParlAI and ``evaluate`` each write the setting their own way."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.metric.errors import ModelLoadError, NamesSetting, SettingError
from tests.conftest import optional_import

REPO = Path(__file__).resolve().parents[3]
LIBRARY = REPO / "q2_plugins"
# the command line's own modules: argparse and its flags belong there
FRONT_ENDS = set((LIBRARY / "cli").rglob("*.py"))  # the command line: the one place that knows its flags
FLAG = re.compile(r"(?<![\w-])--[a-z]")
# modules whose strings are error texts throughout: the message builders, the rows' budget errors and the
# models' row errors (a QG input over its limit)
ERROR_TEXT_MODULES = {LIBRARY / "metric" / "errors.py", LIBRARY / "metric" / "budgets.py",
                      LIBRARY / "backends" / "hf" / "transformers_models.py", LIBRARY / "backends" / "loading.py"}


def _strings(node: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _is_exception_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    return name.endswith(("Error", "Exception"))


def _error_texts(path: Path) -> list[tuple[int, str]]:
    """The string constants of ``path`` that end up in an error: raised, passed to an exception's constructor, or
    (in the message-builder modules) anywhere but a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    if path in ERROR_TEXT_MODULES:
        found = [c for c in _strings(tree) if id(c) not in docstrings]
    else:
        found = [c for n in ast.walk(tree) if isinstance(n, ast.Raise) and n.exc is not None for c in _strings(n.exc)]
        found += [c for n in ast.walk(tree) if _is_exception_call(n) for c in _strings(n)]
    return sorted({id(c): (c.lineno, c.value) for c in found}.values())


def test_the_scan_sees_a_flag_in_a_raised_message(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f(x):\n    if x:\n        raise ValueError(f"bad {x}; pass --qg-model DIR")\n'
                   '    err = SettingError("a", "set --b")\n    raise err\n')
    assert [line for line, text in _error_texts(bad) if FLAG.search(text)] == [3, 4]


def test_no_library_error_names_a_command_line_flag():
    assert FRONT_ENDS, "the command line is the package q2_plugins/cli"
    found = [f"{path.relative_to(REPO)}:{line}: {text!r}"
             for path in sorted(LIBRARY.rglob("*.py")) if path not in FRONT_ENDS
             for line, text in _error_texts(path) if FLAG.search(text)]
    assert not found, "library errors name settings, not flags:\n" + "\n".join(found)


# -- one model-load error and one setting error, rendered by each front end -----------------------------------------
def _cli_flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


@pytest.fixture
def missing(tmp_path) -> Path:
    (tmp_path / "q2-models" / "qg").mkdir(parents=True)
    return tmp_path / "q2-models" / "qgg"


@pytest.fixture
def broken_cache(tmp_path) -> Path:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "q2-cache-v2.sqlite").write_bytes(b"not a database at all" * 100)
    return tmp_path / "bad"


def test_python_names_the_setting(missing, broken_cache):
    with pytest.raises(ModelLoadError) as e:
        _ = Q2Scorer(Q2Config(qg_model=str(missing))).question_generator
    assert e.value.setting == "qg_model"
    assert str(e.value) == (f"Cannot load the QG model {str(missing)!r} (setting qg_model): the folder {missing} "
                            f"does not exist; {missing.parent} has qg. Point qg_model at an existing model folder or "
                            f"a hub id.")
    with pytest.raises(NamesSetting) as e:
        Q2Scorer(Q2Config(cache_dir=str(broken_cache)))
    assert e.value.setting == "cache_dir" and "give another cache_dir on a writable disk" in str(e.value)


def test_a_missing_column_names_the_setting(tmp_path):
    from q2_plugins.io.inputs import MissingColumnsError, read_checked_rows

    p = tmp_path / "in.csv"
    p.write_text("reply,knowledge\nhi,there\n", encoding="utf-8")
    with pytest.raises(MissingColumnsError) as e:
        list(read_checked_rows(p, None, [("response_column", "response")]))
    assert e.value.setting == "response_column"
    assert str(e.value).startswith("response_column: ") and "--" not in str(e.value)


def test_named_writes_each_setting_of_several():
    error = SettingError("response_column / knowledge_column", "no such columns")
    assert str(error) == "response_column / knowledge_column: no such columns"
    assert str(error.named(_cli_flag)) == "--response-column / --knowledge-column: no such columns"


def test_cli_names_its_flags(tmp_path, missing, broken_cache, capsys):
    from q2_plugins.cli import main

    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"response": "paris is in france .", "knowledge": "Paris is in France."}) + "\n",
                 encoding="utf-8")
    assert main(["score", "--input", str(p), "--output", str(tmp_path / "o.jsonl"), "--qg-model", str(missing)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # (after the progress line "q2: loading models")
    assert err == (f"q2 score: error: Cannot load the QG model {str(missing)!r} (setting --qg-model): the folder "
                   f"{missing} does not exist; {missing.parent} has qg. Point --qg-model at an existing model folder "
                   f"or a hub id.")
    assert main(["score", "--input", str(p), "--response-column", "reply"]) == 2
    assert capsys.readouterr().err.startswith("q2 score: error: --response-column: ")
    assert main(["score", "--input", str(p), "--cache-dir", str(broken_cache)]) == 2
    assert "give another --cache-dir on a writable disk" in capsys.readouterr().err


def test_parlai_names_its_options(missing, broken_cache):
    from parlai_ext.options import config_from_opt, scorer_for

    with pytest.raises(ModelLoadError) as e:
        scorer_for(config_from_opt({"q2_qg_model": str(missing)}))
    assert e.value.setting == "qg_model"
    assert "(setting --q2-qg-model): the folder" in str(e.value) and "Point --q2-qg-model at" in str(e.value)
    with pytest.raises(NamesSetting) as e:
        scorer_for(config_from_opt({"q2_cache_dir": str(broken_cache)}))
    assert "give another --q2-cache-dir on a writable disk" in str(e.value)


def test_evaluate_names_its_keyword_arguments(missing):
    evaluate = optional_import("evaluate", "evaluate")

    q2 = evaluate.load(str(REPO / "hf_evaluate_metric" / "q2"), qg_model=str(missing))
    with pytest.raises(ModelLoadError) as e:
        q2.compute(predictions=["paris is in france ."], knowledge=["Paris is in France."])
    assert e.value.setting == "qg_model"
    assert "(setting qg_model=): the folder" in str(e.value) and "Point qg_model= at" in str(e.value)
