"""Inspect: the micro-batcher (concurrent calls in one batch, the size cap, errors reach every caller, one batch at a
time, a cancelled leader's batch run by another of its calls), the Score of a result (value, status, questions and
answers), the scorer inside an Inspect eval (one core call for the samples; answers arriving in waves, with scripted
and with tiny models: every sample scored; a recorded response that is no text: unscored with its reason) and the
documented example offline on the tiny models. Runs in .venv-lighteval (scripts/setup_lighteval.sh)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("inspect_ai", "inspect")

import anyio  # noqa: E402
from inspect_ai import Task  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.model import ModelOutput  # noqa: E402
from inspect_ai.solver import solver  # noqa: E402

import q2_plugins.integrations.adapters as adapters  # noqa: E402
from q2_plugins.datasets import bundled_path  # noqa: E402
from q2_plugins.integrations.inspect import MicroBatcher, q2_scorer, recorded_response, score_of  # noqa: E402
from q2_plugins.metric.results import Q2Result, QuestionResult, ResponseResult, ResponseStatus  # noqa: E402
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
    # Inspect puts the package in front of a metric's name where it finds q2-plugins installed ("q2_plugins/ci_low"),
    # not for a checkout on the path ("ci_low")
    named = {k.rpartition("/")[2]: v for k, v in metrics["q2"].items()}
    assert set(named) == {"mean", "stderr", "ci_low", "ci_high"}, metrics["q2"]
    got = (named["ci_low"], named["ci_high"])
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


# -- answers in waves, cancelled leaders, responses that are no text ------------------------------------------------
@solver
def answers_in_waves(field: str = "response", waves: int = 3, gap: float = 0.4):
    """Answers with the recorded response after 0, ``gap``, 2 ``gap``... seconds, one wave per ``waves``-th of the
    samples (by id), as a model's answers reach the scorer."""

    async def solve(state, generate):
        await anyio.sleep(gap * (int(state.sample_id) * waves // state.metadata["n"]))
        state.output = ModelOutput.from_content(model="waves", content=state.metadata[field])
        return state

    return solve


class SlowFirstLoad(ScriptedScorer):
    """A scripted scorer that loads its models on the first call (0.6 s) and, as two loads at once do, gives every
    row an error when a call overlaps another."""

    def __init__(self, table):
        super().__init__(table)
        self.busy, self.overlaps = threading.Lock(), 0

    def score(self, *, responses, knowledge, history=None, explain=False):
        if not self.busy.acquire(blocking=False):
            self.overlaps += 1
            return Q2Result([ResponseResult(i, ResponseStatus.ERROR, error="Cannot copy out of meta tensor")
                             for i in range(len(responses))], self.signature)
        try:
            time.sleep(0.6 if not self.calls else 0.05)
            return super().score(responses=responses, knowledge=knowledge, history=history, explain=explain)
        finally:
            self.busy.release()


def _wave_samples(n: int) -> list:
    return [Sample(input=f"q{i}", id=i, metadata={"knowledge": f"k{i}", "response": f"answer {i}", "n": n})
            for i in range(n)]


def test_answers_in_waves_are_all_scored_one_batch_at_a_time(monkeypatch, tmp_path):
    scorer = SlowFirstLoad({f"answer {i}": i / 100 for i in range(30)})
    monkeypatch.setattr(adapters, "shared_scorer", lambda config, slot="default": scorer)
    the_scorer = q2_scorer()
    (log,) = inspect_eval(Task(dataset=_wave_samples(30), solver=answers_in_waves(), scorer=the_scorer),
                          model="mockllm/model", log_dir=str(tmp_path), display="none", max_samples=30)
    assert log.status == "success", log.error
    assert scorer.overlaps == 0
    values = {s.id: s.scores["q2_scorer"].value["q2"] for s in log.samples}
    assert values == {i: pytest.approx(i / 100) for i in range(30)}  # every sample scored, each its own
    assert the_scorer.batcher.batches >= 2  # the waves were batches of their own, run one after another


def test_answers_in_waves_are_all_scored_by_the_tiny_models(tiny_config, monkeypatch, tmp_path):
    monkeypatch.setattr(adapters, "_SHARED", {})  # models loaded by this eval's batches, not an earlier test's
    rows = [json.loads(line) for line in bundled_path("sample.jsonl").read_text(encoding="utf-8").splitlines()]
    samples = [Sample(input=r["history"], id=i, metadata={**r, "n": len(rows)}) for i, r in enumerate(rows)]
    settings = {"qg_model": tiny_config.qg_model, "qa_model": tiny_config.qa_model,
                "nli_model": tiny_config.nli_model, "qg_max_length": tiny_config.qg_max_length}
    (log,) = inspect_eval(Task(dataset=samples, solver=answers_in_waves(gap=0.2), scorer=q2_scorer(**settings)),
                          model="mockllm/model", log_dir=str(tmp_path), display="none", max_samples=len(rows))
    assert log.status == "success", log.error
    scores = [s.scores["q2_scorer"] for s in log.samples]
    # (the tiny models find no valid question: each score is the end-to-end NLI fallback's)
    assert all(s.metadata["status"] != "error" and not math.isnan(s.value["q2"]) for s in scores), [
        s.explanation for s in scores]


def _leader_cancelled(while_: str) -> dict:
    """Three calls of one batch; the first (its leader) cancelled during its window (``"window"``) or while the
    batch before holds the lock (``"lock"``). The other two must get their results (within 5 s)."""
    runs = []

    def run_batch(items):
        runs.append(list(items))
        time.sleep(0.5 if items == ["before"] else 0)
        return [f"{x}!" for x in items]

    batcher = MicroBatcher(run_batch, window=0.3)
    got: dict = {}

    async def call(x):
        got[x] = await batcher.submit(x)

    async def main():
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                if while_ == "lock":
                    group.start_soon(call, "before")
                    await anyio.sleep(0.35)  # its batch is running
                leader = anyio.CancelScope()

                async def lead():
                    with leader:
                        await call("leader")

                group.start_soon(lead)
                await anyio.sleep(0.01)
                group.start_soon(call, "a")
                group.start_soon(call, "b")
                await anyio.sleep(0.1)
                leader.cancel()

    anyio.run(main)
    return got


@pytest.mark.parametrize("while_", ["window", "lock"])
def test_a_leader_cancelled_before_its_batch_ran_leaves_no_call_hanging(while_):
    got = _leader_cancelled(while_)
    assert got["a"] == "a!" and got["b"] == "b!" and "leader" not in got


def test_a_recorded_response_that_is_no_text_is_unscored_with_its_reason(monkeypatch, tmp_path):
    scorer = ScriptedScorer({"answer": 0.5, "None": 1.0, "5": 1.0})
    monkeypatch.setattr(adapters, "shared_scorer", lambda config, slot="default": scorer)
    samples = [Sample(input="q", id=i, metadata={"knowledge": "k", "response": r})
               for i, r in enumerate(["answer", None, 5])]
    (log,) = inspect_eval(Task(dataset=samples, solver=recorded_response(), scorer=q2_scorer()),
                          model="mockllm/model", log_dir=str(tmp_path), display="none", max_samples=3)
    assert log.status == "success", log.error
    scores = {s.id: s.scores["q2_scorer"] for s in log.samples}
    assert scores[0].value["q2"] == pytest.approx(0.5)
    for i, why in ((1, "missing (None)"), (2, "int, not text")):
        value = scores[i].value
        assert all(math.isnan(v) for v in (value.values() if isinstance(value, dict) else [value])), value
        assert why in (scores[i].reason or "") and why in scores[i].explanation, (scores[i].reason, scores[i])
    assert [c["responses"] for c in scorer.calls] == [["answer"]]  # what is no text never reached the scorer
