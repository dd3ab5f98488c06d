"""A scoring job is one typed description for both engines; a setting an engine lacks stops the job before any
work, in one line naming the setting and the engine."""

from __future__ import annotations

import json

import pytest

from q2_plugins.cli import main
from q2_plugins.jobs import ScoreJob, check_engine, run_score_job
from q2_plugins.metric.errors import SettingError

NO_MODEL = "/nonexistent-q2-model"  # were a model loaded, the run would fail on it instead


@pytest.mark.parametrize("engine,changes,setting", [
    ("ray", {"html": "r.html"}, "html"),
    ("ray", {"taxonomy_model": "labeller"}, "taxonomy_model"),
    ("ray", {"output": "-"}, "output"),
    ("local", {"keep_min_score": 0.5}, "keep_min_score"),
])
def test_an_engine_refuses_what_it_lacks_naming_itself(engine, changes, setting, tmp_path):
    job = ScoreJob(**{"input": str(tmp_path / "in.jsonl"), "output": str(tmp_path / "out.jsonl"), "engine": engine,
                      **changes})
    with pytest.raises(SettingError) as e:
        run_score_job(job)
    assert e.value.setting == setting and f"the {engine} engine" in e.value.message
    assert list(tmp_path.iterdir()) == []  # nothing read, nothing written


def test_filter_mode_needs_an_output_and_an_unknown_engine_is_refused():
    with pytest.raises(SettingError, match="filter mode needs an output") as e:
        check_engine(ScoreJob(input="in.jsonl", engine="ray", keep_min_score=0.5))
    assert e.value.setting == "keep_min_score"
    with pytest.raises(SettingError, match="unknown engine") as e:
        check_engine(ScoreJob(input="in.jsonl", engine="spark"))
    assert e.value.setting == "engine"


@pytest.mark.parametrize("flags,flag,engine", [
    (["--engine", "ray", "--html", "{tmp}/r.html"], "--html", "ray"),
    (["--engine", "ray", "--taxonomy-model", "{tmp}"], "--taxonomy-model", "ray"),
    (["--keep-min-score", "0.5"], "--keep-min-score", "local"),
])
def test_q2_score_names_the_flag_and_the_engine_in_one_line(flags, flag, engine, tmp_path, capsys):
    rows = tmp_path / "in.jsonl"
    rows.write_text(json.dumps({"response": "r", "knowledge": "k"}) + "\n")
    argv = ["score", "--input", str(rows), "--output", str(tmp_path / "out.jsonl"), "--qg-model", NO_MODEL,
            *[f.format(tmp=tmp_path) for f in flags]]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"q2 score: error: {flag}: the {engine} engine"), lines
    assert not (tmp_path / "out.jsonl").exists()
