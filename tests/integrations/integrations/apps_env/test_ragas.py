"""Ragas: the Q2 metric through ``ragas.evaluate`` on an ``EvaluationDataset``, with a scripted core: one batched
core call per batch of concurrent samples, single-turn samples (response, retrieved_contexts, user_input) and
multi-turn samples (each AI message against its own contexts), NaN (Ragas's "no value") for an unscored sample,
which Ragas's mean leaves out as Q²'s does."""

from __future__ import annotations

import math

import pytest

from tests.conftest import optional_import
from tests.fakes import ScriptedScorer

optional_import("ragas", "ragas")

from ragas import EvaluationDataset, evaluate  # noqa: E402
from ragas.dataset_schema import MultiTurnSample, SingleTurnSample  # noqa: E402
from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage  # noqa: E402
from ragas.run_config import RunConfig  # noqa: E402

from q2_plugins.integrations.chat import ChatScorer  # noqa: E402
from q2_plugins.integrations.ragas import Q2  # noqa: E402


def test_single_turn_samples_are_scored_one_core_call_per_batch(no_network):
    core = ScriptedScorer({f"answer {i}": i / 10 for i in range(7)} | {"no question": None})
    samples = [SingleTurnSample(user_input=f"question {i}", response=f"answer {i}", retrieved_contexts=[f"p {i}"])
               for i in range(7)] + [SingleTurnSample(user_input="q", response="no question", retrieved_contexts=["p"])]
    metric = Q2(scorer=ChatScorer(core=core, window=1.0))
    result = evaluate(EvaluationDataset(samples=samples), metrics=[metric], show_progress=False,
                      run_config=RunConfig(max_workers=8), batch_size=4)
    values = [row["q2"] for row in result.scores]
    assert values[:7] == pytest.approx([i / 10 for i in range(7)]) and math.isnan(values[7])
    assert result._repr_dict["q2"] == pytest.approx(sum(i / 10 for i in range(7)) / 7)  # the unscored one left out
    assert [len(c["responses"]) for c in core.calls] == [4, 4]  # one core call per batch of 4
    first = core.calls[0]
    assert (first["responses"][0], first["knowledge"][0], first["history"][0]) in [
        (f"answer {i}", [f"p {i}"], [f"question {i}"]) for i in range(4)]
    assert {r.status for r in metric.last_results} == {"scored", "no_valid_question"}


def test_a_multi_turn_sample_scores_each_ai_message_against_its_own_contexts(no_network):
    core = ScriptedScorer({"from tool": 0.4, "from metadata": 1.0})
    sample = MultiTurnSample(user_input=[
        HumanMessage(content="hi"), AIMessage(content="", tool_calls=[ToolCall(name="search", args={"q": "hi"})]),
        ToolMessage(content="retrieved passage"), AIMessage(content="from tool"),
        HumanMessage(content="more"),
        AIMessage(content="from metadata", metadata={"retrieved_contexts": ["own passage"]})])
    metric = Q2(scorer=ChatScorer(core=core, window=0.5))
    result = evaluate(EvaluationDataset(samples=[sample]), metrics=[metric], show_progress=False)
    assert result.scores[0]["q2"] == pytest.approx(0.7)
    (call,) = core.calls
    assert call["responses"] == ["from tool", "from metadata"]
    assert call["knowledge"] == [["retrieved passage"], ["own passage"]]
    assert call["history"] == [["hi"], ["hi", "from tool", "more"]]
    with pytest.raises(ValueError, match="assistant turn 1 has no retrieval context"):
        metric.multi_turn_score(MultiTurnSample(user_input=[HumanMessage(content="q"), AIMessage(content="a")]))
    with pytest.raises(TypeError):
        Q2(options={"no_such_setting": 1})


def test_docs_example_runs_offline(run_example):
    assert run_example("ragas") == ["2 1 ['q2']"]  # two samples, one core call
