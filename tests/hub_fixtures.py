"""A Hugging Face cache holding the published Q² checkpoints as the hub serves them, with tiny random weights.

For each default model and each alternative the README lists, :func:`build_hub_cache` writes
``models--org--name/{blobs,snapshots/<commit>,refs/main}`` the way ``huggingface_hub`` lays out a download: blobs
named by SHA-256 (LFS files) or git blob SHA-1 (small files), the snapshot's files symlinked to them, ``refs/main``
naming the commit. Each repository has its published file set (read from its public file listing) and the published
``config.json`` / tokenizer-config / special-tokens fields, with the size fields (hidden sizes, layers, heads,
vocabulary) shrunk so tiny models built by :mod:`q2_plugins.backends.hf.tiny` fit them, and tiny random weights in the
published weight format (``pytorch_model.bin`` as a pickle checkpoint, in the pre-zip format for the 2020 uploads, and
``model.safetensors`` where the repository has it). TensorFlow / Flax weights, optimizer states and training arguments
are present as files, since the repositories have them, but hold placeholders: the PyTorch loading path never reads
them. The commits are fixed fake hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch

from q2_plugins.backends.hf.tiny import build_albert_qa, build_fcoref, build_roberta_nli, build_t5_qg

DEFAULT_REPOS = ("mrm8488/t5-base-finetuned-question-generation-ap", "ktrapeznikov/albert-xlarge-v2-squad-v2",
                 "FacebookAI/roberta-large-mnli")
ALTERNATIVE_REPOS = ("lmqg/t5-small-squad-qg", "abhilash1910/albert-squad-v2")
COREF_REPO = "biu-nlp/f-coref"
LFS_SUFFIXES = (".bin", ".safetensors", ".h5", ".msgpack", ".pt", ".pth", ".model")


def fake_commit(repo_id: str) -> str:
    return hashlib.sha1(f"q2-fixture:{repo_id}".encode()).hexdigest()


_SCRATCH: list[Path] = []  # temporary build directories, removed by build_hub_cache


def _scratch() -> Path:
    path = Path(tempfile.mkdtemp(prefix="q2-hub-fixture-"))
    _SCRATCH.append(path)
    return path


def _json(data: Any) -> bytes:
    return json.dumps(data, indent=2).encode()


def _tiny(builder: Callable[..., Path], **kw: Any) -> tuple[Path, dict[str, torch.Tensor], dict[str, Any]]:
    """Build a tiny model in a temporary directory: (its directory, state dict, config dict)."""
    from safetensors.torch import load_file

    out = _scratch() / "m"
    builder(out, **kw)
    return out, load_file(out / "model.safetensors"), json.loads((out / "config.json").read_text())


def _pickle(state: dict[str, torch.Tensor], legacy: bool = False) -> bytes:
    path = _scratch() / "w.bin"
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    return path.read_bytes()


def _safetensors(state: dict[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in state.items()}, metadata={"format": "pt"})


_T5_TASKS = {
    "summarization": {"early_stopping": True, "length_penalty": 2.0, "max_length": 200, "min_length": 30,
                      "no_repeat_ngram_size": 3, "num_beams": 4, "prefix": "summarize: "},
    "translation_en_to_de": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to German: "},
    "translation_en_to_fr": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to French: "},
    "translation_en_to_ro": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                             "prefix": "translate English to Romanian: "},
}
_T5_TINY = {"d_ff": 64, "d_kv": 16, "d_model": 32, "num_heads": 2, "num_layers": 2,
            "relative_attention_num_buckets": 8}
_T5_SPECIALS = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                "additional_special_tokens": [f"<extra_id_{i}>" for i in range(100)]}


def _mrm8488_t5() -> dict[str, bytes]:
    tmp, state, cfg = _tiny(build_t5_qg)
    config = {"architectures": ["T5ForConditionalGeneration"], **_T5_TINY, "decoder_start_token_id": 0,
              "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0, "is_encoder_decoder": True,
              "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512, "output_past": True,
              "pad_token_id": 0, "task_specific_params": _T5_TASKS, "vocab_size": cfg["vocab_size"]}
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# T5-base fine-tuned on SQuAD for Question Generation (test fixture, random weights)\n",
        "config.json": _json(config),
        "pytorch_model.bin": _pickle(state),
        "special_tokens_map.json": _json(_T5_SPECIALS),
        "spiece.model": (tmp / "spiece.model").read_bytes(),
        "tokenizer_config.json": b'{"model_max_length": 512}',
        "training_args.bin": _pickle({"output_dir": torch.tensor(0)}),
    }


def _lmqg_t5_small() -> dict[str, bytes]:
    from transformers import AutoTokenizer

    tmp, state, cfg = _tiny(build_t5_qg)
    tok = AutoTokenizer.from_pretrained(tmp)
    tok.add_tokens(["<hl>"])  # the highlight mark lmqg's models are trained with
    vocab = len(tok)
    for key in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):
        if key in state:  # one more embedding row for <hl>
            state[key] = torch.cat([state[key], state[key][:1] * 0.5])
    tok_dir = tmp.parent / "tok"
    tok.save_pretrained(tok_dir)
    config = {"_name_or_path": "t5-small-squad-qg", "add_prefix": True,
              "architectures": ["T5ForConditionalGeneration"], **_T5_TINY, "decoder_start_token_id": 0,
              "dense_act_fn": "relu", "dropout_rate": 0.1, "eos_token_id": 1, "feed_forward_proj": "relu",
              "initializer_factor": 1.0, "is_encoder_decoder": True, "is_gated_act": False,
              "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512, "num_decoder_layers": 2,
              "output_past": True, "pad_token_id": 0, "relative_attention_max_distance": 128,
              "task_specific_params": _T5_TASKS, "torch_dtype": "float32", "transformers_version": "4.18.0",
              "use_cache": True, "vocab_size": vocab}
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n*.model filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# lmqg/t5-small-squad-qg (test fixture, random weights)\n",
        "added_tokens.json": _json({"<hl>": vocab - 1}),
        "config.json": _json(config),
        "eval/metric.first.sentence.paragraph_answer.question.lmqg_qg_squad.default.json": b'{"validation": {}}',
        "generation_config.json": _json({"_from_model_config": True, "decoder_start_token_id": 0,
                                         "eos_token_id": 1, "pad_token_id": 0}),
        "pytorch_model.bin": _pickle(state),
        "special_tokens_map.json": _json({"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}),
        "spiece.model": (tmp / "spiece.model").read_bytes(),
        "tokenizer.json": (tok_dir / "tokenizer.json").read_bytes(),
        "tokenizer_config.json": _json({"eos_token": "</s>", "extra_ids": 100, "model_max_length": 512,
                                        "pad_token": "<pad>", "tokenizer_class": "T5Tokenizer",
                                        "unk_token": "<unk>"}),
    }


_ALBERT_TINY = {"embedding_size": 16, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2,
                "num_hidden_layers": 2}


def _albert_config(vocab: int, **extra: Any) -> dict[str, Any]:
    return {**extra, "architectures": ["AlbertForQuestionAnswering"], "attention_probs_dropout_prob": 0,
            "bos_token_id": 2, "classifier_dropout_prob": 0.1, "down_scale_factor": 1, "eos_token_id": 3,
            "gap_size": 0, "hidden_act": "gelu_new", "hidden_dropout_prob": 0, "initializer_range": 0.02,
            "inner_group_num": 1, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "albert",
            "net_structure_type": 0, "num_hidden_groups": 1, "num_memory_blocks": 0, "pad_token_id": 0,
            "type_vocab_size": 2, "vocab_size": vocab, **_ALBERT_TINY}


_ALBERT_SPECIALS = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
                    "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}


def _ktrapeznikov_albert() -> dict[str, bytes]:
    tmp, state, cfg = _tiny(build_albert_qa)
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# ALBERT xlarge v2 fine-tuned on SQuAD v2 (test fixture, random weights)\n",
        "added_tokens.json": b"{}",
        "config.json": _json(_albert_config(cfg["vocab_size"])),
        "eval.csv": b"metric,value\nexact,0\nf1,0\n",
        "pytorch_model.bin": _pickle(state, legacy=True),  # uploaded in January 2020: the pre-zip torch.save format
        "special_tokens_map.json": _json(_ALBERT_SPECIALS),
        "spiece.model": (tmp / "spiece.model").read_bytes(),
        "tokenizer_config.json": _json({"do_lower_case": True, "max_len": 512, "init_inputs": []}),
        "training_args.bin": _pickle({"seed": torch.tensor(42)}, legacy=True),
    }


def _abhilash_albert() -> dict[str, bytes]:
    tmp, state, cfg = _tiny(build_albert_qa)
    tokenizer_config = {"bos_token": "[CLS]", "cls_token": "[CLS]", "do_lower_case": True, "eos_token": "[SEP]",
                        "keep_accents": False, "mask_token": "[MASK]", "model_max_length": 512,
                        "pad_token": "<pad>", "remove_space": True, "sep_token": "[SEP]",
                        "tokenizer_class": "AlbertTokenizer", "unk_token": "<unk>"}
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n*.pt filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# abhilash1910/albert-squad-v2 (test fixture, random weights)\n",
        "config.json": _json(_albert_config(cfg["vocab_size"], _name_or_path="albert-base-v2",
                                            position_embedding_type="absolute", transformers_version="4.9.2")),
        "optimizer.pt": b"placeholder: optimizer state, never loaded for inference",
        "pytorch_model.bin": _pickle(state),
        "rng_state.pth": b"placeholder: trainer RNG state, never loaded for inference",
        "scheduler.pt": b"placeholder: scheduler state, never loaded for inference",
        "special_tokens_map.json": _json(_ALBERT_SPECIALS),
        "tokenizer.json": (tmp / "tokenizer.json").read_bytes(),  # fast tokenizer only: no spiece.model
        "tokenizer_config.json": _json(tokenizer_config),
        "trainer_state.json": b'{"log_history": []}',
        "training_args.bin": b"placeholder: training arguments, never loaded for inference",
    }


def _roberta_mnli() -> dict[str, bytes]:
    tmp, state, cfg = _tiny(build_roberta_nli)
    config = {"architectures": ["RobertaForSequenceClassification"], "attention_probs_dropout_prob": 0.1,
              "bos_token_id": 0, "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "hidden_size": 32, "id2label": {"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"},
              "initializer_range": 0.02, "intermediate_size": 64,
              "label2id": {"CONTRADICTION": 0, "ENTAILMENT": 2, "NEUTRAL": 1}, "layer_norm_eps": 1e-05,
              "max_position_embeddings": 514, "model_type": "roberta", "num_attention_heads": 2,
              "num_hidden_layers": 2, "pad_token_id": 1, "type_vocab_size": 1, "vocab_size": cfg["vocab_size"]}
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n"
                          b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# roberta-large-mnli (test fixture, random weights)\n",
        "config.json": _json(config),
        "flax_model.msgpack": b"placeholder: Flax weights, never read by the PyTorch path",
        "merges.txt": (tmp / "merges.txt").read_bytes(),
        "model.safetensors": _safetensors(state),
        "pytorch_model.bin": _pickle(state, legacy=True),
        "tf_model.h5": b"placeholder: TensorFlow weights, never read by the PyTorch path",
        "tokenizer.json": (tmp / "tokenizer.json").read_bytes(),
        "tokenizer_config.json": b'{"model_max_length": 512}',
        "vocab.json": (tmp / "vocab.json").read_bytes(),
    }


def _biu_fcoref() -> dict[str, bytes]:
    """F-coref as published: a pickle checkpoint only (with the old position_ids buffer, no pooler), the
    FastCorefModel architecture name and the coref_head settings in config.json."""
    tmp, state, cfg = _tiny(build_fcoref)
    state = {**state, "roberta.embeddings.position_ids": torch.arange(cfg["max_position_embeddings"])[None]}
    config = {k: cfg[k] for k in ("attention_probs_dropout_prob", "bos_token_id", "eos_token_id", "hidden_act",
                                  "hidden_dropout_prob", "hidden_size", "initializer_range", "intermediate_size",
                                  "layer_norm_eps", "max_position_embeddings", "model_type", "num_attention_heads",
                                  "num_hidden_layers", "pad_token_id", "type_vocab_size", "vocab_size")}
    config.update(architectures=["FastCorefModel"], coref_head=cfg["coref_head"], torch_dtype="float32")
    return {
        ".gitattributes": b"*.bin filter=lfs diff=lfs merge=lfs -text\n",
        "README.md": b"# f-coref (test fixture, random weights)\n",
        "config.json": _json(config),
        "merges.txt": (tmp / "merges.txt").read_bytes(),
        "pytorch_model.bin": _pickle(state),
        "special_tokens_map.json": _json({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                                          "sep_token": "</s>", "pad_token": "<pad>", "cls_token": "<s>",
                                          "mask_token": "<mask>"}),
        "tokenizer.json": (tmp / "tokenizer.json").read_bytes(),
        "tokenizer_config.json": (tmp / "tokenizer_config.json").read_bytes(),
        "vocab.json": (tmp / "vocab.json").read_bytes(),
    }


REPOS: dict[str, Callable[[], dict[str, bytes]]] = {
    "mrm8488/t5-base-finetuned-question-generation-ap": _mrm8488_t5,
    "ktrapeznikov/albert-xlarge-v2-squad-v2": _ktrapeznikov_albert,
    "FacebookAI/roberta-large-mnli": _roberta_mnli,
    "lmqg/t5-small-squad-qg": _lmqg_t5_small,
    "abhilash1910/albert-squad-v2": _abhilash_albert,
    COREF_REPO: _biu_fcoref,
}


def _blob_name(name: str, data: bytes) -> str:
    if name.endswith(LFS_SUFFIXES):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id of a small file


def store_snapshot(cache: Path, repo_id: str, files: dict[str, bytes], commit: str) -> Path:
    """Lay ``files`` out as the Hugging Face cache holds commit ``commit`` of ``repo_id``; return the snapshot."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        blob = repo / "blobs" / _blob_name(name, data)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def build_hub_cache(cache: str | os.PathLike, repos: tuple[str, ...] = tuple(REPOS)) -> dict[str, str]:
    """Write the fixture repositories into the hub cache directory ``cache``; returns repo id -> commit."""
    cache = Path(cache)
    commits = {}
    for repo_id in repos:
        commits[repo_id] = fake_commit(repo_id)
        store_snapshot(cache, repo_id, REPOS[repo_id](), commits[repo_id])
    while _SCRATCH:
        shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)
    return commits
