"""Failures stay where they belong: a model that cannot load stops ``score()`` once; anything a component raises for
one item (a Rust panic included) fails only that item's row; windows fit any length; what cannot be read is
rejected before batching; text is normalised at the door."""

from __future__ import annotations

import numpy as np
import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.backends.hf import transformers_models
from q2_plugins.backends.hf.transformers_models import HFNLI, HFQuestionAnswerer, HFQuestionGenerator, load_model
from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.components import Answer, NLILabel
from q2_plugins.metric.errors import ModelLoadError
from tests.fakes import FakeQA, FakeQG, scripted_scorer

RESP, KNOW = "paris is in france .", "Paris is the capital of France."


def fake_scorer(qa=None, qg=None, **cfg) -> Q2Scorer:
    return scripted_scorer({RESP: ["paris"], "rome is in italy .": ["rome"]},
                           qg or {("paris", RESP): ["where?"], ("rome", "rome is in italy ."): ["which?"]},
                           qa or {("where?", RESP): "paris", ("where?", KNOW): "paris",
                                  ("which?", "rome is in italy ."): "rome", ("which?", KNOW): "rome"}, **cfg)


class PanicException(BaseException):
    """What pyo3 raises for a Rust panic: a BaseException, not an Exception."""


class PanickingQA(FakeQA):
    def answer(self, pairs):
        if any(c == "rome is in italy ." for _, c in pairs):
            raise PanicException("stride must be strictly less than max_len")
        return super().answer(pairs)


# -- model loading ---------------------------------------------------------------------------------------------------
def test_a_model_that_cannot_load_raises_from_score_once(monkeypatch):
    loads = []

    def counting(role, *args):
        loads.append(role)
        return load_model(role, *args)

    monkeypatch.setattr(transformers_models, "load_model", counting)
    scorer = Q2Scorer(Q2Config(qg_model="/nonexistent/qg"))
    with pytest.raises(ModelLoadError, match=r"QG model '/nonexistent/qg' \(setting qg_model\): "
                                             r"the folder /nonexistent/qg does not exist"):
        scorer.score(responses=[RESP] * 5, knowledge=[KNOW] * 5)
    assert loads == ["qg"]  # once, up front: not once per item
    assert "\n" not in str(pytest.raises(ModelLoadError, scorer.load).value)  # one line


def test_a_load_error_inside_a_stage_is_not_retried_per_item():
    calls = []

    class Unloadable(FakeQG):
        def generate(self, pairs):
            calls.append(len(pairs))
            raise ModelLoadError("Cannot load the QG model 'x' (setting: qg_model)")

    scorer = fake_scorer(qg=Unloadable({}))
    with pytest.raises(ModelLoadError):
        scorer.score(responses=[RESP, "rome is in italy ."], knowledge=[KNOW, KNOW])
    assert calls == [2]


# -- the row net -------------------------------------------------------------------------------------------------
def test_a_panic_in_one_row_stays_in_that_row():
    scorer = fake_scorer(qa=PanickingQA({("where?", RESP): "paris", ("where?", KNOW): "paris"}))
    res = scorer.score(responses=[RESP, "rome is in italy .", RESP], knowledge=[KNOW] * 3)
    assert [r.status for r in res.responses] == ["scored", "error", "scored"]
    assert "PanicException: stride must be strictly less than max_len" in res.responses[1].error


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_interrupts_are_not_swallowed(exc):
    class Interrupted(FakeQA):
        def answer(self, pairs):
            raise exc()

    with pytest.raises(exc):
        fake_scorer(qa=Interrupted({})).score(responses=[RESP], knowledge=[KNOW])


def test_a_lone_surrogate_with_a_cache_is_a_row_error(tmp_path):
    cache = Q2Cache(tmp_path)
    key_item = ["a\ud800b"]
    cache.put_many("ns", [(key_item, {"text": "x\udc80"})])  # keys and values of any string store and load
    assert cache.get_many("ns", [key_item]) == [{"text": "x\udc80"}]
    scorer = fake_scorer(cache_dir=str(tmp_path / "c"))
    res = scorer.score(responses=[RESP, "paris \ud800 is"], knowledge=[KNOW, KNOW])
    assert res.responses[0].status == "scored"
    assert "response is not valid Unicode: a lone surrogate" in res.responses[1].error


