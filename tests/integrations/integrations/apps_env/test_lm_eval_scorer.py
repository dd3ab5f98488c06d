"""lm-eval's 0.5 pre-release: the ``q2`` scorer through ``lm_eval.simple_evaluate`` on the 12 bundled rows, as a task
that names it (``scorer: {type: q2, ...}``), with a model that answers each row's recorded response: the task in one
core call, the core's mean and signature."""

from __future__ import annotations

import json

import pytest

from tests.conftest import optional_import

lm_eval = optional_import("lm_eval", "lm-eval-next")

from q2_plugins import Q2Scorer  # noqa: E402
from q2_plugins.datasets import bundled_path  # noqa: E402

ROWS = [json.loads(line) for line in bundled_path("sample.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_task_scored_by_q2_gives_the_core_figure_in_one_call(tiny_config, no_network, monkeypatch):
    import datasets

    from q2_plugins.integrations.lm_eval_scorer import Q2LmEvalScorer
    from tests.fakes import recorded_lm

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("Q2_LM_EVAL_CONFIG", raising=False)
    settings = {"qg_model": tiny_config.qg_model, "qa_model": tiny_config.qa_model,
                "nli_model": tiny_config.nli_model, "qg_max_length": tiny_config.qg_max_length}
    task = {"task": "q2_smoke", "output_type": "generate_until", "test_split": "test",
            "custom_dataset": lambda **_: datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}),
            "doc_to_text": "{{history}}", "doc_to_target": "{{knowledge}}",
            "scorer": {"type": "q2", "kwargs": {"options": settings}}}
    calls = Q2LmEvalScorer.calls
    out = lm_eval.simple_evaluate(model=recorded_lm(), tasks=[task])
    result = Q2Scorer(tiny_config).score(responses=[r["response"] for r in ROWS],
                                         knowledge=[r["knowledge"] for r in ROWS])
    figures = out["results"]["q2_smoke"]
    assert figures["sample_len"] == 12 and Q2LmEvalScorer.calls == calls + 1  # the task in one core call
    assert figures["q2,none"] == pytest.approx(result.score, abs=1e-9)
    assert figures["q2_no_nli,none"] == pytest.approx(result.score_no_nli, abs=1e-9)
    assert Q2LmEvalScorer.signature == str(result.signature)


def test_docs_example_runs_offline(run_example):
    assert run_example("lm-eval-next")[-1] == (
        "2 ['q2,none', 'q2_no_nli,none', 'q2_no_nli_stderr,none', 'q2_stderr,none']")
