"""The speed levers of the model components change no output, and their counters count what they say.

Speed itself is measured by ``benchmarks/bench_pipeline.py``, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.backends import accel
from q2_plugins.backends.accel.batching import length_batches
from q2_plugins.backends.accel.generation import beam_search_cache
from q2_plugins.backends.hf.transformers_models import HFQuestionGenerator

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def _scorer(tiny_models, **kw) -> Q2Scorer:
    return Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                             nli_model=str(tiny_models["nli"]), qg_max_length=12, **kw))


def _with_search(qg: HFQuestionGenerator, search: str) -> HFQuestionGenerator:
    """Another question generator on the same model and settings, with beam search run by ``search``."""
    return HFQuestionGenerator(qg.tokenizer, qg.model, batch_size=qg.batch_size, decoding=qg.decoding,
                               num_beams=qg.num_beams, num_return=qg.num_return, no_repeat_ngram=qg.no_repeat_ngram,
                               max_length=qg.max_length, max_input_tokens=qg.max_input_tokens,
                               input_template=qg.input_template, sort_by_length=qg.sort_by_length,
                               batch_tokens=qg.batch_tokens, search=search)


def test_beam_cache_keeps_cross_attention_in_place_and_reorders_self_attention(tiny_models):
    qg = _scorer(tiny_models).question_generator
    cache = beam_search_cache(qg.model)
    assert cache is not None
    k = torch.arange(4.0).view(4, 1, 1, 1)
    cache.self_attention_cache.update(k.clone(), k.clone(), 0)
    cache.cross_attention_cache.update(k.clone(), k.clone(), 0)
    cache.reorder_cache(torch.tensor([1, 1, 0, 3]))
    assert cache.self_attention_cache.layers[0].keys.flatten().tolist() == [1.0, 1.0, 0.0, 3.0]
    assert cache.cross_attention_cache.layers[0].keys.flatten().tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("batch_size", [1, 6])
def test_own_beam_search_returns_the_questions_of_generate(tiny_models, rows, batch_size):
    qg = _scorer(tiny_models, batch_size=batch_size).question_generator
    pairs = [(c, r["response"]) for r in rows for c in r["response"].split()[:2]]
    fast = _with_search(qg, "own").generate(pairs)
    default = _with_search(qg, "library").generate(pairs)
    assert fast == default
    assert len({tuple(q) for q in fast}) > 1  # different inputs give different beams: the test can tell them apart


def test_greedy_decoding_uses_the_default_cache(tiny_models, rows):
    qg = _scorer(tiny_models, qg_decoding="greedy").question_generator
    out = qg.generate([("Paris", "Paris is the capital of France.")])
    assert len(out) == 1 and len(out[0]) == 1


def test_forward_clock_and_token_counters(tiny_models, rows):
    scorer = _scorer(tiny_models, batch_size=4)
    qa = scorer.question_answerer
    stats = accel.instrument(qa)
    pairs = [("What is it?", r["knowledge"]) for r in rows]
    stats.reset()
    qa.answer(pairs)
    assert 0 < stats.forward_seconds <= stats.call_seconds
    lengths = [len(x) for x in qa.tokenizer([p[0] for p in pairs], [p[1] for p in pairs])["input_ids"]]
    assert stats.tokens == sum(lengths)
    assert stats.padded_tokens >= stats.tokens
    qa.batch_size = 1
    stats.reset()
    assert (stats.forward_seconds, stats.call_seconds, stats.tokens) == (0.0, 0.0, 0)
    qa.answer(pairs)
    assert stats.padded_tokens == stats.tokens == sum(lengths)  # one item per batch: no padding

    qg = scorer.question_generator
    stats = accel.instrument(qg)
    stats.reset()
    qg.generate([("Paris", "Paris is the capital of France."), ("France", "Paris is the capital of France.")])
    # generate calls the encoder and then the decoder step by step: the clock sees them all, and only them
    assert 0 < stats.forward_seconds <= stats.call_seconds


@pytest.mark.parametrize("max_tokens", [None, 1, 40, 100, 10_000])
@pytest.mark.parametrize("sort", [True, False])
def test_length_batches_respect_count_and_token_caps(max_tokens, sort):
    lengths = [5, 30, 7, 12, 12, 50, 3, 8, 21, 9, 60, 4]
    batches = length_batches(lengths, 4, sort, max_tokens)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))  # every input exactly once
    assert flat == (sorted(range(len(lengths)), key=lambda i: lengths[i]) if sort else list(range(len(lengths))))
    for b in batches:
        assert 1 <= len(b) <= 4
        if max_tokens is not None and len(b) > 1:
            assert len(b) * max(lengths[i] for i in b) <= max_tokens
    if max_tokens == 1:
        assert all(len(b) == 1 for b in batches)  # inputs longer than the cap go alone


def test_token_capped_batches_give_per_item_results(tiny_models, rows):
    responses = [r["response"] for r in rows]
    knowledge = [r["knowledge"] for r in rows]
    capped = _scorer(tiny_models, batch_size=64, batch_tokens=96, question_mode="all", remove_personal=False)
    per_item = _scorer(tiny_models, per_item=True, batch_tokens=96, question_mode="all", remove_personal=False)
    assert capped.question_answerer.batch_tokens == 96 and per_item.question_answerer.batch_tokens is None
    qa, one = accel.instrument(capped.question_answerer), accel.instrument(per_item.question_answerer)
    a = capped.score(responses=responses, knowledge=knowledge, explain=True)
    b = per_item.score(responses=responses, knowledge=knowledge, explain=True)
    assert a.to_dict() == b.to_dict()
    assert one.padded_tokens == one.tokens  # per-item: no padding
    assert 1 < qa.batches < one.batches  # batched, and the cap split the batches
    assert a.signature == b.signature  # token caps are not part of the signature


def _cost(batches, lengths, overhead):
    return sum(len(b) * max(lengths[i] for i in b) + overhead for b in batches)


def _all_splits(n):
    """Every way to cut range(n) into consecutive non-empty runs."""
    if n == 0:
        yield []
        return
    for first in range(1, n + 1):
        for rest in _all_splits(n - first):
            yield [list(range(first))] + [[i + first for i in r] for r in rest]


@pytest.mark.parametrize("seed", range(6))
def test_length_batches_are_the_cheapest_split_of_the_sorted_inputs(seed):
    import random

    rng = random.Random(seed)
    lengths = [rng.choice([3, 5, 8, 20, 40, 41, 200]) for _ in range(rng.randint(1, 9))]
    batch_size, max_tokens, overhead = rng.choice([2, 3, 4, 16]), rng.choice([None, 60, 400]), rng.choice([0, 16, 128])
    batches = length_batches(lengths, batch_size, True, max_tokens, overhead)
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    feasible = [
        [[order[i] for i in run] for run in split] for split in _all_splits(len(lengths))
        if all(len(run) <= batch_size and (len(run) == 1 or max_tokens is None or
                                           len(run) * max(lengths[order[i]] for i in run) <= max_tokens)
               for run in split)
    ]
    assert batches in feasible
    assert _cost(batches, lengths, overhead) == min(_cost(b, lengths, overhead) for b in feasible)


def test_length_batches_fill_batches_of_similar_lengths_and_isolate_outliers():
    assert [len(b) for b in length_batches([50] * 12, 4, True)] == [4, 4, 4]
    batches = length_batches([20] * 8 + [500], 16, True)
    assert batches == [list(range(8)), [8]]  # one long input does not pad eight short ones to 500 tokens


def test_token_cap_settings():
    assert Q2Config().role_batch_tokens("qa") == 2048
    assert Q2Config(batch_tokens=0).role_batch_tokens("qa") is None  # 0: no cap
    assert Q2Config(batch_tokens=None, nli_batch_tokens=512).role_batch_tokens("nli") == 512
    assert Q2Config(per_item=True).role_batch_tokens("qg") is None
    with pytest.raises(ValueError, match="batch_tokens: must be a non-negative integer or None"):
        Q2Config(batch_tokens=-1)
    with pytest.raises(ValueError, match="qa_batch_tokens: must be a positive integer"):
        Q2Config(qa_batch_tokens=0)


def test_beam_search_projects_cross_attention_keys_once_per_input(tiny_models, rows):
    qg = _scorer(tiny_models, batch_size=8).question_generator
    pairs = [(c, r["response"]) for r in rows[:3] for c in r["response"].split()[:2]]
    projected_rows = []
    attn = qg.model.decoder.block[0].layer[1].EncDecAttention
    handle = attn.k.register_forward_hook(lambda m, args, out: projected_rows.append(out.shape[0]))
    try:
        _with_search(qg, "own").generate(pairs)
        once = sum(projected_rows)
        projected_rows.clear()
        _with_search(qg, "library").generate(pairs)
        default = sum(projected_rows)
    finally:
        handle.remove()
    assert once == len(pairs) and default == len(pairs) * qg.num_beams
