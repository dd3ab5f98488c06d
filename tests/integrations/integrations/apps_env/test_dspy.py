"""DSPy: Q2Reward as the reward of ``dspy.BestOfN`` over a module run on DSPy's DummyLM (offline), with a scripted
core: the answer field and the knowledge field the user names, the best answer kept, the early stop at the
threshold, the status of an answer Q² cannot score, and rewards asked at once from DSPy's threads (``Evaluate``,
``Module.batch``) gathered into fewer core calls with the scores each gets alone."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.conftest import optional_import
from tests.fakes import ScriptedScorer

dspy = optional_import("dspy", "dspy")

from dspy.utils import DummyLM  # noqa: E402

from q2_plugins.integrations.chat import ChatScorer  # noqa: E402
from q2_plugins.integrations.dspy import Q2Reward  # noqa: E402


def best_of(answers: list[str], reward: Q2Reward, threshold: float) -> dspy.Prediction:
    with dspy.context(lm=DummyLM([{"reply": a} for a in answers])):
        module = dspy.BestOfN(dspy.Predict("passage, question -> reply"), N=len(answers), reward_fn=reward,
                              threshold=threshold)
        return module(passage="The show aired on PBS.", question="Where did it air?")


def test_best_of_n_keeps_the_answer_q2_prefers(no_network):
    core = ScriptedScorer({"on bbc": 0.1, "on pbs": 0.9, "unsure": None})
    reward = Q2Reward(answer="reply", knowledge="passage", history="question", scorer=ChatScorer(core=core))
    assert best_of(["unsure", "on bbc", "on pbs"], reward, threshold=1.0).reply == "on pbs"
    assert [c["responses"] for c in core.calls] == [["unsure"], ["on bbc"], ["on pbs"]]
    assert core.calls[0]["knowledge"] == ["The show aired on PBS."]
    assert core.calls[0]["history"] == [["Where did it air?"]]
    assert [r.status for r in reward.results] == ["no_valid_question", "scored", "scored"]
    core.calls.clear()
    assert best_of(["on pbs", "on bbc"], reward, threshold=0.5).reply == "on pbs"
    assert len(core.calls) == 1  # the first answer reached the threshold: no second attempt


def test_a_field_that_is_not_there_is_named():
    reward = Q2Reward(answer="reply", knowledge="docs", scorer=ChatScorer(core=ScriptedScorer({"x": 1.0})))
    with pytest.raises(KeyError, match="knowledge field 'docs'"):
        reward({"passage": "p"}, dspy.Prediction(reply="x"))
    assert reward({"docs": ["a", "b"]}, dspy.Prediction(reply="x")) == 1.0
    with pytest.raises(KeyError, match="no answer field 'reply'"):
        reward({"docs": "p"}, dspy.Prediction(answer="x"))


ROWS = [(f"passage {i}", f"reply {i}") for i in range(12)]


def examples(rows: list[tuple[str, str]]) -> list:
    """One example per row; ``tag`` picks the row's reply from the DummyLM whichever thread asks."""
    return [dspy.Example(tag=f"<<{i}>>", passage=p).with_inputs("tag", "passage") for i, (p, _) in enumerate(rows)]


def replies(rows: list[tuple[str, str]]) -> DummyLM:
    return DummyLM({f"<<{i}>>": {"reply": r} for i, (_, r) in enumerate(rows)})


def evaluate(reward: Q2Reward, rows: list[tuple[str, str]], threads: int) -> list:
    """``dspy.Evaluate`` with the reward as its metric, on ``threads`` threads: each row's (prediction, score)."""
    with dspy.context(lm=replies(rows)):
        out = dspy.Evaluate(devset=examples(rows), metric=reward, num_threads=threads, display_progress=False,
                            max_errors=100)(dspy.Predict("tag, passage -> reply"))
    return [(prediction, score) for _, prediction, score in out.results]


def alone(result):
    return dataclasses.replace(result.result, index=0)  # (a result's index is its place in its core call)


