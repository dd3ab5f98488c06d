"""The next chunk's candidates, extracted ahead in a thread (runs whose models are on a GPU), are the candidates the
scorer extracts itself: results identical, and the foreground parses none of the responses done ahead."""

from __future__ import annotations

import json
from pathlib import Path

from q2_plugins import Q2Config
from q2_plugins.ahead import off_cpu
from q2_plugins.jobs.local import _with_next
from q2_plugins.scorer import Q2Scorer

SAMPLE = Path(__file__).resolve().parents[2] / "q2_plugins" / "data" / "sample.jsonl"


def test_candidates_done_ahead_give_identical_results(tiny_config):
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()][:6]
    first, second = rows[:3], rows[3:]
    config = tiny_config.replace(cpu_kernels="torch")
    plain = Q2Scorer(config)
    expected = [plain.score(responses=[r["response"] for r in part], knowledge=[r["knowledge"] for r in part],
                            explain=True).responses for part in (first, second)]
    scorer = Q2Scorer(config)
    scorer.ahead([r["response"] for r in second])
    foreground = []
    inner = scorer.candidate_extractor
    real = inner.extract
    inner.extract = lambda texts: foreground.extend(texts) or real(texts)
    got = [scorer.score(responses=[r["response"] for r in part], knowledge=[r["knowledge"] for r in part],
                        explain=True).responses for part in (first, second)]
    assert [[r.to_dict() for r in part] for part in got] == [[r.to_dict() for r in part] for part in expected]
    assert not set(foreground) & {r["response"] for r in second}  # the second chunk's were done ahead
    assert set(foreground) >= {r["response"] for r in first}


def test_chunks_hand_the_next_one_ahead():
    seen = []
    chunks = [[{"response": "a"}], [{"response": "b"}, {"response": "c"}], [{"response": "d"}]]
    out = []
    for chunk in _with_next(iter(chunks), seen.append, "response"):
        out.append(chunk)
        assert len(seen) == min(len(out), 2)  # handed over before the current chunk is scored
    assert out == chunks and seen == [["b", "c"], ["d"]]
    assert list(_with_next(iter(chunks), None, "response")) == chunks
    assert not off_cpu(Q2Config()) and off_cpu(Q2Config(qa_device="cuda"))
