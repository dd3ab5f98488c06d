"""The speed levers of the model components change no output, and their counters count what they say.

Speed itself is measured by ``benchmarks/bench_pipeline.py``, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.hf import _beam_search_cache

SAMPLE = Path(__file__).resolve().parent.parent / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def _scorer(tiny_models, **kw) -> Q2Scorer:
    return Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                             nli_model=str(tiny_models["nli"]), qg_max_length=12, **kw))


def test_beam_cache_keeps_cross_attention_in_place_and_reorders_self_attention(tiny_models):
    qg = _scorer(tiny_models).question_generator
    cache = _beam_search_cache(qg.model)
    assert cache is not None
    k = torch.arange(4.0).view(4, 1, 1, 1)
    cache.self_attention_cache.update(k.clone(), k.clone(), 0)
    cache.cross_attention_cache.update(k.clone(), k.clone(), 0)
    cache.reorder_cache(torch.tensor([1, 1, 0, 3]))
    assert cache.self_attention_cache.layers[0].keys.flatten().tolist() == [1.0, 1.0, 0.0, 3.0]
    assert cache.cross_attention_cache.layers[0].keys.flatten().tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("batch_size", [1, 6])
def test_beam_search_without_cross_attention_copies_returns_the_same_questions(tiny_models, rows, batch_size):
    qg = _scorer(tiny_models, batch_size=batch_size).question_generator
    pairs = [(c, r["response"]) for r in rows for c in r["response"].split()[:2]]
    qg.share_cross_attention = True
    fast = qg.generate(pairs)
    qg.share_cross_attention = False
    default = qg.generate(pairs)
    assert fast == default
    assert len({tuple(q) for q in fast}) > 1  # different inputs give different beams: the test can tell them apart


def test_greedy_decoding_uses_the_default_cache(tiny_models, rows):
    qg = _scorer(tiny_models, qg_decoding="greedy").question_generator
    out = qg.generate([("Paris", "Paris is the capital of France.")])
    assert len(out) == 1 and len(out[0]) == 1


def test_forward_clock_and_token_counters(tiny_models, rows):
    scorer = _scorer(tiny_models, batch_size=4)
    qa = scorer.question_answerer
    pairs = [("What is it?", r["knowledge"]) for r in rows]
    qa.reset_stats()
    qa.answer(pairs)
    assert 0 < qa.forward_seconds <= qa.call_seconds
    lengths = [len(x) for x in qa.tokenizer([p[0] for p in pairs], [p[1] for p in pairs])["input_ids"]]
    assert qa.tokens == sum(lengths)
    assert qa.padded_tokens >= qa.tokens
    qa.batch_size = 1
    qa.reset_stats()
    assert (qa.forward_seconds, qa.call_seconds, qa.tokens) == (0.0, 0.0, 0)
    qa.answer(pairs)
    assert qa.padded_tokens == qa.tokens == sum(lengths)  # one item per batch: no padding

    qg = scorer.question_generator
    qg.reset_stats()
    qg.generate([("Paris", "Paris is the capital of France."), ("France", "Paris is the capital of France.")])
    # generate calls the encoder and then the decoder step by step: the clock sees them all, and only them
    assert 0 < qg.forward_seconds <= qg.call_seconds
