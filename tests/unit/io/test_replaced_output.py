"""An existing output is replaced (the ``sort -o`` rule, kept), and the command says so on standard error, once per
file it replaces; a new output gets no such line."""

from __future__ import annotations

import json

from q2_plugins.cli import main


def test_report_and_replay_say_which_existing_output_they_replace(tmp_path, capsys):
    from q2_plugins.jobs.replay import bundled_original_run

    steps, _ = bundled_original_run()
    out = tmp_path / "replay.jsonl"
    argv = ["replay", "--steps", str(steps[0]), "--output", str(out), "--format", "json"]
    assert main(argv) == 0
    assert "a complete run replaces" not in capsys.readouterr().err  # a new file: nothing to say
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("a complete run replaces") == 1
    assert f"q2 replay: {out} exists; a complete run replaces it (name another path to keep it)" in err
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[0])["row"] == 0  # replaced, as before
    page = tmp_path / "r.html"
    for attempt in range(2):
        assert main(["report", str(out), "--output", str(page)]) == 0
        err = capsys.readouterr().err
        assert (f"q2 report: {page} exists; a complete run replaces it" in err) == (attempt == 1), err
