"""benchmarks/bench_rerank.py runs (tiny models, two turns): generation stops at the recorded responses' lengths,
each turn's 5 candidates are the recorded response and 4 distinct edits carrying the recorded decisions, every row
either measures or says why it cannot. It measures and prints; nothing here asserts a speed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "benchmarks" / "bench_rerank.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location("bench_rerank", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_light_edits_are_distinct_and_carry_the_recorded_decisions(bench):
    from benchmarks.bench_pipeline import Oracle
    from q2_plugins.metric.components import Answer

    response = "it aired in the us , canada and latin america"
    edits = bench.light_edits(response)
    assert len(edits) == 4 and len(set(edits + [response])) == 5
    assert len(set(bench.light_edits("hi there") + ["hi there"])) == 5  # short responses too

    class Q:
        def __init__(self, candidate, question):
            self.candidate, self.question, self.knowledge_answer = candidate, question, Answer.span(candidate)

    class R:
        def __init__(self):
            self.response, self.knowledge = response, "k"
            self.questions = [Q("latin america", "where did it air?"), Q("the us", "in what country did it air?")]

    oracle = Oracle([R()])
    bench.add_edits(oracle, response, edits)
    dropped_last = edits[0]  # "... canada and latin": the span "latin america" is gone
    assert oracle.cands[dropped_last] == ["the us"]
    assert oracle.valid[("in what country did it air?", dropped_last)] == "the us"
    assert ("where did it air?", dropped_last) not in oracle.valid
    assert oracle.cands[edits[3]] == ["latin america", "the us"]  # the filler in front keeps both


@pytest.mark.slow
def test_bench_rerank_runs_on_tiny_models(bench, tmp_path, shared_data, capsys):
    out = tmp_path / "rerank.json"
    code = bench.main(["--sizes", "tiny", "--turns", "2", "--data", str(shared_data), "--models-dir",
                       str(tmp_path / "models"), "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    lengths = [t["length"] for t in report["turns"]]
    gen = report["generation"]
    for g, n in zip(gen["per_turn"], lengths):
        assert g["generated_tokens"] == 5 * (n + 1)  # 5 beams of the recorded length, then the end token
    assert gen["batched"]["generated_tokens"] == 5 * sum(n + 1 for n in lengths)
    for t in report["turns"]:
        assert len(set(t["candidates"])) == 5 and t["candidates"][0] == t["response"]
    rows = report["rows"]
    assert set(rows) == set(bench.ROWS) and rows["fp32 default"]["available"]
    printed = capsys.readouterr().out
    for name, row in rows.items():
        if not row["available"]:
            assert row["reason"] and f"| {name} | not available: " in printed
            continue
        assert len(row["per_turn"]) == 2 and all(p["qa_calls"] > 0 and len(p["best"]) == 1 and p["best"][0] in range(5)
                                                 for p in row["per_turn"])
        assert row["batched"]["qa_calls"] > 0 and row["rerank_over_generation_cpu"]["median"] > 0
        if not bench.ROWS[name][3]:  # full scoring: one call over both turns picks what the calls per turn pick
            assert row["batched"]["best"] == [p["best"][0] for p in row["per_turn"]]
        assert set(row["stage_share"]) == {"qa", "qg", "nli", "spacy"}
    assert [t["target"] for t in report["targets"]][0].startswith("rerank CPU per turn, int8 + early stop")
