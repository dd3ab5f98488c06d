"""The fast tokenizers Q² runs give the token ids of the slow sentencepiece tokenizers the original ran.

The original code ran transformers' slow ``T5Tokenizer`` / ``AlbertTokenizer``: sentencepiece on ``spiece.model``,
with ALBERT's preprocessing (spaces collapsed, `` and '' as ", accents removed, lower case) and its split of pieces
like ``"9,"``, then the special tokens around. Those classes are gone from the transformers this package uses, so the
reference here is that procedure, written out over the ``sentencepiece`` library on the fixture repositories' own
``spiece.model`` files; the fast tokenizers are what
:func:`q2_plugins.backends.hf.transformers_models.load_model` loads from the same repositories (converted from
``spiece.model``, as these repositories ship no ``tokenizer.json``).
"""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

import pytest

from tests.hub_fixtures import build_hub_cache, fake_commit

T5_REPO = "mrm8488/t5-base-finetuned-question-generation-ap"
ALBERT_REPO = "ktrapeznikov/albert-xlarge-v2-squad-v2"
SPIECE_UNDERLINE = "\u2581"


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory) -> dict[str, Path]:
    cache = tmp_path_factory.mktemp("hub-parity")
    build_hub_cache(cache, (T5_REPO, ALBERT_REPO))
    return {repo: cache / f"models--{repo.replace('/', '--')}" / "snapshots" / fake_commit(repo)
            for repo in (T5_REPO, ALBERT_REPO)}


@pytest.fixture(scope="module")
def wow_sentences(shared_data) -> list[str]:
    """A few hundred distinct WoW responses, knowledge sentences and dialogue turns (mixed case, digits, quotes)."""
    seen: dict[str, None] = {}
    for path in sorted((shared_data / "q2_wow").glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                for column in ("response", "knowledge", "message"):
                    text = (row.get(column) or "").strip()
                    if text:
                        seen.setdefault(text, None)
    sentences = list(seen)[:400]
    assert len(sentences) >= 300
    return sentences


def _processor(path: Path):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.Load(str(path))
    return sp


def _slow_t5(sp, text: str, eos: int = 1) -> list[int]:
    """The slow T5 tokenizer: sentencepiece pieces (a literal ``</s>`` is the end token), then the end token."""
    ids: list[int] = []
    for i, chunk in enumerate(text.split("</s>")):
        if i:
            ids.append(eos)
        if chunk.strip():
            ids += [sp.PieceToId(p) for p in sp.EncodeAsPieces(chunk.strip())]
    return ids + [eos]


def _slow_albert_pieces(sp, text: str) -> list[str]:
    text = " ".join(text.strip().split()).replace("``", '"').replace("''", '"')
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).lower()
    pieces: list[str] = []
    for piece in sp.EncodeAsPieces(text):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():  # "9," is cut into "9" and ","
            cur = sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
            if piece[0] != SPIECE_UNDERLINE and cur and cur[0][0] == SPIECE_UNDERLINE:
                cur = cur[1:] if len(cur[0]) == 1 else [cur[0][1:], *cur[1:]]
            pieces += [*cur, piece[-1]]
        else:
            pieces.append(piece)
    return pieces


def _slow_albert(sp, question: str, context: str | None = None) -> list[int]:
    cls, sep = sp.PieceToId("[CLS]"), sp.PieceToId("[SEP]")
    ids = [cls] + [sp.PieceToId(p) for p in _slow_albert_pieces(sp, question)] + [sep]
    if context is not None:
        ids += [sp.PieceToId(p) for p in _slow_albert_pieces(sp, context)] + [sep]
    return ids


def _fast(snapshot: Path, role: str, kind: str):
    from q2_plugins.backends.hf.transformers_models import load_model

    tokenizer, _ = load_model(role, str(snapshot), None, "cpu", "float32", kind, cpu_kernels="torch")
    assert tokenizer.is_fast
    return tokenizer


def test_t5_fast_equals_slow_on_wow(snapshots, wow_sentences):
    snapshot = snapshots[T5_REPO]
    sp, fast = _processor(snapshot / "spiece.model"), _fast(snapshot, "qg", "seq2seq")
    qg_inputs = [f"answer: {s.split()[0]}  context: {s} </s>" for s in wow_sentences[:100]]  # Q²'s QG template
    texts = wow_sentences + qg_inputs
    got = fast(texts)["input_ids"]
    differ = [t for t, ids in zip(texts, got) if ids != _slow_t5(sp, t)]
    assert differ == []
    assert any(sp.PieceToId("<unk>") in ids for ids in got)  # words outside the tiny vocabulary are exercised


def test_albert_fast_equals_slow_on_wow(snapshots, wow_sentences):
    snapshot = snapshots[ALBERT_REPO]
    sp, fast = _processor(snapshot / "spiece.model"), _fast(snapshot, "qa", "qa")
    got = fast(wow_sentences)["input_ids"]
    differ = [t for t, ids in zip(wow_sentences, got) if ids != _slow_albert(sp, t)]
    assert differ == []
    # question + context pairs, as the QA model reads them
    questions = [f"what is {s.split()[-1]}?" for s in wow_sentences[:100]]
    pairs = fast(questions, wow_sentences[:100])["input_ids"]
    assert [q for q, c, ids in zip(questions, wow_sentences, pairs) if ids != _slow_albert(sp, q, c)] == []
    assert any(any(ch.isupper() for ch in s) for s in wow_sentences)  # lower-casing is exercised
    # (the tiny vocabulary has no "9,"-style piece, so the reference's digit-comma rule is not exercised here)
