"""``q2 score`` into an existing ``--output`` (and ``--html``) replaces it, as ``sort -o`` does, and says so on
standard error, with or without progress; a first run says nothing of it."""

from __future__ import annotations

from q2_plugins.cli import main
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD, jsonl

model_flags = base.model_flags  # the fixture: tiny models' flags


def test_q2_score_says_which_existing_outputs_it_replaces(tmp_path, capsys, model_flags):
    src = jsonl(tmp_path / "in.jsonl", [GOOD])
    out, page = tmp_path / "out.jsonl", tmp_path / "out.html"
    argv = ["score", "--input", str(src), "--output", str(out), "--html", str(page), "--no-progress", *model_flags]
    assert main(argv) == 0
    assert "exists; a complete run replaces it" not in capsys.readouterr().err
    out.write_text("an earlier run's rows\n", encoding="utf-8")
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"q2 score: {out} exists; a complete run replaces it (name another path to keep it)" in err
    assert f"q2 score: {page} exists; a complete run replaces it" in err and err.count("a complete run replaces") == 2
    assert "an earlier run" not in out.read_text(encoding="utf-8")
