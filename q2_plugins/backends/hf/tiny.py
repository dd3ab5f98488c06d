"""Tiny random-weight models with real tokenizers, for offline tests and smoke runs (their scores mean nothing).

Every builder trains a small tokenizer in-process on a built-in English corpus,
creates a tiny randomly initialised model (seeded, so weights are reproducible)
and writes both with ``save_pretrained`` into a directory.  The directory then
loads through the ordinary user path, with no network access::

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSeq2SeqLM.from_pretrained(path)              # build_t5_qg
    model = AutoModelForQuestionAnswering.from_pretrained(path)      # build_albert_qa / build_bert_qa
    model = AutoModelForSequenceClassification.from_pretrained(path) # build_roberta_nli

The module deliberately has no pytest dependency so it can also be used from
scripts or other fixtures.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from q2_plugins.backends.hf.coref import FCorefModule
from q2_plugins.backends.loading import RANDOM_WEIGHTS_MARK, quiet_loading

__all__ = [
    "CORPUS",
    "corpus_sentences",
    "build_t5_qg",
    "build_albert_qa",
    "build_bert_qa",
    "build_roberta_nli",
    "build_fcoref",
    "build_all",
    "build_causal_lm",
    "short_questions_copy",
    "build_examples",
]

# ---------------------------------------------------------------------------
# Built-in training corpus
# ---------------------------------------------------------------------------

_WIKI = """\
Paris is the capital and most populous city of France.
The city is located on the river Seine in the north of the country.
France is a country in Western Europe with a population of about sixty eight million people.
The Eiffel Tower was built in 1889 for the world fair and is one of the most visited monuments in the world.
London is the capital of England and the United Kingdom.
The river Thames flows through London and into the North Sea.
Albert Einstein was a German born theoretical physicist who developed the theory of relativity.
He received the Nobel Prize in Physics in 1921 for his explanation of the photoelectric effect.
Marie Curie was a Polish and French physicist and chemist who conducted research on radioactivity.
She was the first woman to win a Nobel Prize and the only person to win it in two sciences.
The Amazon is the largest rainforest on Earth and covers much of northern Brazil.
The Nile is a major river in north eastern Africa and is often described as the longest river in the world.
Mount Everest is the highest mountain above sea level and lies in the Himalayas between Nepal and China.
William Shakespeare was an English playwright and poet who wrote Hamlet, Macbeth and Romeo and Juliet.
The Great Wall of China is a series of fortifications built across the historical northern borders of China.
Tokyo is the capital of Japan and one of the largest cities in the world.
The Pacific Ocean is the largest and deepest of the oceans on Earth.
Leonardo da Vinci painted the Mona Lisa, which is displayed at the Louvre museum in Paris.
The piano is a musical instrument that was invented in Italy around the year 1700.
Football is the most popular sport in the world and is played by two teams of eleven players.
The Beatles were an English rock band formed in Liverpool in 1960.
Water boils at one hundred degrees Celsius at sea level.
The human heart pumps blood through the body by means of the circulatory system.
Barack Obama served as the president of the United States from 2009 to 2017.
The first book of the series was published in 1997 and became a worldwide success.
The company was founded in a small garage in California and later moved to a larger office.
Berlin is the capital of Germany and is known for its history, art and music.
Rome was the centre of an ancient empire that ruled much of Europe for centuries.
"""

_DIALOGUE = """\
Hi, how are you doing today?
I am doing well, thank you. I just came back from a trip to Paris.
That sounds great! What did you see there?
I visited the Eiffel Tower and the Louvre museum.
Who painted the Mona Lisa? I always forget.
It was painted by Leonardo da Vinci, a famous Italian artist.
Where is the Louvre located?
The Louvre is located in the centre of Paris, near the river Seine.
Do you like music? I love to play the piano in my free time.
Yes, I like rock music a lot. My favourite band is the Beatles.
What is your favourite sport?
I love football. I play it with my friends every weekend.
Can I ask you a question about science?
Sure, ask me anything and I will try to answer it.
Who developed the theory of relativity?
Albert Einstein developed it at the beginning of the twentieth century.
I did not know that. Thanks for the answer!
You are welcome. Is there anything else you want to know?
What is the capital of Japan?
The capital of Japan is Tokyo, which is a very large city.
I have never been there, but I would like to visit one day.
When was the first book published? It was published in 1997.
Why do you like to read books about history?
Because I think it helps me understand the world we live in.
so what do you think about that? who knows, maybe it will rain tomorrow.
and where did you go after the museum? we walked to a small cafe near the river.
what was the question again? the question was about the context of the answer.
who told you that? a friend who lives in london told me where to go and what to see.
i am not sure what you mean, but i think the answer is in the context somewhere.
"""

_QG = """\
answer: paris context: paris is the capital of france.
question: what is the capital of france? answer: paris
answer: leonardo da vinci context: the mona lisa was painted by leonardo da vinci.
question: who painted the mona lisa? answer: leonardo da vinci
answer: the louvre context: the mona lisa is displayed at the louvre in paris.
question: where is the mona lisa displayed? answer: the louvre
question: when was the eiffel tower built? answer: 1889
question: which river flows through london? answer: the thames
question: how many players are in a football team? answer: eleven
question: what is the highest mountain in the world? answer: mount everest
question: where is mount everest? answer: in the himalayas
question: who wrote hamlet? answer: william shakespeare
question: what is the capital of japan? answer: tokyo
question: where was the band formed? answer: liverpool
question: who was the first woman to win a nobel prize? answer: marie curie
question: what does the heart pump? answer: blood
question: where does the nile flow? answer: through north eastern africa
question: who served as president from 2009 to 2017? answer: barack obama
question: what is the largest ocean on earth? answer: the pacific ocean
Given the context, generate a question whose answer is the highlighted span.
The answer to the question can be found in the context, or the question is unanswerable.
Prices rose by 3.5% (from $20 to $21), see page 4/5 [note] and the list {a, b} below.
Symbols such as < > # & * + = @ ~ ^ _ | ; ' " - and ! are sometimes used in text.
"""

#: The built-in English corpus used to train every tokenizer (Wikipedia-style
#: sentences, dialogue-style turns and question/answer/context templates).
CORPUS: str = _WIKI + _DIALOGUE + _QG


def corpus_sentences(lower: bool = False) -> list[str]:
    """Return the built-in corpus as a list of non-empty lines (optionally lowercased)."""
    lines = [line.strip() for line in CORPUS.splitlines() if line.strip()]
    return [line.lower() for line in lines] if lower else lines


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _save(out: Path, model: object, tokenizer: object) -> Path:
    """``save_pretrained`` the model and the tokenizer into ``out``."""

    with quiet_loading():  # (the "Writing model shards" bar)
        model.save_pretrained(out)  # type: ignore[attr-defined]
        tokenizer.save_pretrained(out)  # type: ignore[attr-defined]
    return out


def _init_model(model_cls: type, config: object, seed: int) -> torch.nn.Module:
    """Instantiate ``model_cls(config)`` with random weights drawn under ``torch.manual_seed(seed)``.

    The caller's global torch RNG state is left untouched (``fork_rng``).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_cls(config).eval()


