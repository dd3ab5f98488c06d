"""Tests for q2_plugins.backends.hf.tiny: tiny models must reload through the standard Auto* path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)

from q2_plugins.backends.hf import tiny as tiny_models

LONG_CONTEXT = " ".join(tiny_models.corpus_sentences()[:12])
QUESTION = "What is the capital of France?"


# ---------------------------------------------------------------------------
# Fixtures: each builder writes into its own temporary directory once per module
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.build_t5_qg(tmp_path_factory.mktemp("t5"))


@pytest.fixture(scope="module")
def albert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.build_albert_qa(tmp_path_factory.mktemp("albert"))


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.build_bert_qa(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def nli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.build_roberta_nli(tmp_path_factory.mktemp("nli"))


@pytest.fixture(params=["albert", "bert"])
def qa_dir(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")


# ---------------------------------------------------------------------------
# T5 question generation
# ---------------------------------------------------------------------------


def test_t5_files_and_types(t5_dir: Path) -> None:
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json", "spiece.model"):
        assert (t5_dir / name).is_file(), name
    tok = AutoTokenizer.from_pretrained(t5_dir)
    assert tok.is_fast
    assert type(tok).__name__ == "T5Tokenizer"
    assert AutoConfig.from_pretrained(t5_dir).model_type == "t5"


def test_t5_tokenizer_special_tokens(t5_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(t5_dir)
    assert (tok.pad_token, tok.eos_token, tok.unk_token) == ("<pad>", "</s>", "<unk>")
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    assert tok.convert_tokens_to_ids("<extra_id_0>") == len(tok) - 1

    ids = tok("answer: paris  context: paris is in france </s>")["input_ids"]
    # the literal "</s>" is the EOS special token, and the post-processor appends another one
    assert ids[-2:] == [tok.eos_token_id, tok.eos_token_id]
    assert ids.count(tok.eos_token_id) == 2
    assert tok.unk_token_id not in ids
    assert tok.decode(ids, skip_special_tokens=True) == "answer: paris context: paris is in france"
    # prompt keywords are single pieces; question words are known (no <unk>) and round-trip
    for word in ("question", "answer", "context"):
        assert tok.tokenize(word) == ["\u2581" + word], word
    for word in ("what", "who", "where", "What", "Who", "Where"):
        ids = tok(word, add_special_tokens=False)["input_ids"]
        assert tok.unk_token_id not in ids and tok.decode(ids) == word, word


def test_t5_windowing_and_offsets(t5_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(t5_dir)
    enc = tok(LONG_CONTEXT, truncation=True, max_length=64, stride=16, return_overflowing_tokens=True,
              return_offsets_mapping=True)
    assert len(enc["input_ids"]) > 1
    start, end = enc["offset_mapping"][0][0]
    assert LONG_CONTEXT[start:end] == "Paris"


def test_t5_model_config_and_generate(t5_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(t5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(t5_dir).eval()
    assert type(model).__name__ == "T5ForConditionalGeneration"
    assert model.config.decoder_start_token_id == tok.pad_token_id
    assert model.config.vocab_size >= len(tok)
    gc = model.generation_config
    assert gc.do_sample is False
    assert gc.decoder_start_token_id == tok.pad_token_id
    assert gc.eos_token_id == tok.eos_token_id

    texts = [
        "answer: paris  context: paris is the capital of france </s>",
        "answer: leonardo da vinci  context: the mona lisa was painted by leonardo da vinci in italy </s>",
    ]
    batch = tok(texts, return_tensors="pt", padding=True)
    assert (batch["attention_mask"] == 0).any()  # really padded

    def run() -> torch.Tensor:
        with torch.no_grad():
            return model.generate(
                **batch,
                num_beams=5,
                num_return_sequences=5,
                no_repeat_ngram_size=3,
                max_length=20,
                early_stopping=True,
            )

    out = run()
    assert out.shape[0] == 2 * 5
    assert out.shape[1] <= 20
    assert (out[:, 0] == tok.pad_token_id).all()  # decoder starts from <pad>
    decoded = tok.batch_decode(out, skip_special_tokens=True)
    assert len(decoded) == 10 and all(isinstance(s, str) for s in decoded)
    assert torch.equal(out, run())  # deterministic


# ---------------------------------------------------------------------------
# Extractive QA (ALBERT and BERT)
# ---------------------------------------------------------------------------


def test_albert_tokenizer(albert_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(albert_dir)
    assert tok.is_fast and type(tok).__name__ == "AlbertTokenizer"
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id) == (0, 1, 2, 3)
    assert tok.convert_tokens_to_ids("[MASK]") == 4
    upper = tok("Paris Is The Capital Of FRANCE")["input_ids"]
    lower = tok("paris is the capital of france")["input_ids"]
    assert upper == lower
    assert upper[0] == tok.cls_token_id and upper[-1] == tok.sep_token_id
    assert tok.decode(upper, skip_special_tokens=True) == "paris is the capital of france"
    assert all(t == t.lower() for t in tok.tokenize("Who Painted The Mona Lisa?"))


def test_bert_tokenizer(bert_dir: Path) -> None:
    assert (bert_dir / "vocab.txt").is_file()
    tok = AutoTokenizer.from_pretrained(bert_dir)
    assert tok.is_fast and type(tok).__name__ == "BertTokenizer"
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id) == (0, 1, 2, 3)
    enc = tok("Where is the Louvre?", "The Louvre is in Paris.")
    assert tok.convert_ids_to_tokens(enc["input_ids"])[:5] == ["[CLS]", "where", "is", "the", "louvre"]
    assert set(enc["token_type_ids"]) == {0, 1}
    assert tok.decode(enc["input_ids"], skip_special_tokens=True) == "where is the louvre? the louvre is in paris."
    # unseen words fall back to word pieces rather than [UNK]
    assert tok.unk_token_id not in tok("zebra")["input_ids"]


def test_qa_windowing(qa_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(qa_dir)
    enc = tok(
        QUESTION,
        LONG_CONTEXT,
        truncation="only_second",
        max_length=64,
        stride=16,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    n = len(enc["input_ids"])
    assert n > 1
    assert all(len(ids) == 64 for ids in enc["input_ids"])
    assert list(enc["overflow_to_sample_mapping"]) == [0] * n
    # every window starts with the full question and context offsets point into the context
    for i in range(n):
        seq_ids = enc.sequence_ids(i)
        assert seq_ids[0] is None and seq_ids[1] == 0
        ctx_offsets = [off for off, s in zip(enc["offset_mapping"][i], seq_ids) if s == 1]
        assert ctx_offsets and all(0 <= a <= b <= len(LONG_CONTEXT) for a, b in ctx_offsets)
    first_ctx = [off for off, s in zip(enc["offset_mapping"][0], enc.sequence_ids(0)) if s == 1][0]
    assert LONG_CONTEXT[first_ctx[0]:first_ctx[1]].lower().lstrip() == "paris"


def test_qa_model_logits(qa_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(qa_dir)
    model = AutoModelForQuestionAnswering.from_pretrained(qa_dir).eval()
    assert model.config.max_position_embeddings == 512
    assert model.config.vocab_size >= len(tok)
    enc = tok([QUESTION, "Who painted the Mona Lisa?"], [LONG_CONTEXT, "Leonardo da Vinci painted it."],
              truncation="only_second", max_length=128, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    assert out.start_logits.shape == enc["input_ids"].shape
    assert out.end_logits.shape == enc["input_ids"].shape
    assert torch.isfinite(out.start_logits).all() and torch.isfinite(out.end_logits).all()
    # the full 512-token window fits the position embeddings
    long = tok(QUESTION, LONG_CONTEXT * 5, truncation="only_second", max_length=512, return_tensors="pt")
    assert long["input_ids"].shape[1] == 512
    with torch.no_grad():
        assert model(**long).start_logits.shape == (1, 512)


# ---------------------------------------------------------------------------
# NLI (RoBERTa)
# ---------------------------------------------------------------------------


def test_nli_tokenizer(nli_dir: Path) -> None:
    for name in ("vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"):
        assert (nli_dir / name).is_file(), name
    tok = AutoTokenizer.from_pretrained(nli_dir)
    assert tok.is_fast and type(tok).__name__ == "RobertaTokenizer"
    assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    enc = tok("Paris is in France.", "Paris is a city.")
    ids = enc["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert [tok.sep_token_id, tok.sep_token_id] in [ids[i:i + 2] for i in range(len(ids) - 1)]
    assert tok.decode(ids, skip_special_tokens=True) == "Paris is in France.Paris is a city."
    text = "Paris is in France. Who knows where the answer is?"
    enc = tok(text, return_offsets_mapping=True)
    assert tok.unk_token_id not in enc["input_ids"]
    pieces = [text[a:b] for a, b in enc["offset_mapping"][1:-1]]
    assert pieces[0] == "Paris" and "".join(pieces) == text.replace(" ", "")


def test_nli_model_default_labels(nli_dir: Path) -> None:
    tok = AutoTokenizer.from_pretrained(nli_dir)
    model = AutoModelForSequenceClassification.from_pretrained(nli_dir).eval()
    assert model.config.id2label == {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    assert model.config.label2id == {"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2}
    assert model.config.num_labels == 3
    enc = tok(["Paris is in France.", "The sky is blue."], ["Paris is a city.", "Water boils."],
              padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    assert logits.shape == (2, 3)


def test_nli_custom_labels(tmp_path: Path) -> None:
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    path = tiny_models.build_roberta_nli(tmp_path / "nli", id2label=labels)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    assert model.config.id2label == labels
    assert model.config.label2id == {v: k for k, v in labels.items()}


# ---------------------------------------------------------------------------
# Reproducibility and build_all
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "builder",
    [tiny_models.build_t5_qg, tiny_models.build_albert_qa, tiny_models.build_bert_qa, tiny_models.build_roberta_nli],
    ids=["t5", "albert", "bert", "roberta"],
)
def test_builds_are_reproducible(builder, tmp_path: Path) -> None:
    a, b, c = builder(tmp_path / "a", seed=0), builder(tmp_path / "b", seed=0), builder(tmp_path / "c", seed=1)
    for name in ("tokenizer.json", "model.safetensors"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


def test_build_all(tmp_path: Path) -> None:
    paths = tiny_models.build_all(tmp_path / "models")
    assert set(paths) == {"qg", "qa", "nli", "coref"}
    assert all(p.is_dir() and p.parent == tmp_path / "models" for p in paths.values())
    assert type(AutoModelForSeq2SeqLM.from_pretrained(paths["qg"])).__name__ == "T5ForConditionalGeneration"
    assert type(AutoModelForQuestionAnswering.from_pretrained(paths["qa"])).__name__ == "AlbertForQuestionAnswering"
    assert (type(AutoModelForSequenceClassification.from_pretrained(paths["nli"])).__name__
            == "RobertaForSequenceClassification")
