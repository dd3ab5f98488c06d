"""Packed windows give each window the logits a padded batch gives it, bit for bit; other models run padded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from q2_plugins.backends import accel
from q2_plugins.backends.accel.batching import packed_batches
from q2_plugins.backends.accel.packed import ATTENTION, PackedEncoder
from q2_plugins.backends.hf.transformers_models import HFNLI, HFQuestionAnswerer, load_model

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
QUESTIONS = ["What is it?", "Who is the capital of France and why is it there?", "where"]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


@pytest.fixture(scope="module")
def bert_qa(tmp_path_factory) -> Path:
    from q2_plugins.backends.hf.tiny import build_bert_qa

    return build_bert_qa(tmp_path_factory.mktemp("bert-qa") / "qa")


def _features(tok, rows):
    enc = tok([QUESTIONS[i % 3] for i in range(len(rows))], [r["knowledge"] for r in rows], truncation=True,
              max_length=512)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    return [{k: enc[k][i] for k in keys} for i in range(len(rows))]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernels", ["onednn", "torch"])
@pytest.mark.parametrize("which", ["albert-qa", "bert-qa", "roberta-nli"])
def test_packed_logits_are_the_padded_ones(tiny_models, bert_qa, rows, which, kernels, dtype):
    path, kind = {"albert-qa": (tiny_models["qa"], "qa"), "bert-qa": (bert_qa, "qa"),
                  "roberta-nli": (tiny_models["nli"], "classification")}[which]
    tok, padded_model = load_model("m", str(path), None, "cpu", dtype, kind, kernels)
    _, packed_model = load_model("m", str(path), None, "cpu", dtype, kind, kernels)
    packer = PackedEncoder.for_model(packed_model, kind)
    assert packer is not None and packed_model.config._attn_implementation == ATTENTION
    assert padded_model.config._attn_implementation == "sdpa"  # the reference runs the library's own path
    features = _features(tok, rows)
    lengths = [len(f["input_ids"]) for f in features]
    assert len(set(lengths)) > 3  # windows of many lengths: padding would show
    bare = [{k: v for k, v in f.items() if k != "attention_mask"} for f in features]
    with torch.inference_mode():
        padded = padded_model(**tok.pad(features, return_tensors="pt"))
        if kind == "qa":
            starts, ends = packer.qa_logits(bare)
            for i, n in enumerate(lengths):
                assert torch.equal(starts[i], padded.start_logits[i, :n])
                assert torch.equal(ends[i], padded.end_logits[i, :n])
        else:
            assert torch.equal(packer.class_logits(bare), padded.logits)
        # a padded call on the switched model still runs the library's SDPA path
        again = packed_model(**tok.pad(features, return_tensors="pt"))
    assert all(torch.equal(a, b) for a, b in zip(padded.values(), again.values()))


def test_components_give_the_same_answers_and_labels_packed_or_padded(tiny_models, rows):
    tok, model = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", "onednn")
    qa = HFQuestionAnswerer(tok, model, batch_size=8, max_length=48, stride=16)  # long contexts: several windows
    stats = accel.instrument(qa)
    pairs = [(QUESTIONS[i % 3], r["knowledge"] + " " + r["response"]) for i, r in enumerate(rows)]
    packed = qa.answer(pairs)
    assert stats.batches > 1 and stats.padded_tokens == stats.tokens
    qa = HFQuestionAnswerer(tok, model, batch_size=8, max_length=48, stride=16, pack_windows=False)
    stats = accel.instrument(qa)
    padded = qa.answer(pairs)
    assert stats.padded_tokens > stats.tokens
    assert packed == padded
    assert len({a.text for a in packed}) > 2

    tok, model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification", "onednn")
    nli = HFNLI(tok, model, batch_size=8, max_length=48, stride=8, model_name="tiny")
    stats = accel.instrument(nli)
    pairs = [(r["knowledge"] + " " + r["response"], " ".join(r["response"].split()[:4])) for r in rows]
    packed_labels = nli.predict(pairs)
    assert stats.batches > 1 and stats.padded_tokens == stats.tokens
    nli = HFNLI(tok, model, batch_size=8, max_length=48, stride=8, model_name="tiny", pack_windows=False)
    assert nli.predict(pairs) == packed_labels


def test_other_models_run_padded(tiny_models):
    _, t5 = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    assert PackedEncoder.for_model(t5, "qa") is None
    _, albert = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", "torch")
    assert PackedEncoder.for_model(albert, "classification") is None  # no classifier head on a QA model
    albert.set_attn_implementation("eager")
    assert PackedEncoder.for_model(albert, "qa") is None  # only the SDPA path is known to match
    with pytest.raises(ValueError, match="kind must be"):
        PackedEncoder.for_model(albert, "tagging")


@pytest.mark.parametrize("sort", [True, False])
def test_packed_batches_respect_both_caps(sort):
    lengths = [5, 30, 7, 12, 12, 50, 3, 8, 21, 9, 60, 4]
    batches = packed_batches(lengths, 4, sort, 40)
    flat = [i for b in batches for i in b]
    assert flat == (sorted(range(len(lengths)), key=lambda i: lengths[i]) if sort else list(range(len(lengths))))
    for b in batches:
        assert 1 <= len(b) <= 4
        assert len(b) == 1 or sum(lengths[i] for i in b) <= 40
    assert [b for b in batches if len(b) == 1 and lengths[b[0]] > 40]  # longer than the cap: alone


def test_bucket_lengths_are_few_bounded_and_never_shorter():
    from q2_plugins.backends.accel.batching import bucket_length

    buckets = {bucket_length(n) for n in range(1, 513)}
    assert len(buckets) == 32 and max(buckets) == 512
    for n in range(1, 2049):
        b = bucket_length(n)
        assert n <= b <= 1 << max(3, (n - 1).bit_length())  # never past the power of two at or above n
        assert b - n < 8 if n < 64 else b - n <= n // 8  # at most 12.5% more from 64 tokens on
    assert bucket_length(500, 505) == 505 and bucket_length(600, 512) == 600  # a limit caps it, never below n


@pytest.mark.parametrize("kind", ["qa", "classification"])
def test_padded_batches_at_bucket_lengths_give_the_same_answers_and_labels(tiny_models, rows, kind):
    from functools import partial

    from q2_plugins.backends.accel.batching import bucket_length
    from tests.fakes import record_padding

    if kind == "qa":
        tok, model = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", "torch")
        make = partial(HFQuestionAnswerer, tok, model, batch_size=8, max_length=44, stride=16, pack_windows=False)
        pairs = [(QUESTIONS[i % 3], r["knowledge"] + " " + r["response"]) for i, r in enumerate(rows)]
        call = "answer"
    else:
        tok, model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification", "torch")
        make = partial(HFNLI, tok, model, batch_size=8, max_length=48, stride=8, model_name="tiny", pack_windows=False)
        pairs = [(r["knowledge"] + " " + r["response"], " ".join(r["response"].split()[:4])) for r in rows]
        call = "predict"
    plain, bucketed = make(), make()
    assert not plain.runner.bucket  # on the CPU: off
    bucketed.runner.bucket = True
    widths, longest = record_padding(bucketed.runner)
    assert getattr(bucketed, call)(pairs) == getattr(plain, call)(pairs)
    assert len(widths) > 1 and widths == [bucket_length(n) for n in longest]
    assert any(w > n for w, n in zip(widths, longest))  # padded past the longest window: the buckets showed
