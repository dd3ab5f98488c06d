"""Our T5 beam search returns exactly the token ids of the library's ``generate``, in every setting it accepts, and
hands every other setting to ``generate``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch

from q2_plugins.backends.accel.beam import T5BeamSearch, _ban_repeated_ngrams, beam_settings
from q2_plugins.backends.hf.transformers_models import HFQuestionGenerator, load_model

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"

SETTINGS = [
    # Q²'s own: 5 beams, 5 returned, no repeated 3-grams, stop when 5 hypotheses are done
    dict(max_length=12, num_beams=5, num_return_sequences=5, no_repeat_ngram_size=3, early_stopping=True),
    dict(max_length=20, num_beams=4, num_return_sequences=2, early_stopping=False, length_penalty=0.5),
    dict(max_new_tokens=7, min_new_tokens=3, max_length=None, num_beams=3, num_return_sequences=3,
         early_stopping="never", length_penalty=1.5),
    dict(max_length=10, num_beams=2, no_repeat_ngram_size=1, early_stopping=True, length_penalty=-1.0),
]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    return [f"answer: {c}  context: {r['response']} </s>" for r in rows for c in r["response"].split()[:2]][:10]


def _eos_pushed_copy(src: Path, out: Path, push: Callable[[torch.Tensor], torch.Tensor]) -> Path:
    """A copy of a T5 model with ``push(lm_head.weight)`` added to its end-of-sequence row."""
    from transformers import AutoModelForSeq2SeqLM

    shutil.copytree(src, out, dirs_exist_ok=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(src)
    with torch.no_grad():
        model.lm_head.weight[1] += push(model.lm_head.weight)
    model.save_pretrained(out)
    return out


def _eos_likely_copy(src: Path, out: Path, boost: float = 40.0) -> Path:
    """A copy of a T5 model whose end-of-sequence logit is pushed up, so that hypotheses finish at many different
    lengths (random weights alone rarely end a question)."""
    return _eos_pushed_copy(src, out, lambda weight: boost * weight.std())


@pytest.fixture(scope="module", params=["plain", "eos-likely"])
def qg_dir(request, tiny_models, tmp_path_factory) -> Path:
    if request.param == "plain":
        return tiny_models["qg"]
    return _eos_likely_copy(tiny_models["qg"], tmp_path_factory.mktemp("qg-eos"))


@pytest.mark.parametrize("kernels", ["onednn", "torch"])
@pytest.mark.parametrize("kw", SETTINGS, ids=["q2", "no-early-stop", "min-new-never", "ngram1-neg-penalty"])
def test_same_token_ids_as_generate(qg_dir, texts, kernels, kw):
    tok, model = load_model("qg", str(qg_dir), None, "cpu", "float32", "seq2seq", kernels)
    search = T5BeamSearch.for_model(model)
    settings = beam_settings(model, kw)
    assert search is not None and settings is not None
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        ours = search.generate([(enc["input_ids"], enc["attention_mask"])], settings)
        # the same inputs encoded in two batches, each padded to its own length
        first, second = tok(texts[:4], return_tensors="pt", padding=True), tok(texts[4:], return_tensors="pt",
                                                                                padding=True)
        split = search.generate([(first["input_ids"], first["attention_mask"]),
                                 (second["input_ids"], second["attention_mask"])], settings)
        library = model.generate(**enc, **kw)
    assert torch.equal(ours, library)
    assert torch.equal(split, library)
    assert len({tuple(row.tolist()) for row in library}) > 1  # the test can tell hypotheses apart


def test_eos_likely_copy_finishes_hypotheses_at_different_lengths(tiny_models, texts, tmp_path_factory):
    path = _eos_likely_copy(tiny_models["qg"], tmp_path_factory.mktemp("qg-eos-check"))
    tok, model = load_model("qg", str(path), None, "cpu", "float32", "seq2seq", "torch")
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        ids = model.generate(**enc, **SETTINGS[0])
    ended = [int((row == 1).nonzero()[0]) if (row == 1).any() else len(row) for row in ids]
    assert len(set(ended)) > 2  # the eos-likely models really finish hypotheses at several lengths


def _varied_ends_copy(src: Path, out: Path) -> Path:
    """A copy of a T5 model whose end-of-sequence logit depends strongly on the hidden state, so that inputs
    finish their beams at different steps, as a trained model's questions do (seeded: the same model every run)."""
    gen = torch.Generator().manual_seed(1)
    return _eos_pushed_copy(src, out, lambda weight: weight.std() * (
        20.0 + 24.0 * torch.randn(weight.shape[1], generator=gen)))