def _random_model(model_cls: type, config_cls: type, tokenizer: Any, seed: int, defaults: Mapping[str, Any],
                  overrides: Mapping[str, Any], model_vocab: int | None = None, **fixed: Any) -> torch.nn.Module:
    """The shape every builder shares: ``config_cls`` from the builder's ``defaults`` with the caller's ``overrides``
    over them, a vocabulary of the tokenizer's size (or ``model_vocab`` rows, if larger) and the ``fixed`` fields
    (token ids, labels); then ``model_cls`` with random weights drawn under ``seed`` (:func:`_init_model`)."""
    config = config_cls(vocab_size=max(len(tokenizer), model_vocab or 0), **fixed, **{**defaults, **overrides})
    return _init_model(model_cls, config, seed)


def _prepare_dir(path: str | os.PathLike) -> Path:
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _train_sentencepiece(
    sentences: list[str],
    vocab_size: int,
    seed: int,
    **options: object,
) -> bytes:
    """Train a sentencepiece unigram model in-process and return the serialized model proto."""
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buf,
        model_type="unigram",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        **options,
    )
    return buf.getvalue()


def _spm_vocab(spm_bytes: bytes) -> tuple[list[tuple[str, float]], bytes | None]:
    """Return ``([(piece, score), ...], precompiled_charsmap)`` from a serialized sentencepiece model."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(spm_bytes)
    pieces = [(p.piece, float(p.score)) for p in proto.pieces]
    return pieces, (proto.normalizer_spec.precompiled_charsmap or None)


# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------


def build_t5_qg(path: str | os.PathLike, seed: int = 0, *, corpus: Sequence[str] | None = None,
                tokenizer_vocab: int = 400, model_vocab: int | None = None, **config: Any) -> Path:
    """Build a tiny T5 question-generation model + sentencepiece T5 tokenizer into ``path``.

    Tokenizer: unigram sentencepiece model trained on :data:`CORPUS`, with the T5
    layout ``<pad>=0, </s>=1, <unk>=2`` plus 100 ``<extra_id_*>`` sentinels.  A
    literal ``"</s>"`` in the input text is matched as the EOS special token.
    Model: d_model 32, 2+2 layers, 2 heads, d_ff 64; ``decoder_start_token_id``
    is the pad id and the generation config is greedy/deterministic.
    ``corpus`` / ``tokenizer_vocab`` change the tokenizer's training text and size, ``model_vocab`` the embedding
    rows, and ``config`` overrides any ``T5Config`` field (e.g. paper-size models for benchmarks).
    """
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration, T5Tokenizer

    out = _prepare_dir(path)
    spm_bytes = _train_sentencepiece(
        list(corpus) if corpus is not None else corpus_sentences(),
        vocab_size=tokenizer_vocab,
        seed=seed,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        pad_piece="<pad>",
        eos_piece="</s>",
        unk_piece="<unk>",
    )
    (out / "spiece.model").write_bytes(spm_bytes)
    pieces, charsmap = _spm_vocab(spm_bytes)
    extra_ids = 100
    # T5 appends the sentinels after the sentencepiece pieces, in reverse order.
    pieces += [(f"<extra_id_{i}>", 0.0) for i in range(extra_ids - 1, -1, -1)]
    tokenizer = T5Tokenizer(
        vocab=pieces,
        _spm_precompiled_charsmap=charsmap,
        extra_ids=extra_ids,
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=512,
    )

    defaults = dict(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
                    relative_attention_num_buckets=8, relative_attention_max_distance=32, dropout_rate=0.0,
                    feed_forward_proj="relu", tie_word_embeddings=True)
    model = _random_model(T5ForConditionalGeneration, T5Config, tokenizer, seed, defaults, config, model_vocab,
                          pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                          decoder_start_token_id=tokenizer.pad_token_id)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        do_sample=False,
        num_beams=1,
        max_length=32,
    )
    return _save(out, model, tokenizer)


def build_albert_qa(path: str | os.PathLike, seed: int = 0, *, corpus: Sequence[str] | None = None,
                    tokenizer_vocab: int = 400, model_vocab: int | None = None, **config: Any) -> Path:
    """Build a tiny ALBERT extractive-QA model + lowercasing sentencepiece ALBERT tokenizer into ``path``.

    Tokenizer layout mirrors albert-xlarge-v2: ``<pad>=0, <unk>=1, [CLS]=2,
    [SEP]=3, [MASK]=4``, input is lowercased.  ``max_position_embeddings`` is 512.
    Keyword arguments as for :func:`build_t5_qg` (``config`` overrides ``AlbertConfig`` fields).
    """
    from transformers import AlbertConfig, AlbertForQuestionAnswering, AlbertTokenizer

    out = _prepare_dir(path)
    spm_bytes = _train_sentencepiece(
        [x.lower() for x in corpus] if corpus is not None else corpus_sentences(lower=True),
        vocab_size=tokenizer_vocab,
        seed=seed,
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        pad_piece="<pad>",
        unk_piece="<unk>",
        control_symbols=["[CLS]", "[SEP]", "[MASK]"],
    )
    (out / "spiece.model").write_bytes(spm_bytes)
    pieces, charsmap = _spm_vocab(spm_bytes)
    # Same score tweak as transformers' AlbertConverter (de-prioritise "9," style pieces).
    pieces = [(p, sc - 100 if len(p) >= 2 and p[-1] == "," and p[-2].isdigit() else sc) for p, sc in pieces]
    tokenizer = AlbertTokenizer(
        vocab=pieces,
        _spm_precompiled_charsmap=charsmap,
        do_lower_case=True,
        keep_accents=False,
        model_max_length=512,
    )

    defaults = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_hidden_groups=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=512, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0)
    model = _random_model(AlbertForQuestionAnswering, AlbertConfig, tokenizer, seed, defaults, config, model_vocab,
                          pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
                          eos_token_id=tokenizer.sep_token_id)
    return _save(out, model, tokenizer)


def build_bert_qa(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build a tiny uncased BERT extractive-QA model + WordPiece tokenizer into ``path``.

    The WordPiece ``vocab.txt`` is built from :data:`CORPUS` after BERT
    normalisation (lowercasing); special tokens are ``[PAD]=0, [UNK]=1, [CLS]=2,
    [SEP]=3, [MASK]=4``.  ``max_position_embeddings`` is 512.
    """
    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertConfig, BertForQuestionAnswering, BertTokenizer

    out = _prepare_dir(path)
    # Deterministic WordPiece vocabulary: specials, every character (word-initial
    # and "##" continuation), a few common suffixes, then every corpus word by
    # frequency.  (tokenizers' WordPieceTrainer breaks merge ties differently from
    # run to run, so it is not used here.)
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: Counter[str] = Counter()
    for line in corpus_sentences():
        counts.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line)))
    chars = sorted({c for word in counts for c in word})
    suffixes = ["##s", "##es", "##ed", "##ing", "##er", "##est", "##ly", "##ion", "##tion", "##al"]
    words = sorted(counts, key=lambda w: (-counts[w], w))
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars), *suffixes, *words]
    vocab: dict[str, int] = {}
    for tok in tokens:
        vocab.setdefault(tok, len(vocab))
    (out / "vocab.txt").write_text("".join(tok + "\n" for tok in vocab), encoding="utf-8")
    tokenizer = BertTokenizer(vocab=dict(vocab), do_lower_case=True, model_max_length=512)

    defaults = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _random_model(BertForQuestionAnswering, BertConfig, tokenizer, seed, defaults, {},
                          pad_token_id=tokenizer.pad_token_id)
    return _save(out, model, tokenizer)