# -- normalised at the door --------------------------------------------------------------------------------------
class MyStr(str):
    def __str__(self):
        return "something else"


def test_str_subclasses_and_numpy_strings_are_plain_strings():
    scorer = fake_scorer()
    res = scorer.score(responses=[np.str_(RESP), MyStr(RESP), RESP], knowledge=[KNOW, np.array([KNOW])[0], MyStr(KNOW)])
    assert [r.status for r in res.responses] == ["scored"] * 3
    assert len({r.score for r in res.responses}) == 1
    seen = scorer.candidate_extractor.calls
    assert all(type(t) is str for call in seen for t in call)


@pytest.mark.parametrize("text", ["", "   \n\t", "\u200b\u200c\u200d\u2060\ufeff", "\x00\x00", "\x01\x1f\x7f",
                                  "\u200f\u202e", " \x00\u200b\u3000 "])
def test_effectively_empty_text_is_empty(text):
    res = fake_scorer().score(responses=[text, RESP], knowledge=[KNOW, text])
    assert res.responses[0].error == "response is empty"
    assert res.responses[1].error == "knowledge is empty"


# -- windows of any length ------------------------------------------------------------------------------------------
WORDS = "paris is the capital of france and the eiffel tower is tall".split()


def text_of(n_words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n_words))


@pytest.fixture(scope="module")
def small_windows(tiny_models):
    qa_tok, qa_model = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa")
    nli_tok, nli_model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification")
    qa = HFQuestionAnswerer(qa_tok, qa_model, batch_size=8, max_length=40, stride=12)
    nli = HFNLI(nli_tok, nli_model, batch_size=8, max_length=40, stride=12)
    return qa, nli


def _fixed_texts(component, tok) -> dict[int, str]:
    """Token count -> a text of that many tokens, for every count from below the stride boundary to past the
    window that short texts reach."""
    added = tok.num_special_tokens_to_add(pair=True)
    lo, hi = component.max_length - added - component.stride - 4, component.max_length - added + 2
    out: dict[int, str] = {}
    for n in range(1, 60):
        for k in range(6):
            t = text_of(n) + " a" * k
            length = len(tok(t, add_special_tokens=False)["input_ids"])
            if lo <= length <= hi:
                out.setdefault(length, t)
    return out


@pytest.mark.parametrize("kind", ["qa", "nli"])
def test_windows_fit_every_length_around_the_limits(small_windows, kind):
    comp = small_windows[0 if kind == "qa" else 1]
    tok = comp.tokenizer
    found = _fixed_texts(comp, tok)
    added = tok.num_special_tokens_to_add(pair=True)
    edge, full = comp.max_length - added - comp.stride, comp.max_length - added
    assert {edge - 1, edge, edge + 1, full - 1, full, full + 1} <= set(found)  # each side of both limits
    fit = []
    for f in found.values():
        for windowed in (text_of(2), text_of(9), text_of(24)):
            pair = (f, windowed) if kind == "qa" else (windowed, f)
            room = comp.max_length - len(tok(f, add_special_tokens=False)["input_ids"]) - added
            reason = comp.unfit([pair])[0]
            if room <= 0:
                assert "no room left" in reason
                with pytest.raises(ValueError, match="no room left"):
                    comp._windows([pair])
                continue
            assert reason is None
            win = comp._windows([pair])
            target = tok(windowed, add_special_tokens=False)["input_ids"]
            side = 1 if kind == "qa" else 0
            parts = [[t for t, s in zip(win.input_ids(w), win.sequence_ids(w)) if s == side]
                     for w in range(len(win.features))]
            stride = comp.stride if comp.stride < room else room // 2
            assert all(len(x) <= max(room, 0) or len(parts) == 1 for x in parts)
            assert all(len(ids) <= comp.max_length for ids in (win.input_ids(w) for w in range(len(parts))))
            assert parts[0][:1] == target[:1] and parts[-1][-1:] == target[-1:]  # first and last token read
            assert sum(map(len, parts)) - stride * (len(parts) - 1) == len(target)  # every token, overlaps known
            fit.append(pair)
    out = comp.answer(fit) if kind == "qa" else comp.predict(fit)  # one call: every stride in one batch
    assert len(out) == len(fit) and all(isinstance(o, Answer if kind == "qa" else NLILabel) for o in out)


