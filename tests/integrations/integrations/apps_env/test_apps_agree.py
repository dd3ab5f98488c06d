"""The 12 bundled rows (``q2_plugins/data/sample.jsonl``) through DeepEval, Ragas and DSPy, each through its own
runner as its users call it (``deepeval.evaluate`` with the test cases scored concurrently, ``ragas.evaluate`` on an
``EvaluationDataset``, ``dspy.BestOfN`` over a module on DSPy's DummyLM), on the tiny models: the same scores as one
``Q2Scorer.score`` call on the same rows, under the same signature, each row's result its own (the candidate counts
line up by id), with no connection beyond this machine. The other front ends make the same check in .venv-lighteval
(``test_front_ends_agree.py``)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import optional_import

optional_import("deepeval", "deepeval")
optional_import("ragas", "ragas")
dspy = optional_import("dspy", "dspy")

from q2_plugins import Q2Scorer  # noqa: E402
from q2_plugins.datasets import bundled_path  # noqa: E402

ROWS = [json.loads(line) for line in bundled_path("sample.jsonl").read_text(encoding="utf-8").splitlines()]
IDS = [r["id"] for r in ROWS]


def _deepeval(config) -> tuple:
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
    from deepeval.test_case import LLMTestCase

    from q2_plugins.integrations.deepeval import Q2Metric

    metric = Q2Metric(config=config, window=1.0)
    cases = [LLMTestCase(name=r["id"], input=r["history"], actual_output=r["response"],
                         retrieval_context=[r["knowledge"]]) for r in ROWS]
    out = evaluate(test_cases=cases, metrics=[metric], async_config=AsyncConfig(max_concurrent=len(ROWS)),
                   display_config=DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False))
    assert metric.scorer.calls == 1  # the twelve concurrent a_measure calls in one core call
    by_id = {t.name: t.metrics_data[0] for t in out.test_results}
    assert all(by_id[i].reason.startswith("Q2 ") for i in IDS)
    return [by_id[i].score for i in IDS], {metric.scorer.signature}


def _ragas(config) -> tuple:
    from ragas import EvaluationDataset, evaluate
    from ragas.dataset_schema import SingleTurnSample
    from ragas.run_config import RunConfig

    from q2_plugins.integrations.ragas import Q2

    metric = Q2(config=config, window=1.0)
    samples = [SingleTurnSample(user_input=r["history"], response=r["response"], retrieved_contexts=[r["knowledge"]])
               for r in ROWS]
    out = evaluate(EvaluationDataset(samples=samples), metrics=[metric], show_progress=False,
                   run_config=RunConfig(max_workers=len(ROWS)))
    assert metric.scorer is not None and metric.scorer.calls == 1  # the dataset's one batch in one core call
    signatures = {r.signature for r in metric.last_results}
    return [row["q2"] for row in out.scores], signatures


def _dspy(config) -> tuple:
    from dspy.utils import DummyLM

    from q2_plugins.integrations.dspy import Q2Reward

    reward = Q2Reward(answer="response", knowledge="knowledge", history="history", config=config)
    best = dspy.BestOfN(dspy.Predict("knowledge, history -> response"), N=1, reward_fn=reward, threshold=0.0)
    with dspy.context(lm=DummyLM([{"response": r["response"]} for r in ROWS])):
        answers = [best(knowledge=r["knowledge"], history=r["history"]).response for r in ROWS]
    assert answers == [r["response"] for r in ROWS]  # each row's recorded response reached the reward
    return [s.score for s in reward.results], {s.signature for s in reward.results}, [
        s.result.num_candidates for s in reward.results]


def test_deepeval_ragas_and_dspy_give_the_core_scores(tiny_config, no_network, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = Q2Scorer(tiny_config).score(responses=[r["response"] for r in ROWS],
                                         knowledge=[r["knowledge"] for r in ROWS])
    python, signature = result.scores, str(result.signature)
    assert len(python) == 12 and all(s is not None for s in python)
    deepeval_scores, deepeval_signatures = _deepeval(tiny_config)
    ragas_scores, ragas_signatures = _ragas(tiny_config)
    dspy_scores, dspy_signatures, dspy_candidates = _dspy(tiny_config)
    for name, scores in (("deepeval", deepeval_scores), ("ragas", ragas_scores), ("dspy", dspy_scores)):
        assert scores == pytest.approx(python, abs=1e-9), name
    assert deepeval_signatures == ragas_signatures == dspy_signatures == {signature}
    assert dspy_candidates == [r.num_candidates for r in result.responses]
    assert no_network == []