_MNLI_LABELS: dict[int, str] = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def build_roberta_nli(
    path: str | os.PathLike,
    seed: int = 0,
    id2label: Mapping[int, str] | None = None,
    *,
    corpus: Sequence[str] | None = None,
    tokenizer_vocab: int = 1000,
    model_vocab: int | None = None,
    **config: Any,
) -> Path:
    """Build a tiny 3-way RoBERTa NLI classifier + byte-level BPE RoBERTa tokenizer into ``path``.

    ``id2label`` defaults to roberta-large-mnli's ``{0: CONTRADICTION, 1: NEUTRAL,
    2: ENTAILMENT}``.  The BPE (``vocab.json`` + ``merges.txt``) is trained on
    :data:`CORPUS` with special tokens ``<s>=0, <pad>=1, </s>=2, <unk>=3, <mask>=4``.
    Keyword arguments as for :func:`build_t5_qg` (``config`` overrides ``RobertaConfig`` fields).
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForSequenceClassification, RobertaTokenizer

    labels = {int(k): str(v) for k, v in (id2label or _MNLI_LABELS).items()}
    if sorted(labels) != list(range(len(labels))):
        raise ValueError(f"id2label keys must be 0..n-1, got {sorted(labels)}")

    out = _prepare_dir(path)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        list(corpus) if corpus is not None else corpus_sentences(),
        vocab_size=tokenizer_vocab,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    bpe.save_model(str(out))  # vocab.json + merges.txt (the classic RoBERTa file layout)
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    merge_lines = (out / "merges.txt").read_text(encoding="utf-8").splitlines()
    merges = [tuple(line.split(" ")) for line in merge_lines if line and not line.startswith("#version")]
    tokenizer = RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=512)

    defaults = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    max_position_embeddings=514, type_vocab_size=1, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
    model = _random_model(RobertaForSequenceClassification, RobertaConfig, tokenizer, seed, defaults, config,
                          model_vocab, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                          eos_token_id=tokenizer.eos_token_id, num_labels=len(labels), id2label=labels,
                          label2id={v: k for k, v in labels.items()})
    return _save(out, model, tokenizer)


def build_fcoref(path: str | os.PathLike, seed: int = 0, *, ffnn_size: int = 16, **config: Any) -> Path:
    """Build a tiny F-coref coreference model (RoBERTa encoder + mention / antecedent head, the published
    checkpoint's layout; :mod:`q2_plugins.backends.hf.coref`) with a byte-level BPE tokenizer into ``path``. ``config``
    overrides ``RobertaConfig`` fields (the size of the real model: ``hidden_size=768, num_hidden_layers=6,
    num_attention_heads=12, intermediate_size=3072``, ``ffnn_size=1024``, ``model_vocab=50265``)."""
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoTokenizer


    out = build_roberta_nli(path, seed, model_vocab=config.pop("model_vocab", None), **config)
    roberta = AutoConfig.from_pretrained(out)
    for key in ("id2label", "label2id"):
        setattr(roberta, key, {0: "LABEL_0", 1: "LABEL_1"} if key == "id2label" else {"LABEL_0": 0, "LABEL_1": 1})
    roberta.architectures = ["FCorefModel"]
    roberta.coref_head = {"dropout_prob": 0.3, "ffnn_size": ffnn_size, "max_segment_len": 512,
                          "max_span_length": 30, "top_lambda": 0.25}
    model = _init_model(FCorefModule, roberta, seed)
    for weights in out.glob("*.safetensors"):
        weights.unlink()
    roberta.save_pretrained(out)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))
    AutoTokenizer.from_pretrained(out).save_pretrained(out)
    return out


def build_all(root: str | os.PathLike) -> dict[str, Path]:
    """Build the QG (T5), QA (ALBERT), NLI (RoBERTa) and coreference (F-coref) models under ``root``; return
    ``{name: dir}``. Each folder's model card says that its weights are random (the report page says so too)."""
    base = _prepare_dir(root)
    built = {
        "qg": build_t5_qg(base / "qg"),
        "qa": build_albert_qa(base / "qa"),
        "nli": build_roberta_nli(base / "nli"),
        "coref": build_fcoref(base / "coref"),
    }
    for path in built.values():
        mark_random_weights(path)
    return built


def mark_random_weights(path: str | os.PathLike) -> Path:
    """Write the model card of a random-weight test model into ``path`` (README.md: not a model file, so the
    model's identity stays the same)."""
    card = Path(path) / "README.md"
    card.write_text(f"# Random-weight test model\n\n{RANDOM_WEIGHTS_MARK}. Built by q2_plugins.backends.hf.tiny (`q2 "
                    "make-test-models`) to exercise the real loading and scoring code without model weights.\n",
                    encoding="utf-8")
    return card


def build_causal_lm(tokenizer_dir: str | os.PathLike, path: str | os.PathLike, seed: int = 0) -> Path:
    """A tiny GPT-2 causal LM (a dialogue model for the lm-eval and reranking examples) on the byte-level BPE
    tokenizer saved in ``tokenizer_dir`` (the NLI model's)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    defaults = dict(n_embd=32, n_layer=2, n_head=2, n_positions=512)
    model = _random_model(GPT2LMHeadModel, GPT2Config, tok, seed, defaults, {}, bos_token_id=tok.bos_token_id,
                          eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return _save(_prepare_dir(path), model, tok)


def short_questions_copy(qg: str | os.PathLike, path: str | os.PathLike) -> Path:
    """A copy of a tiny QG model whose generation config ends questions after a token or two (every odd id, the
    real EOS 1 included, is an end-of-sequence id). Random weights rarely emit the real EOS, so beam search would
    otherwise run to Q²'s 128-token maximum for every candidate. (Every id as EOS breaks beam search: it needs
    non-final candidates.)"""
    import shutil

    out = Path(path)
    shutil.copytree(qg, out, dirs_exist_ok=True)
    gen = json.loads((out / "generation_config.json").read_text())
    gen["eos_token_id"] = list(range(1, json.loads((out / "config.json").read_text())["vocab_size"], 2))
    (out / "generation_config.json").write_text(json.dumps(gen))
    return out


_RESPONSE_LENGTH_METRIC = '''"""Mean number of words of the predictions: a stand-in for any other evaluate module."""
import datasets
import evaluate


class ResponseLength(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="mean number of words", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("string")}))

    def _compute(self, predictions):
        return {"mean_words": sum(len(p.split()) for p in predictions) / len(predictions)}
'''


def build_examples(root: str | os.PathLike) -> dict[str, Path]:
    """Lay ``root`` out as the documented examples expect, all random weights: ``q2-models/{qg,qa,nli}`` (questions
    end early, see :func:`short_questions_copy`), ``my-dialogue-model`` (causal LM), ``my-seq2seq-model`` (T5) and
    the ``evaluate`` module ``metrics/response_length``. Returns ``{name: path}``."""
    base = _prepare_dir(root)
    built = build_all(base / "q2-models")
    qg_full = built["qg"].parent / "qg-full"
    built["qg"].rename(qg_full)
    paths = {
        "qg": short_questions_copy(qg_full, base / "q2-models" / "qg"),
        "qa": built["qa"],
        "nli": built["nli"],
        "my-dialogue-model": build_causal_lm(built["nli"], base / "my-dialogue-model"),
        "my-seq2seq-model": qg_full.rename(base / "my-seq2seq-model"),
    }
    mark_random_weights(paths["my-dialogue-model"])
    metric = _prepare_dir(base / "metrics" / "response_length") / "response_length.py"
    metric.write_text(_RESPONSE_LENGTH_METRIC, encoding="utf-8")
    paths["metrics/response_length"] = metric.parent
    return paths
