"""Fast paths check themselves on settings the suite cannot run: here the CPU is declared untested and the fast
path's output perturbed, and the components must notice, warn once and switch to the library path."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from q2_plugins import accel
from q2_plugins.accel import generation, selfcheck, windows
from q2_plugins.accel.beam import T5BeamSearch
from q2_plugins.accel.packed import PackedEncoder
from q2_plugins.backends.hf.transformers_models import HFNLI, HFQuestionAnswerer, HFQuestionGenerator, load_model

SAMPLE = Path(__file__).resolve().parents[2] / "q2_plugins" / "data" / "sample.jsonl"
PAIRS = [("Paris", "Paris is the capital of France."), ("France", "Paris is the capital of France."),
         ("capital", "Paris is the capital of France and its largest city.")]


@pytest.fixture
def untested_cpu(monkeypatch):
    """The CPU counts as a device the suite does not cover."""
    monkeypatch.setattr(selfcheck, "tested_setting", lambda device, dtype: False)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def _qg(tiny_models, batch_size=4, search="own"):
    tok, model = load_model("qg", str(tiny_models["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    return HFQuestionGenerator(tok, model, batch_size=batch_size, max_length=12, search=search)


def _count_generate(model, calls):
    original = model.generate
    model.generate = lambda *a, **k: calls.append(1) or original(*a, **k)


def test_beam_search_that_agrees_keeps_running(tiny_models, untested_cpu):
    qg = _qg(tiny_models)
    library = _qg(tiny_models, search="library")
    expected = library.generate(PAIRS)
    calls = []
    _count_generate(qg.model, calls)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert qg.generate(PAIRS) == expected
    assert calls and qg.runner.check.agreed is True  # checked once against generate
    calls.clear()
    assert qg.generate(PAIRS) == expected and not calls  # then our search alone


def test_beam_search_that_differs_warns_once_and_hands_over(tiny_models, untested_cpu, monkeypatch):
    qg = _qg(tiny_models, batch_size=1)  # one input per call: the first call is checked, the next ones handed over
    library = _qg(tiny_models, search="library")
    expected = library.generate(PAIRS)
    real = T5BeamSearch.generate
    own_calls = []

    def perturbed(self, *args, **kwargs):
        own_calls.append(1)
        out = real(self, *args, **kwargs)
        out[:, 1] = (out[:, 1] + 7) % self.model.config.vocab_size  # another first question token
        return out

    monkeypatch.setattr(T5BeamSearch, "generate", perturbed)
    with pytest.warns(RuntimeWarning, match=r"beam search of q2_plugins\.accel\.beam .*library path") as caught:
        assert qg.generate(PAIRS) == expected  # the checked batch already gets generate's questions
        assert qg.generate(PAIRS) == expected
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert own_calls == [1] and qg.runner.check.agreed is False


def test_no_check_on_tested_settings(tiny_models, monkeypatch):
    qg = _qg(tiny_models)
    calls = []
    _count_generate(qg.model, calls)
    qg.generate(PAIRS)
    assert not calls and qg.runner.check.agreed is None


def _components(tiny_models, pack_windows=True):
    tok, model = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", "torch")
    qa = HFQuestionAnswerer(tok, model, batch_size=8, max_length=48, stride=16, pack_windows=pack_windows)
    tok, model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification", "torch")
    nli = HFNLI(tok, model, batch_size=8, max_length=48, stride=8, model_name="tiny", pack_windows=pack_windows)
    return qa, nli


def test_packed_windows_that_differ_warn_once_and_run_padded(tiny_models, rows, untested_cpu, monkeypatch):
    qa_pairs = [("What is it?", r["knowledge"] + " " + r["response"]) for r in rows]
    nli_pairs = [(r["knowledge"], " ".join(r["response"].split()[:4])) for r in rows]
    reference_qa, reference_nli = _components(tiny_models, pack_windows=False)
    expected_answers, expected_labels = reference_qa.answer(qa_pairs), reference_nli.predict(nli_pairs)

    real_qa, real_class = PackedEncoder.qa_logits, PackedEncoder.class_logits
    monkeypatch.setattr(PackedEncoder, "qa_logits",
                        lambda self, f: tuple([-x for x in part] for part in real_qa(self, f)))
    monkeypatch.setattr(PackedEncoder, "class_logits", lambda self, f: real_class(self, f).flip(-1))
    qa, nli = _components(tiny_models)
    stats = accel.instrument(qa)
    with pytest.warns(RuntimeWarning, match=r"packed windows of q2_plugins\.accel\.packed") as caught:
        assert qa.answer(qa_pairs) == expected_answers
        assert qa.answer(qa_pairs) == expected_answers
        assert nli.predict(nli_pairs) == expected_labels
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 2  # once per component
    assert qa.runner.packer() is None and nli.runner.packer() is None
    assert stats.padded_tokens > stats.tokens  # padded batches from the first call on


def test_packed_windows_that_agree_stay_packed(tiny_models, rows, untested_cpu):
    qa, _ = _components(tiny_models)
    stats = accel.instrument(qa)
    pairs = [("What is it?", r["knowledge"]) for r in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        qa.answer(pairs)
    assert qa.runner.check.agreed is True and stats.padded_tokens == stats.tokens


def test_the_tested_predicate():
    import torch

    assert selfcheck.tested_setting("cpu", torch.float32) and selfcheck.tested_setting("cpu", torch.bfloat16)
    assert not selfcheck.tested_setting("cpu", torch.float16)
    assert not selfcheck.tested_setting("cuda:0", torch.float32) and not selfcheck.tested_setting("mps", torch.float32)
    assert generation.FastPathCheck is windows.FastPathCheck is selfcheck.FastPathCheck
