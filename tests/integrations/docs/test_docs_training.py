"""docs/training.md: its commands and Python example run as written, in the layout the page assumes (the tiny
models of ``q2 make-test-models --examples`` in ``out/examples``, the bundled reference data at
``../../q2_plugins/data``), and print what it shows."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import doc_block, shared_data_dir

DOC = Path(__file__).resolve().parents[3] / "docs" / "training.md"


@pytest.fixture
def workdir(examples_dir, tmp_path, monkeypatch) -> Path:
    (tmp_path / "repo" / "q2_plugins").mkdir(parents=True)
    (tmp_path / "repo" / "q2_plugins" / "data").symlink_to(shared_data_dir(), target_is_directory=True)
    work = tmp_path / "repo" / "out" / "examples"  # out/examples of a checkout
    work.mkdir(parents=True)
    for entry in examples_dir.iterdir():
        (work / entry.name).symlink_to(entry, target_is_directory=True)
    monkeypatch.chdir(work)
    return work


def run_block(tag: str, capsys) -> str:
    """Run the block's lines: ``q2`` commands in-process (each must exit 0), others with the shell."""
    from q2_plugins.cli import main

    for line in doc_block(DOC, "test", tag).splitlines():
        if line.startswith("q2 "):
            assert main(shlex.split(line)[1:]) == 0, line
        else:
            subprocess.run(line, shell=True, check=True)
    printed = capsys.readouterr().out
    for expected in doc_block(DOC, "output", tag).splitlines():
        assert expected in printed, expected
    return printed


@pytest.mark.slow
def test_the_page_runs_as_written(workdir, capsys):
    """Recipes on q2_wow, three trainings of a few steps, scoring, the Python example and meta-eval, in order (each
    step reads what the one before wrote)."""
    import json

    run_block("recipes", capsys)
    run_block("train", capsys)
    (row,) = [json.loads(line) for line in (workdir / "mine_scores.jsonl").read_text().splitlines()]
    assert row["label_reason"].endswith("begin-5way model") and row["status"] in ("scored", "fallback")
    assert "second stage from `stage1`" in (workdir / "begin-3way" / "README.md").read_text()
    code = doc_block(DOC, "test", "python")
    *body, last, comment = code.splitlines()
    namespace: dict = {}
    exec("\n".join(body + [last.replace("print(", "shown = (", 1)]), namespace)
    assert " ".join(map(str, namespace["shown"])) == comment.lstrip("# ")
    run_block("meta-eval", capsys)
    (figure,) = (workdir / "out-begin").glob("confusion_model_begin*5way.png")  # beside confusion_text_rules.png
    assert figure.read_bytes()[:4] == b"\x89PNG" and (workdir / "out-begin" / "confusion_text_rules.png").exists()


def test_the_wow_json_example_runs_as_written(workdir, capsys):
    """The ParlAI JSON example, on a two-dialogue file in that layout where the page expects ParlAI's."""
    import json

    from tests.unit.training.test_recipes import WOW_JSON

    (workdir / "data" / "wizard_of_wikipedia").mkdir(parents=True)
    (workdir / "data" / "wizard_of_wikipedia" / "valid_random_split.json").write_text(json.dumps(WOW_JSON))
    printed = run_block("wow-json", capsys)
    assert "| original | consistent | 4 |" in printed and "'knowledge' is empty: 1" in printed
    assert len((workdir / "wow_conv_fever.jsonl").read_text().splitlines()) > 4
