"""DSPy: Q2Reward as the reward of ``dspy.BestOfN`` over a module run on DSPy's DummyLM (offline), with a scripted
core: the answer field and the knowledge field the user names, the best answer kept, the early stop at the
threshold, and the status of an answer Q² cannot score."""

from __future__ import annotations

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


def test_docs_example_runs_offline(run_example):
    reply, statuses = run_example("dspy")
    assert reply in ("it aired on bbc .", "it aired on pbs .") and statuses.startswith("['"), (reply, statuses)
