"""The benchmarks' QG decodes every generated id to a piece: a random-weight model with more embedding rows than its
tokenizer has pieces (the paper-size T5-base: 32,128 rows) must make questions of the length it generated, as a
real model would, and not words that decode to nothing (which left the filter's QA work undone)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from benchmarks.in_range import InRangeQuestions, in_range_questions  # noqa: E402


@pytest.fixture(scope="module")
def t5_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from q2_plugins.backends.hf.tiny import build_t5_qg

    path = build_t5_qg(tmp_path_factory.mktemp("qg"), model_vocab=4000)
    return AutoTokenizer.from_pretrained(str(path))


def test_ids_past_the_tokenizer_decode_to_ordinary_pieces(t5_tokenizer):
    tok = t5_tokenizer
    past = [len(tok) + k for k in (0, 7, 1500, 2900)]  # rows the model has and the tokenizer lacks
    assert tok.batch_decode([past], skip_special_tokens=True) == [""]  # how the benchmarks decoded them before
    wrapped = InRangeQuestions(tok)
    mapped = [wrapped.in_range(i) for i in past]
    special = set(tok.all_special_ids)
    assert all(i < len(tok) and i not in special for i in mapped)
    assert len(set(mapped)) == len(mapped)  # distinct rows stay distinct pieces
    text = wrapped.batch_decode([past], skip_special_tokens=True)[0]
    assert text and len(tok(text, add_special_tokens=False)["input_ids"]) >= len(past) - 1


def test_ids_the_tokenizer_has_and_encoding_are_untouched(t5_tokenizer):
    tok = t5_tokenizer
    wrapped = InRangeQuestions(tok)
    ids = tok("who painted the mona lisa?")["input_ids"]
    assert wrapped("who painted the mona lisa?")["input_ids"] == ids
    assert wrapped.batch_decode([ids], skip_special_tokens=True) == tok.batch_decode([ids], skip_special_tokens=True)
    assert len(wrapped) == len(tok) and wrapped.pad_token_id == tok.pad_token_id


def test_the_ct2_placeholder_names_keep_their_row(t5_tokenizer):
    """The ct2 backend names rows its tokenizer lacks ``<q2_unused_N>``: they map in range like the ids."""
    tok = t5_tokenizer
    wrapped = InRangeQuestions(tok)
    n = len(tok) + 11
    ids = wrapped.convert_tokens_to_ids(["▁who", f"<q2_unused_{n}>"])
    assert ids == [tok.convert_tokens_to_ids("▁who"), n]
    assert wrapped.batch_decode([ids], skip_special_tokens=True)[0] != tok.batch_decode([ids[:1]])[0]


def test_a_component_is_wrapped_once(t5_tokenizer):
    class Component:
        tokenizer = t5_tokenizer

    comp = in_range_questions(in_range_questions(Component()))
    assert isinstance(comp.tokenizer, InRangeQuestions)
    assert not isinstance(comp.tokenizer._tokenizer, InRangeQuestions)


def test_the_model_makes_the_questions_of_the_same_model_cut_to_its_tokenizer(tmp_path):
    """With more rows than pieces, the seeded model's beams use rows the tokenizer lacks; limited to the tokenizer's
    rows (the full product still computed), it makes exactly the questions of the same model cut to them: what a
    vocabulary-matched model makes, at the cost of the paper-size output layer."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from benchmarks.bench_pipeline import fixed_length
    from q2_plugins.backends.hf.tiny import build_t5_qg
    from q2_plugins.backends.hf.transformers_models import HFQuestionGenerator

    path = build_t5_qg(tmp_path / "qg", model_vocab=8000)
    tok = AutoTokenizer.from_pretrained(str(path))
    pairs = [("paris", "paris is the capital of france ."), ("the louvre", "the mona lisa is in the louvre .")]

    def questions(model, limit):
        qg = HFQuestionGenerator(tok, model, batch_size=2, generate_overrides=fixed_length(8))
        if limit:
            in_range_questions(qg)
        rows = []
        qg.runner.generate = (lambda run: lambda *a: rows.extend(run(*a)) or rows)(qg.runner.generate)
        return qg.generate(pairs), [int(i) for r in rows for beam in r for i in beam]

    raw, raw_ids = questions(AutoModelForSeq2SeqLM.from_pretrained(str(path)), limit=False)
    limited, ids = questions(AutoModelForSeq2SeqLM.from_pretrained(str(path)), limit=True)
    cut = AutoModelForSeq2SeqLM.from_pretrained(str(path))
    cut.resize_token_embeddings(len(tok))
    matched, cut_ids = questions(cut, limit=False)
    assert max(raw_ids) >= len(tok)  # the bug: rows past the tokenizer are chosen
    assert max(ids) < len(tok) and ids == cut_ids
    assert limited == matched
    assert sum(len(q.split()) for qs in raw for q in qs) < sum(len(q.split()) for qs in limited for q in qs)
