"""Inspect: the micro-batcher (concurrent calls in one batch, the size cap, errors reach every caller), the Score of
a result (value, status, questions and answers), the scorer inside an Inspect eval (one core call for the samples)
and the documented example offline on the tiny models. Runs in .venv-lighteval (scripts/setup_lighteval.sh)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("inspect_ai", "inspect")

import anyio  # noqa: E402
from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402

import q2_plugins.integrations.adapters as adapters  # noqa: E402
from q2_plugins.integrations.inspect import MicroBatcher, q2_scorer, recorded_response, score_of  # noqa: E402
from q2_plugins.metric.results import QuestionResult, ResponseResult, ResponseStatus  # noqa: E402
from q2_plugins.metric.significance import mean_interval_of  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402


def _gather(batcher: MicroBatcher, items: list) -> list:
    out: list = [None] * len(items)

    async def one(i: int) -> None:
        out[i] = await batcher.submit(items[i])

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for i in range(len(items)):
                group.start_soon(one, i)

    anyio.run(main)
    return out


def test_concurrent_calls_are_one_batch_and_get_their_own_results():
    seen = []
    batcher = MicroBatcher(lambda items: seen.append(list(items)) or [x * 10 for x in items], window=0.5)
    assert _gather(batcher, list(range(10))) == [x * 10 for x in range(10)]
    assert batcher.batches == 1 and sorted(seen[0]) == list(range(10))


def test_a_full_batch_goes_at_once_and_the_rest_make_the_next():
    sizes = []
    batcher = MicroBatcher(lambda items: sizes.append(len(items)) or list(items), max_batch=4, window=0.5)
    assert _gather(batcher, list(range(10))) == list(range(10))
    assert sorted(sizes) == [2, 4, 4]


def test_a_failed_batch_fails_every_call_in_it():
    def boom(items):
        raise RuntimeError("models did not load")

    batcher = MicroBatcher(boom, window=0.1)
    with pytest.raises(BaseException) as caught:
        _gather(batcher, [1, 2, 3])
    messages = [str(e) for e in getattr(caught.value, "exceptions", [caught.value])]
    assert messages == ["models did not load"] * 3
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatcher(boom, max_batch=0)


def test_the_score_carries_value_status_and_questions():
    question = QuestionResult(candidate="PBS", question="where did it air?", response_answer="pbs",
                              knowledge_answer="PBS", knowledge_answer_kind="span", f1=1.0, nli_label=None, score=1.0)
    scored = score_of(ResponseResult(0, ResponseStatus.SCORED, score=1.0, score_no_nli=0.5, num_questions=1,
                                     candidates=["PBS"], questions=[question], dropped=[]), "pbs", "sig")
    assert scored.value == {"q2": 1.0, "q2_no_nli": 0.5} and scored.answer == "pbs"
    assert scored.explanation.splitlines() == [
        "status: scored", "Q: where did it air? | response: pbs | knowledge: PBS (f1 1.00, nli None, score 1.00)"]
    assert scored.metadata["status"] == "scored" and scored.metadata["q2_signature"] == "sig"
    assert scored.metadata["q2"]["questions"][0]["question"] == "where did it air?"
    unscored = score_of(ResponseResult(1, ResponseStatus.ERROR, error="empty response"), "", "sig")
    assert math.isnan(unscored.as_float()) if not isinstance(unscored.value, dict) else all(
        math.isnan(v) for v in unscored.value.values())
    assert unscored.explanation == "status: error (empty response)"


def test_an_eval_scores_its_samples_in_one_core_call(monkeypatch, tmp_path):
    scorer = ScriptedScorer({f"answer {i}": i / 10 for i in range(8)})
    monkeypatch.setattr(adapters, "shared_scorer", lambda config, slot="default": scorer)
    samples = [Sample(input=f"q{i}", id=i, metadata={"passage": f"k{i}", "response": f"answer {i}"})
               for i in range(8)]
    the_scorer = q2_scorer(knowledge="passage", window=1.0)
    (log,) = inspect_eval(Task(dataset=samples, solver=recorded_response(), scorer=the_scorer),
                          model="mockllm/model", log_dir=str(tmp_path), display="none", max_samples=8)
    assert log.status == "success", log.error
    assert len(scorer.calls) == 1 and sorted(scorer.calls[0]["knowledge"]) == [f"k{i}" for i in range(8)]
    values = {s.id: s.scores["q2_scorer"].value["q2"] for s in log.samples}
    assert values == {i: pytest.approx(i / 10) for i in range(8)}
    # the eval's metrics: the mean, its standard error and the interval q2 score prints (inside [0, 1])
    metrics = {s.name: {k: m.value for k, m in s.metrics.items()} for s in log.results.scores}
    expected = mean_interval_of([i / 10 for i in range(8)])[1]
    got = (metrics["q2"]["q2_plugins/ci_low"], metrics["q2"]["q2_plugins/ci_high"])  # (Inspect names them by package)
    assert got == pytest.approx((expected.low, expected.high))
    # a sample without the knowledge field: the eval reports the one line that says what to name
    (log,) = inspect_eval(Task(dataset=samples[:1], solver=recorded_response(), scorer=q2_scorer()),
                          model="mockllm/model", log_dir=str(tmp_path), display="none")
    assert log.status == "error" and "q2_scorer(knowledge=...)" in str(log.error)


def test_docs_example_runs_offline(model_workdir, doc_blocks):
    (block,) = doc_blocks("inspect")
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-c", block[1]], cwd=model_workdir, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("{'q2': ") for line in lines), proc.stdout