@pytest.mark.parametrize("kind", ["qa", "nli"])
def test_mixed_strides_batched_equal_per_item(small_windows, kind):
    comp = small_windows[0 if kind == "qa" else 1]
    fixed = list(_fixed_texts(comp, comp.tokenizer).values())
    fixed = [f for f in fixed if comp.unfit([(f, "x") if kind == "qa" else ("x", f)])[0] is None]
    pairs = [(f, text_of(24)) if kind == "qa" else (text_of(24), f) for f in fixed[::3] + [text_of(2)]]
    run = comp.answer if kind == "qa" else comp.predict
    assert run(pairs) == [run([p])[0] for p in pairs]


def test_long_response_and_knowledge_with_the_default_windows(tiny_models):
    """The reported crash: a ~280-word response over a ~200-word knowledge, default 512/128 windows."""
    tok, model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification")
    nli = HFNLI(tok, model, batch_size=4)
    pairs = [(text_of(200), text_of(n)) for n in (250, 280, 310, 330, 520)]
    reasons = nli.unfit(pairs)
    assert reasons[:2] == [None, None] and "nli_max_length=512" in reasons[-1]
    fit = [p for p, r in zip(pairs, reasons) if r is None]
    added = nli.tokenizer.num_special_tokens_to_add(pair=True)
    rooms = [nli.max_length - len(nli.tokenizer(h, add_special_tokens=False)["input_ids"]) - added for _, h in fit]
    assert any(nli.stride >= room for room in rooms)  # the case that crashed the tokenizer is among them
    assert all(isinstance(label, NLILabel) for label in nli.predict(fit))


# -- rejected before batching, measured once ----------------------------------------------------------------------
def test_an_over_long_response_is_rejected_before_batching(tiny_models):
    # (no budgets: the QG input limit is what this test checks; the budgets would refuse the row earlier)
    cfg = Q2Config(qg_model=str(tiny_models["qg_short"]), qa_model=str(tiny_models["qa"]),
                   nli_model=str(tiny_models["nli"]), qg_max_length=4, max_response_chars=0, max_candidates=0)
    scorer = Q2Scorer(cfg)
    qg = scorer.question_generator
    batches = []
    real_generate = qg.generate
    qg.generate = lambda pairs: (batches.append(len(pairs)), real_generate(pairs))[1]
    texts = []
    real_tok = qg.tokenizer.__call__

    class CountingTokenizer:
        def __getattr__(self, name):
            return getattr(qg.tokenizer_real, name)

        def __call__(self, text, *a, **kw):
            texts.extend([text] if isinstance(text, str) else text)
            return real_tok(text, *a, **kw)

    qg.tokenizer_real = qg.tokenizer
    qg.tokenizer = CountingTokenizer()
    long_response = "the eiffel tower in paris is tall and " * 150
    res = scorer.score(responses=["paris is in france .", long_response, "rome is in italy ."],
                       knowledge=[KNOW] * 3)
    assert res.responses[1].status == "error" and "qg_max_input_tokens=512" in res.responses[1].error
    assert [r.status != "error" for r in res.responses] == [True, False, True]
    assert len(batches) == 1  # one batch for the two other rows: no one-by-one retry
    assert sum(long_response in t for t in texts) == 1  # measured once, not once per candidate
    assert res.responses[1].num_candidates > 1


@pytest.mark.parametrize("cls", [HFQuestionGenerator])
def test_qg_unfit_agrees_with_generate(tiny_models, cls):
    tok, model = load_model("qg", str(tiny_models["qg_short"]), None, "cpu", "float32", "seq2seq")
    qg = cls(tok, model, batch_size=4, max_input_tokens=30, max_length=4)
    for n in range(1, 20):
        pair = ("paris", text_of(n))
        reason = qg.unfit([pair])[0]
        if reason is None:
            assert len(qg.generate([pair])[0]) == 5
        else:
            assert "qg_max_input_tokens=30" in reason
            with pytest.raises(ValueError, match="qg_max_input_tokens=30"):
                qg.generate([pair])
