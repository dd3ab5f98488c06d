"""The 12 bundled rows (``q2_plugins/data/sample.jsonl``) scored through every front end, the CLI, Python,
``evaluate``, lm-eval, LightEval and Inspect, with the same settings on the tiny models, give the same scores, so a
user can move between them, under the same signature, each row's result its own (the tiny models give every row the
same score; the per-row candidate counts line up by id). Each framework runs through its own entry point with a model
that answers with the recorded response. Runs in .venv-lighteval (scripts/setup_lighteval.sh), which has all six."""

from __future__ import annotations

import json
import shutil
import types

import pytest

from tests.conftest import optional_import

optional_import("lighteval", "lighteval")
optional_import("inspect_ai", "inspect")
optional_import("evaluate", "evaluate")
optional_import("lm_eval", "lm-eval")

from q2_plugins import Q2Scorer  # noqa: E402
from q2_plugins.datasets import bundled_path  # noqa: E402

ROWS = [json.loads(line) for line in bundled_path("sample.jsonl").read_text(encoding="utf-8").splitlines()]
IDS = [r["id"] for r in ROWS]


def _settings(tiny_config) -> dict:
    return {"qg_model": tiny_config.qg_model, "qa_model": tiny_config.qa_model, "nli_model": tiny_config.nli_model,
            "qg_max_length": tiny_config.qg_max_length}


def _cli(settings, tmp_path) -> list:
    from q2_plugins.cli import main

    out = tmp_path / "cli.jsonl"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
    assert main(["score", "--input", str(bundled_path("sample.jsonl")), "--output", str(out), "--no-progress",
                 *flags]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    signature = json.loads((tmp_path / "cli.jsonl.meta.json").read_text())["signature"]
    return [r["score"] for r in rows], signature, [r["num_candidates"] for r in rows]


def _evaluate(settings) -> list:
    import evaluate

    out = evaluate.load("q2", **settings).compute(predictions=[r["response"] for r in ROWS],
                                                  knowledge=[r["knowledge"] for r in ROWS], explain=True)
    return out["scores"], out["hashcode"], [r["num_candidates"] for r in out["explanations"]]


def _lm_eval(settings, tmp_path) -> list:
    import lm_eval

    import q2_plugins.integrations.lm_eval as ext
    from tests.fakes import recorded_lm

    data = tmp_path / "lm_eval.jsonl"
    data.write_text("".join(json.dumps({**r, "history": [r["history"]]}) + "\n" for r in ROWS))
    manager = ext.task_manager(metadata={"q2": settings, "q2_wow_data": str(data)})
    out = lm_eval.simple_evaluate(model=recorded_lm(), tasks=["q2_wow"], task_manager=manager, log_samples=True)
    by_id = {s["doc"]["id"]: s for s in out["samples"]["q2_wow"]}
    signature = out["configs"]["q2_wow"]["metadata"]["q2_signature"]
    return ([by_id[i].get("q2") for i in IDS], signature,
            [by_id[i]["q2_details"]["num_candidates"] for i in IDS])


def _lighteval(tiny_config, tmp_path) -> list:
    from lighteval.logging.evaluation_tracker import EvaluationTracker
    from lighteval.models.custom.custom_model import CustomModelConfig
    from lighteval.pipeline import ParallelismManager, Pipeline, PipelineParameters

    from q2_plugins.integrations import lighteval as q2_lighteval

    folder = tmp_path / "lighteval_data"
    folder.mkdir()
    shutil.copy(bundled_path("sample.jsonl"), folder / "test.jsonl")
    tasks = types.ModuleType("q2_agreement_tasks")
    tasks.TASKS_TABLE = [q2_lighteval.q2_task("q2_agree", data=folder, split="test", config=tiny_config)]
    model = q2_lighteval.RecordedResponses(CustomModelConfig(
        model_name="recorded", model_definition_file_path=q2_lighteval.__file__, cache_dir=str(tmp_path / "cache")))
    with q2_lighteval.custom_tasks_only():
        pipeline = Pipeline(tasks="q2_agree|0", model=model,
                            pipeline_parameters=PipelineParameters(launcher_type=ParallelismManager.CUSTOM,
                                                                   custom_tasks_directory=tasks),
                            evaluation_tracker=EvaluationTracker(output_dir=str(tmp_path / "lighteval")))
        pipeline.evaluate()
    details = pipeline.evaluation_tracker.details_logger.details["q2_agree|0"]
    by_id = {d.doc.specific["id"]: d.metric["q2"] for d in details}
    batch = tasks.TASKS_TABLE[0].metrics[0].sample_level_fn.batch
    assert batch.calls == 1  # the task in one core call
    return [by_id[i] for i in IDS], batch.signature, None


def _inspect(settings, tmp_path) -> list:
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample

    from q2_plugins.integrations.inspect import q2_scorer, recorded_response

    samples = [Sample(input=r["history"], id=r["id"], metadata=r) for r in ROWS]
    scorer = q2_scorer(**settings, window=1.0)
    (log,) = inspect_eval(Task(dataset=samples, solver=recorded_response(), scorer=scorer), model="mockllm/model",
                          log_dir=str(tmp_path / "inspect"), display="none", max_samples=len(ROWS))
    assert log.status == "success", log.error
    assert scorer.batcher.batches == 1  # the twelve concurrent calls in one core call
    by_id = {s.id: s.scores["q2_scorer"] for s in log.samples}
    return ([by_id[i].value["q2"] for i in IDS], by_id[IDS[0]].metadata["q2_signature"],
            [by_id[i].metadata["q2"]["num_candidates"] for i in IDS])


def test_every_front_end_gives_the_same_scores(tiny_config, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    settings = _settings(tiny_config)
    result = Q2Scorer(tiny_config).score(responses=[r["response"] for r in ROWS],
                                         knowledge=[r["knowledge"] for r in ROWS])
    python, candidates = result.scores, [r.num_candidates for r in result.responses]
    assert len(python) == 12 and all(s is not None for s in python)
    front_ends = {"cli": _cli(settings, tmp_path), "evaluate": _evaluate(settings),
                  "lm-eval": _lm_eval(settings, tmp_path), "lighteval": _lighteval(tiny_config, tmp_path),
                  "inspect": _inspect(settings, tmp_path)}
    for name, (scores, signature, their_candidates) in front_ends.items():
        assert scores == pytest.approx(python, abs=1e-9), name
        assert str(signature) == str(result.signature), name  # the same settings reached the core
        # each row's own result, not only equal figures: the candidates counted per row line up by id
        assert their_candidates in (None, candidates), name