@pytest.mark.parametrize("kernels", ["onednn", "torch"])
@pytest.mark.parametrize("drop_fraction", [0.0, 0.25, 2.0], ids=["drop-each", "drop-quarter", "never-drop"])
def test_inputs_leave_the_batch_when_final_with_the_same_token_ids(tiny_models, texts, tmp_path_factory, kernels,
                                                                   drop_fraction):
    """Inputs whose beams are final stop being decoded; every input's questions stay generate's."""
    path = _varied_ends_copy(tiny_models["qg"], tmp_path_factory.mktemp("qg-varied-ends"))
    tok, model = load_model("qg", str(path), None, "cpu", "float32", "seq2seq", kernels)
    search = T5BeamSearch.for_model(model)
    search.drop_fraction = drop_fraction
    more = texts + [t.replace("answer:", "answer: the") for t in texts]  # 20 inputs
    enc = tok(more, return_tensors="pt", padding=True)
    for kw in [dict(SETTINGS[0], max_length=24), *SETTINGS[1:]]:
        settings = beam_settings(model, kw)
        with torch.inference_mode():
            ours = search.generate([(enc["input_ids"], enc["attention_mask"])], settings)
            library = model.generate(**enc, **kw)
        assert torch.equal(ours, library), kw
    # the Q² setting: inputs finish at different steps, so dropping them decodes fewer hypotheses
    settings = beam_settings(model, dict(SETTINGS[0], max_length=24))
    with torch.inference_mode():
        search.generate([(enc["input_ids"], enc["attention_mask"])], settings)
    everything = 23 * len(more) * settings.num_beams  # every input decoded to the longest question's end
    assert (search.decoded_rows < everything) == (drop_fraction <= 1)


def test_several_end_ids_as_generate(tiny_models, texts):
    """The adapter tests' QG copy ends a question at every odd id: many end ids, many finished hypotheses."""
    tok, model = load_model("qg", str(tiny_models["qg_short"]), None, "cpu", "float32", "seq2seq", "onednn")
    kw = dict(SETTINGS[0], max_length=8)
    settings = beam_settings(model, kw)
    assert settings is not None and len(settings.eos) > 10
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        ours = T5BeamSearch.for_model(model).generate([(enc["input_ids"], enc["attention_mask"])], settings)
        library = model.generate(**enc, **kw)
    assert torch.equal(ours, library)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ngram_ban_is_the_library_processor(n):
    from transformers import NoRepeatNGramLogitsProcessor

    gen = torch.Generator().manual_seed(n)
    for length in range(1, 9):
        history = torch.randint(0, 4, (6, length), generator=gen)  # a small vocabulary: many repeats
        scores = torch.randn(6, 4, generator=gen)
        expected = NoRepeatNGramLogitsProcessor(n)(history, scores.clone())
        ours = scores.clone()
        _ban_repeated_ngrams(history, ours, n)
        assert torch.equal(ours, expected)


@pytest.mark.parametrize("extra", [dict(repetition_penalty=1.2), dict(do_sample=True),
                                   dict(num_beams=1, num_return_sequences=1), dict(num_beams=1),
                                   dict(bad_words_ids=[[5]]), dict(output_scores=True, return_dict_in_generate=True),
                                   dict(not_a_setting=3), dict(max_length=1), dict(max_new_tokens=0)])
def test_other_settings_go_to_generate(tiny_models, extra):
    _, model = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    assert beam_settings(model, dict(SETTINGS[0])) is not None
    assert beam_settings(model, dict(SETTINGS[0], **extra)) is None


def test_other_layouts_and_float16_go_to_generate(tiny_models):
    from transformers import BartConfig, BartForConditionalGeneration

    bart = BartForConditionalGeneration(BartConfig(vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1,
                                                   encoder_attention_heads=2, decoder_attention_heads=2,
                                                   encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64))
    assert T5BeamSearch.for_model(bart) is None
    _, t5 = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float16", "seq2seq", "torch")
    assert T5BeamSearch.for_model(t5) is None


def test_question_generator_falls_back_to_generate_with_the_same_questions(tiny_models, texts):
    tok, model = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "onednn")
    qg = HFQuestionGenerator(tok, model, batch_size=4, max_length=12)
    pairs = [("Paris", "Paris is the capital of France."), ("France", "Paris is the capital of France."),
             ("capital", "Paris is the capital of France and its largest city.")]
    ours = qg.generate(pairs)
    calls = []
    original = model.generate
    model.generate = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        assert qg.generate(pairs) == ours and not calls  # our search: generate is never called
        # a setting we don't reproduce
        unusual = HFQuestionGenerator(tok, model, batch_size=4, max_length=12,
                                      generate_overrides={"repetition_penalty": 1.0001})
        unusual.generate(pairs)
        assert calls  # handed to generate
        library = HFQuestionGenerator(tok, model, batch_size=4, max_length=12, search="library")
        assert library.generate(pairs) == ours
    finally:
        model.generate = original


def test_an_unknown_search_is_refused_naming_the_choices(tiny_models):
    tok, model = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    with pytest.raises(ValueError, match=r"search must be one of 'own', 'library', got 'fast'"):
        HFQuestionGenerator(tok, model, batch_size=4, search="fast")


@pytest.mark.parametrize("search", ["own", "library"])
def test_encoder_batches_at_their_length_bucket_give_the_same_questions(tiny_models, texts, search):
    from q2_plugins.backends.accel.batching import bucket_length
    from tests.fakes import record_padding

    tok, model = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    plain = HFQuestionGenerator(tok, model, batch_size=4, max_length=12, search=search)
    bucketed = HFQuestionGenerator(tok, model, batch_size=4, max_length=12, search=search)
    assert not plain.runner.bucket  # on the CPU: off
    bucketed.runner.bucket = True
    widths, longest = record_padding(bucketed.runner)
    words = " ".join(texts).split()
    pairs = [(words[i], " ".join(words[i : i + 3 + i % 11])) for i in range(0, 60, 3)]  # inputs of many lengths
    assert bucketed.generate(pairs) == plain.generate(pairs)
    assert len(widths) > 1 and widths == [bucket_length(n) for n in longest]
    assert any(w > n for w, n in zip(widths, longest))
