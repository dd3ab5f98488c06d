"""Reranking candidates by Q²: the selection rule with a scripted scorer, then generate_best through tiny local
seq2seq (T5) and decoder-only (GPT-2) models, then the docs example with the tiny Q² models."""

from __future__ import annotations

import math
import os

import pytest

from q2_plugins import Q2Config
from q2_plugins.integrations.rerank import generate_best, rerank, rerank_batch
from tests.fakes import ScriptedScorer


def test_order_is_by_score_with_unscored_last_and_ties_in_input_order():
    # "err" is not in the table: an error row; "none": no valid question (no score); "zero" scores 0.0
    s = ScriptedScorer({"a": 0.5, "b": 1.0, "c": 1.0, "zero": 0.0, "none": None})
    r = rerank(["err", "a", "b", "none", "c", "zero"], "K", scorer=s)
    assert r.order == [2, 4, 1, 5, 0, 3]  # b, c (tie: input order), a, zero, then unscored in input order
    assert r.best == 2 and r.best_text == "b"
    assert r.q2 == [None, 0.5, 1.0, None, 1.0, 0.0] and r.keys == r.q2
    assert [x.status for x in r.results] == ["error", "scored", "scored", "no_valid_question", "scored", "scored"]
    assert s.calls == [{"responses": ["err", "a", "b", "none", "c", "zero"], "knowledge": ["K"] * 6,
                        "history": None}]
    assert r.signature == "scripted"


def test_all_unscored_keeps_generator_order():
    r = rerank(["x", "y"], "K", scorer=ScriptedScorer({}))
    assert r.order == [0, 1] and r.keys == [None, None]


def test_weight_mixes_exp_of_sequence_score():
    s = ScriptedScorer({"a": 1.0, "b": 0.6, "c": None})
    seq = [math.log(0.1), math.log(0.9), 0.0]
    r = rerank(["a", "b", "c"], "K", scorer=s, sequence_scores=seq, weight=0.5)
    assert r.keys[0] == pytest.approx(0.5 * 1.0 + 0.5 * 0.1)
    assert r.keys[1] == pytest.approx(0.5 * 0.6 + 0.5 * 0.9)
    assert r.keys[2] is None  # no Q² score: still unscored, whatever its sequence score
    assert r.order == [1, 0, 2]
    assert rerank(["a", "b", "c"], "K", scorer=s, sequence_scores=seq, weight=0.0).order == [0, 1, 2]
    assert rerank(["a", "b"], "K", scorer=s, sequence_scores=seq[:2], weight=1.0).order == [1, 0]


def test_batched_one_call_for_all_inputs():
    s = ScriptedScorer({"a": 0.2, "b": 0.9, "c": 0.7, "d": 0.1})
    out = rerank_batch([["a", "b"], ["c"], ["d", "c"]], ["K1", "K2", ["K", "3"]], history=[["h"], ["h"], ["h"]],
                       scorer=s)
    assert [r.best_text for r in out] == ["b", "c", "c"]
    assert len(s.calls) == 1
    assert s.calls[0]["knowledge"] == ["K1", "K1", "K2", ["K", "3"], ["K", "3"]]
    assert s.calls[0]["history"] == [["h"]] * 5


@pytest.mark.parametrize("kwargs, error", [
    (dict(candidates="abc", knowledge="K"), TypeError),
    (dict(candidates=["a"], knowledge="K", weight=1.5, sequence_scores=[0.0]), ValueError),
    (dict(candidates=["a"], knowledge="K", weight=0.5), ValueError),  # weight without sequence scores
    (dict(candidates=["a", "b"], knowledge="K", sequence_scores=[0.0]), ValueError),
])
def test_bad_input_raises(kwargs, error):
    with pytest.raises(error):
        rerank(**kwargs, scorer=ScriptedScorer({}))


def test_batch_shape_errors():
    s = ScriptedScorer({})
    with pytest.raises(ValueError, match="one knowledge per input"):
        rerank_batch([["a"], ["b"]], ["K"], scorer=s)
    with pytest.raises(ValueError, match="non-empty list"):
        rerank_batch([[]], ["K"], scorer=s)
    with pytest.raises(TypeError, match="either scorer= or config="):
        rerank(["a"], "K", scorer=s, config=Q2Config())


