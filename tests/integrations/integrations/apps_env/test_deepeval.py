"""DeepEval: Q2Metric and Q2ConversationalMetric through ``deepeval.evaluate`` (async, as its users call it), with a
scripted core: what reaches the core (answer, retrieval context, history), one batched core call for the concurrent
``a_measure`` calls, the verdict and the reason, the mean over a conversation's scored turns, and an unscored case
that keeps Q²'s status instead of a number."""

from __future__ import annotations

import pytest

from tests.conftest import optional_import
from tests.fakes import ScriptedScorer

optional_import("deepeval", "deepeval")

from deepeval import evaluate  # noqa: E402
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig  # noqa: E402
from deepeval.test_case import ConversationalTestCase, LLMTestCase, Turn  # noqa: E402

from q2_plugins.integrations.chat import ChatScorer  # noqa: E402
from q2_plugins.integrations.deepeval import DEEPEVAL_WINDOW, Q2ConversationalMetric, Q2Metric  # noqa: E402

QUIET = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)


def run(cases: list, metric) -> dict:
    """``deepeval.evaluate`` as users call it; each case's metric data by the case's name."""
    out = evaluate(test_cases=cases, metrics=[metric], async_config=AsyncConfig(run_async=True, max_concurrent=32),
                   display_config=QUIET)
    return {r.name: r.metrics_data[0] for r in out.test_results}


def test_test_cases_are_scored_in_one_core_call_with_verdict_and_reason(no_network):
    core = ScriptedScorer({f"answer {i}": i / 10 for i in range(6)} | {"no question": None})
    metric = Q2Metric(threshold=0.3, scorer=ChatScorer(core=core, window=1.0))
    cases = [LLMTestCase(name=f"c{i}", input=f"question {i}", actual_output=f"answer {i}",
                         retrieval_context=[f"passage {i}", "more"]) for i in range(6)]
    cases += [LLMTestCase(name="none", input="q", actual_output="no question", context=["only context"]),
              LLMTestCase(name="bad", input="q", actual_output="unscripted", retrieval_context=["p"])]
    data = run(cases, metric)
    assert len(core.calls) == 1 and sorted(core.calls[0]["responses"]) == sorted(c.actual_output for c in cases)
    call = core.calls[0]
    by_response = dict(zip(call["responses"], zip(call["knowledge"], call["history"])))
    assert by_response["answer 2"] == (["passage 2", "more"], ["question 2"])
    assert by_response["no question"] == (["only context"], ["q"])  # context when there is no retrieval_context
    for i in range(6):
        d = data[f"c{i}"]
        assert d.score == pytest.approx(i / 10) and d.success == (i / 10 >= 0.3) and d.error is None
        assert d.reason.startswith(f"Q2 {i / 10:.4f}; status: scored")
    for name, status in (("none", "no_valid_question"), ("bad", "error")):
        assert data[name].score is None and data[name].success is False and data[name].error is None
        assert data[name].reason.startswith(f"unscored; status: {status}")
    assert data["c1"].name == "Q2" and data["c1"].evaluation_model.startswith("Q2")


def test_a_conversation_is_the_mean_of_its_scored_assistant_turns(no_network):
    core = ScriptedScorer({"first": 0.2, "second": 0.8, "mute": None})
    metric = Q2ConversationalMetric(scorer=ChatScorer(core=core, window=1.0))

    def convo(name: str, *answers: str) -> ConversationalTestCase:
        turns = []
        for i, a in enumerate(answers):
            turns += [Turn(role="user", content=f"ask {i}"),
                      Turn(role="assistant", content=a, retrieval_context=[f"passage for {a}"])]
        return ConversationalTestCase(name=name, turns=turns)

    data = run([convo("two", "first", "second"), convo("one scored", "mute", "second"), convo("none", "mute")],
               metric)
    assert data["two"].score == pytest.approx(0.5) and data["two"].success is True
    assert data["one scored"].score == pytest.approx(0.8)  # the unscored turn is left out, not counted as 0
    assert data["none"].score is None and data["none"].success is False
    assert data["none"].reason.startswith("unscored\n[turn 1] unscored; status: no_valid_question")
    reason = data["two"].reason
    assert reason.startswith("Q2 0.5000, the mean over 2 of 2 assistant turns")
    assert "[turn 1] Q2 0.2000" in reason and "[turn 2] Q2 0.8000" in reason
    assert len(core.calls) == 1  # the three conversations' five turns in one core call
    call = core.calls[0]
    seconds = [(call["knowledge"][j], call["history"][j]) for j, r in enumerate(call["responses"]) if r == "second"]
    # each turn against its own retrieval context, the turns before it as its history
    assert sorted(seconds) == [(["passage for second"], ["ask 0", "first", "ask 1"]),
                               (["passage for second"], ["ask 0", "mute", "ask 1"])]


def test_measure_scores_its_case_and_bad_input_fails_loud():
    core = ScriptedScorer({"yes": 0.9})
    metric = Q2Metric(scorer=ChatScorer(core=core))
    assert metric.measure(LLMTestCase(input="q", actual_output="yes", retrieval_context=["k"])) == 0.9
    assert metric.is_successful() and metric.status == "scored" and metric.signature == "scripted"
    with pytest.raises(ValueError, match="neither retrieval_context nor context"):
        metric.measure(LLMTestCase(input="q", actual_output="yes"))
    with pytest.raises(ValueError, match="assistant turn 1 has no retrieval context"):
        Q2ConversationalMetric(scorer=ChatScorer(core=core)).measure(ConversationalTestCase(
            turns=[Turn(role="user", content="q"), Turn(role="assistant", content="yes")]))
    with pytest.raises(ValueError, match="threshold"):
        Q2Metric(threshold=2)
    with pytest.raises(TypeError, match="either scorer= or the settings"):
        Q2Metric(scorer=ChatScorer(core=core), qg_model="x")
    with pytest.raises(TypeError):
        Q2Metric(no_such_setting=1)  # a bad option fails at once, before any case
    # deepeval.evaluate starts its concurrent calls further apart than Inspect: the batches wait longer by default
    assert Q2Metric().scorer.batcher.window == DEEPEVAL_WINDOW == 0.1
    assert Q2Metric(window=0.1).scorer.batcher.window == 0.1


def test_docs_example_runs_offline(run_example):
    *banner, case_1, case_2, conversation = run_example("deepeval")  # (DeepEval prints its own summary first)
    assert case_1.startswith("True ") and case_2.startswith("True "), (case_1, case_2)
    assert conversation.startswith("Q2 ") and conversation.endswith("of 2 assistant turns"), conversation