def test_rewards_from_evaluate_threads_are_gathered_with_the_scores_they_get_alone(no_network):
    table = {r: i / 20 for i, (_, r) in enumerate(ROWS)} | {"reply 3": None}
    core = ScriptedScorer(table)
    reward = Q2Reward(answer="reply", knowledge="passage", scorer=ChatScorer(core=core, window=0.5))
    got = evaluate(reward, ROWS, threads=len(ROWS))
    assert len(core.calls) < len(ROWS)  # the concurrent rewards share core calls
    assert sorted(r for call in core.calls for r in call["responses"]) == sorted(r for _, r in ROWS)

    one_by_one = Q2Reward(answer="reply", knowledge="passage", scorer=ChatScorer(core=ScriptedScorer(table)))
    expected = [one_by_one({"passage": p}, dspy.Prediction(reply=r)) for p, r in ROWS]
    assert [score for _, score in got] == expected and expected[3] == 0.0 and expected[5] == 0.25
    assert sorted(map(repr, map(alone, reward.results))) == sorted(map(repr, map(alone, one_by_one.results)))


def test_best_of_n_batch_gathers_the_attempts_of_its_threads(no_network):
    core = ScriptedScorer({r: 0.5 for _, r in ROWS})
    reward = Q2Reward(answer="reply", knowledge="passage", scorer=ChatScorer(core=core, window=0.5))
    best = dspy.BestOfN(dspy.Predict("tag, passage -> reply"), N=2, reward_fn=reward, threshold=1.0)
    with dspy.context(lm=replies(ROWS)):
        out = best.batch(examples(ROWS), num_threads=len(ROWS), disable_progress_bar=True)
    assert [p.reply for p in out] == [r for _, r in ROWS]
    assert len(reward.results) == 2 * len(ROWS) and len(core.calls) < 2 * len(ROWS)
    assert sorted(r for call in core.calls for r in call["responses"]) == sorted(2 * [r for _, r in ROWS])


class FailsOn(ScriptedScorer):
    """A core call that holds ``bad`` raises (after recording the call)."""

    def __init__(self, table: dict, bad: str) -> None:
        super().__init__(table)
        self.bad = bad

    def score(self, **kwargs):
        res = super().score(**kwargs)
        if self.bad in kwargs["responses"]:
            raise RuntimeError("the core failed")
        return res


def test_an_error_fails_the_calls_of_its_batch_only(no_network):
    rows = ROWS[:8]
    core = FailsOn({r: 0.5 for _, r in rows}, bad="reply 2")
    # batches of 4: the eight threads' rewards fill two, one of which holds the reply the core fails on
    reward = Q2Reward(answer="reply", knowledge="passage", scorer=ChatScorer(core=core, window=1.0, max_batch=4))
    got = evaluate(reward, rows, threads=len(rows))
    assert sorted(len(call["responses"]) for call in core.calls) == [4, 4]
    (failed_call,) = [c["responses"] for c in core.calls if "reply 2" in c["responses"]]
    failed = [r for (_, r), (prediction, _) in zip(rows, got) if "reply" not in prediction]  # Evaluate's failure
    assert sorted(failed) == sorted(failed_call)
    assert [score for (_, r), (_, score) in zip(rows, got) if r not in failed] == [0.5] * 4
    assert len(reward.results) == 4


def test_a_caller_on_its_own_waits_the_window_once():
    core = ScriptedScorer({"x": 1.0})
    reward = Q2Reward(answer="reply", knowledge="passage", scorer=ChatScorer(core=core, window=0.3))
    took = []
    for _ in range(4):
        start = time.perf_counter()
        assert reward({"passage": "p"}, dspy.Prediction(reply="x")) == 1.0
        took.append(time.perf_counter() - start)
    assert took[0] >= 0.3 and max(took[1:]) < 0.1, took  # no other thread: the calls after the first run at once
    assert len(core.calls) == 4


def test_docs_example_runs_offline(run_example):
    reply, statuses = run_example("dspy")
    assert reply in ("it aired on bbc .", "it aired on pbs .") and statuses.startswith("['"), (reply, statuses)