class LongestScorer(ScriptedScorer):
    """Scores every non-empty response by its length (so the rule's winner is known from the candidates)."""

    def __init__(self) -> None:
        super().__init__({})

    def score(self, *, responses, knowledge, history=None, explain=False):
        self.table = {r: float(len(r)) for r in responses if r.strip()}
        return super().score(responses=responses, knowledge=knowledge, history=history, explain=explain)


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
def test_generate_best_picks_the_scorers_best_candidate(tiny_models, kind):
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    path = tiny_models["qg" if kind == "seq2seq" else "lm"]
    auto = AutoModelForSeq2SeqLM if kind == "seq2seq" else AutoModelForCausalLM
    model, tok = auto.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    prompts = ["answer: paris  context: paris is the capital of france", "who painted the mona lisa?",
               "the river thames flows through london"]
    s = LongestScorer()
    out = generate_best(model, tok, prompts, ["K1", "K2", "K3"], num_candidates=3, batch_size=2, max_new_tokens=8,
                        scorer=s)
    assert len(out) == 3 and len(s.calls) == 1  # two generate batches, one Q² call for all 9 candidates
    assert s.calls[0]["knowledge"] == ["K1"] * 3 + ["K2"] * 3 + ["K3"] * 3
    for g, prompt in zip(out, prompts):
        cands = g.reranked.candidates
        assert len(cands) == 3 and g.text in cands
        lengths = [len(c) if c.strip() else -1 for c in cands]
        assert len(g.text) == max(lengths)
        assert g.reranked.order[0] == lengths.index(max(lengths))  # first of equal-length candidates
        if kind == "causal":
            assert not any(c.startswith(prompt) for c in cands)  # the prompt is cut from decoder-only output
        seq = g.reranked.sequence_scores
        assert len(seq) == 3 and all(x <= 0 for x in seq) and seq == sorted(seq, reverse=True)  # beam order
    # weight 1: the beam score alone decides (all candidates scored): the first beam wins
    s_all = ScriptedScorer({})
    s_all.score = lambda **kw: ScriptedScorer({r: 0.5 for r in kw["responses"]}).score(**kw)
    top = generate_best(model, tok, prompts[:1], ["K"], num_candidates=3, weight=1.0, max_new_tokens=8,
                        scorer=s_all)[0]
    assert top.reranked.order[0] == 0


def test_generate_best_rejects_conflicting_generate_options(tiny_models):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_models["qg"])
    tok = AutoTokenizer.from_pretrained(tiny_models["qg"])
    with pytest.raises(TypeError, match="num_beams"):
        generate_best(model, tok, ["x"], ["K"], num_beams=2, scorer=ScriptedScorer({}))
    with pytest.raises(ValueError, match="one knowledge per prompt"):
        generate_best(model, tok, ["x", "y"], ["K"], scorer=ScriptedScorer({}))
    with pytest.raises(TypeError, match="max_length"):
        generate_best(model, tok, ["x"], ["K"], max_length=9, scorer=ScriptedScorer({}))


@pytest.mark.parametrize("kind", ["seq2seq", "causal"])
def test_generate_best_length_is_max_new_tokens_whatever_the_models_max_length(tiny_models, kind):
    """The tiny T5's generation config sets max_length 32 (the GPT-2's none): generate_best's length settings give
    the very beams that ``max_new_tokens`` gives, 40 new tokens being more than 32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from q2_plugins.integrations.rerank import _length

    path = tiny_models["qg" if kind == "seq2seq" else "lm"]
    auto = AutoModelForSeq2SeqLM if kind == "seq2seq" else AutoModelForCausalLM
    model, tok = auto.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    assert (model.generation_config.max_length is not None) == (kind == "seq2seq")
    enc = tok(["who painted the mona lisa?", "the thames"], return_tensors="pt", padding=True,
              padding_side="right" if kind == "seq2seq" else "left")
    beams = dict(num_beams=3, num_return_sequences=3, do_sample=False, output_scores=True,
                 return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
    want = model.generate(**enc, max_new_tokens=40, **beams)
    got = model.generate(**enc, **_length(model, enc, kind == "causal", 40, {}), **beams)
    assert torch.equal(got.sequences, want.sequences)


def test_generate_best_through_the_real_scorer_writes_nothing_to_standard_error(tiny_models, tiny_config):
    """Our code paths stay quiet: the Q² models load without transformers' "Loading weights" bars, and generate
    gets its length without the warning that both max_new_tokens and the model's max_length are set."""
    import subprocess
    import sys
    from pathlib import Path

    code = f"""
from q2_plugins.backends.loading import quiet_loading
from q2_plugins.metric.config import Q2Config
from q2_plugins.integrations.rerank import generate_best
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
with quiet_loading():  # (the test's own load of the model that generates)
    model = AutoModelForSeq2SeqLM.from_pretrained({str(tiny_models["qg"])!r})
tok = AutoTokenizer.from_pretrained({str(tiny_models["qg"])!r})
config = Q2Config.from_dict({tiny_config.to_dict()!r})
best = generate_best(model, tok, ["who painted the mona lisa?"], ["Leonardo painted it."], num_candidates=2,
                     max_new_tokens=40, config=config)
print(len(best))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[3]), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "1"
    assert proc.stderr == "", proc.stderr


def test_docs_example_runs(model_workdir, doc_blocks, capsys):
    blocks = doc_blocks("rerank")
    assert blocks and all(lang == "python" for lang, _ in blocks)
    for _, code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "__docs__"})
    out = capsys.readouterr().out
    assert "my-dialogue-model" in out and "my-seq2seq-model" in out
