"""LightEval: the Q² metrics (declared names, batched: one core call for a task's samples, whichever metric asks
first), unscored samples left out of the figure, fields read from the sample, and the documented command offline on
the tiny models (settings and signature in the results JSON). Runs in .venv-lighteval (scripts/setup_lighteval.sh)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("lighteval", "lighteval")

from lighteval.metrics import apply_metric  # noqa: E402
from lighteval.models.model_output import ModelResponse  # noqa: E402

import q2_plugins.integrations.adapters as adapters  # noqa: E402
from q2_plugins import Q2Scorer  # noqa: E402
from q2_plugins.integrations import lighteval as q2_lighteval  # noqa: E402
from q2_plugins.metric import names as M  # noqa: E402
from q2_plugins.metric.names import PER_RESPONSE  # noqa: E402
from q2_plugins.metric.significance import mean_interval_of  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402

RECORDS = [{"id": "a", "history": ["do you watch tv?"], "knowledge": "The show aired on PBS.", "response": "pbs"},
           {"id": "b", "history": "and paris?", "knowledge": "Paris is in France.", "response": "no idea"},
           {"id": "c", "history": ["hi", "ok"], "knowledge": "x", "response": "broken"}]


@pytest.fixture
def scripted(monkeypatch):
    scorer = ScriptedScorer({"pbs": 0.5, "no idea": None})  # "broken" is not scripted: an error row
    monkeypatch.setattr(adapters, "shared_scorer", lambda config, slot="default": scorer)
    return scorer


def test_the_metrics_are_the_declared_ones_and_computed_in_batches():
    metrics = q2_lighteval.q2_metrics()
    assert [(m.metric_name, m.higher_is_better) for m in metrics] == [
        (m.framework_key, m.higher_is_better) for m in (*PER_RESPONSE, M.Q2_CI_LOW, M.Q2_CI_HIGH)]
    assert all(m.batched_compute for m in metrics)
    assert [m.corpus_level_fn for m in metrics] == [q2_lighteval.scored_mean] * len(PER_RESPONSE) + [
        q2_lighteval.q2_ci_low, q2_lighteval.q2_ci_high]
    assert len({id(m.sample_level_fn.batch) for m in metrics}) == 1  # one shared batch
    with pytest.raises(TypeError):
        q2_lighteval.q2_metrics(no_such_setting=1)  # a bad setting fails when the task is made, not per sample


def test_a_tasks_samples_are_scored_in_one_core_call(scripted):
    docs = [q2_lighteval.wow_prompt(r, "q2_wow") for r in RECORDS]
    responses = [ModelResponse(text=[r["response"]]) for r in RECORDS]
    metrics = q2_lighteval.q2_metrics()
    outputs = apply_metric(responses=responses, docs=docs, metrics=metrics)  # LightEval's own step
    assert len(scripted.calls) == 1
    assert scripted.calls[0]["responses"] == ["pbs", "no idea", "broken"]
    assert scripted.calls[0]["knowledge"] == [r["knowledge"] for r in RECORDS]
    assert outputs[0] == {"q2": 0.5, "q2_no_nli": 0.5, "q2_coverage": 1.0, "q2_fallback_rate": 0.0,
                          "q2_ci_low": 0.5, "q2_ci_high": 0.5}
    assert math.isnan(outputs[1]["q2"]) and outputs[1]["q2_coverage"] == 0.0  # no valid question: no score
    assert all(math.isnan(v) for v in outputs[2].values())  # an error counts nowhere
    assert q2_lighteval.scored_mean([o["q2"] for o in outputs]) == 0.5
    assert q2_lighteval.scored_mean([o["q2_coverage"] for o in outputs]) == 0.5
    assert "signature=scripted" in str(metrics[0].sample_level_fn)  # what LightEval writes in config_tasks
    apply_metric(responses=responses[:2], docs=docs[:2], metrics=metrics)
    assert len(scripted.calls) == 2  # another batch: one more call


def test_the_fields_come_from_the_sample(scripted):
    docs = [q2_lighteval.wow_prompt(r, "t") for r in RECORDS[:1]]
    assert docs[0].query == "Knowledge: The show aired on PBS.\nApprentice: do you watch tv?\nWizard:"
    batch = q2_lighteval.Q2Batch(history="history")
    batch.results([ModelResponse(text=["pbs"])], docs)
    assert scripted.calls[-1]["history"] == [["do you watch tv?"]]
    with pytest.raises(KeyError, match=r"q2_metrics\(knowledge=...\)"):
        q2_lighteval.Q2Batch(knowledge="passage").results([ModelResponse(text=["pbs"])], docs)


def test_the_task_list_holds_the_custom_tasks_alone():
    from lighteval.tasks.registry import Registry

    original = Registry.load_all_task_configs
    with q2_lighteval.custom_tasks_only():
        configs = Registry.load_all_task_configs("q2_plugins.integrations.lighteval_tasks")
        with pytest.raises(ValueError, match="built-in tasks are not loaded here: name a custom tasks module"):
            Registry.load_all_task_configs(None)
    assert list(configs) == ["q2_wow"] and Registry.load_all_task_configs == original
    with pytest.raises(q2_lighteval.TaskDataError, match="folder of JSON-lines"):
        q2_lighteval.q2_task("x", data=q2_lighteval.SAMPLE_DATA)


def test_docs_example_runs_offline(model_workdir, doc_blocks):
    (block,) = doc_blocks("lighteval")
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block[1]], cwd=model_workdir, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = (model_workdir / "out" / "lighteval").rglob("results_*.json")
    saved = json.loads(results_file.read_text())
    figures = saved["results"]["q2_wow|0"]
    assert {"q2", "q2_no_nli", "q2_coverage", "q2_fallback_rate", "q2_stderr"} <= set(figures)
    assert 0.0 <= figures["q2"] <= 1.0
    config = adapters.config_from_options({"qg_model": "q2-models/qg", "qa_model": "q2-models/qa",
                                           "nli_model": "q2-models/nli"})
    metric = saved["config_tasks"]["q2_wow|0"]["metrics"][0]
    assert f"signature={Q2Scorer(config).signature})" in metric["sample_level_fn"]
    # the documented tasks file, on a folder of records
    (model_workdir / "my_dialogues").mkdir()
    (model_workdir / "my_dialogues" / "dialogues.jsonl").write_text(q2_lighteval.SAMPLE_DATA.read_text())
    (code,) = doc_blocks("lighteval-task")
    namespace: dict = {}
    exec(code[1], namespace)
    (task,) = namespace["TASKS_TABLE"]
    assert task.name == "my_dialogues" and Path(task.hf_repo) == (model_workdir / "my_dialogues").resolve()
    assert task.metrics[0].sample_level_fn.batch.config.qg_model == "q2-models/qg"


def test_the_interval_is_the_one_q2_score_prints_inside_0_1():
    """Seven samples at 1 and one at 0 (a normal interval would pass 1), one unscored (NaN): the task's
    q2_ci_low / q2_ci_high are the bounds of the interval q2 score prints."""
    values = [1.0] * 7 + [0.0, math.nan]
    expected = mean_interval_of([1.0] * 7 + [0.0])[1]
    assert (q2_lighteval.q2_ci_low(values), q2_lighteval.q2_ci_high(values)) == pytest.approx(
        (expected.low, expected.high))
    assert 0 <= expected.low < expected.high <= 1 and math.isnan(q2_lighteval.q2_ci_low([0.5, math.nan]))


def test_a_folder_of_ones_own_gives_its_split_and_a_missing_split_is_one_line(tmp_path):
    """A folder holding test.jsonl: its one split, test, is read (the default was 'train': LightEval's 108-line
    KeyError); a split the folder lacks is one line naming the files, also through the command line."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "test.jsonl").write_text(json.dumps(RECORDS[0]) + "\n", encoding="utf-8")
    assert q2_lighteval.data_splits(folder) == {"test": ["test.jsonl"]}
    assert list(q2_lighteval.q2_task("mine", data=folder).evaluation_splits) == ["test"]
    with pytest.raises(q2_lighteval.TaskDataError) as refused:
        q2_lighteval.q2_task("mine", data=folder, split="train")
    assert str(refused.value) == (
        f"q2: the LightEval task 'mine' reads the split 'train', but {folder} holds test.jsonl: the split(s) test (a "
        f"file's name says its split: test.jsonl is 'test', train.jsonl 'train', others 'train' when no name says "
        f"one); name one with q2_task(..., split=...)")
    tasks = tmp_path / "my_tasks.py"
    tasks.write_text("from q2_plugins.integrations.lighteval import q2_task\n"
                     f"TASKS_TABLE = [q2_task('mine', data={str(folder)!r}, split='train')]\n", encoding="utf-8")
    model_file = str(Path(q2_lighteval.__file__).resolve())
    proc = subprocess.run([sys.executable, "-m", "q2_plugins.integrations.lighteval", "custom", "recorded", model_file,
                           "mine|0", "--custom-tasks", str(tasks), "--output-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == str(refused.value), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr, proc.stderr[-3000:]
