"""The ``ct2`` backend: QG and NLI models converted to CTranslate2 and run in int8 on the CPU.

``ct2:NAME`` (``qg_model="ct2:mrm8488/t5-base-finetuned-question-generation-ap"``, ``--nli-model
ct2:FacebookAI/roberta-large-mnli``, a directory too) loads the transformers model NAME under the one load policy,
converts it once with CTranslate2's converter (``pip install 'q2-plugins[ct2]'``) and runs it on CTranslate2's
int8 kernels; ``ct2:NAME#int8_float32`` (or another CTranslate2 compute type) picks another. The conversion is kept
under ``$Q2_CT2_CACHE`` (default ``~/.cache/q2_plugins/ct2``) keyed by the model's identity (its content or hub
commit), the compute type and the CTranslate2 version, so a model is converted once per machine.

Roles: ``qg`` (T5: CTranslate2's own beam search, which is not transformers' and can return other questions) and
``nli`` (RoBERTa / BERT encoders; the classification head runs in float32 from the model's own weights). ALBERT has
no CTranslate2 converter, so QA stays on transformers. The identity says ``ct2-<version>:<model>[<compute type>]``:
results of this backend never share a signature or a cache entry with the transformers model's. How far its
decisions are from float32: ``q2 check-precision --qg-model ct2:... --nli-model ct2:...``; a run checks its first
rows itself (:mod:`q2_plugins.metric.precision`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from q2_plugins.backends.accel.batching import length_batches
from q2_plugins.backends.hf import transformers_models
from q2_plugins.backends.loading import cpu_only, made_once, model_files
from q2_plugins.metric.errors import ModelLoadError, SettingError
from q2_plugins.metric.signature import model_id

if TYPE_CHECKING:
    from q2_plugins.metric.config import Q2Config

__all__ = ["CT2Backend", "BACKEND", "ROLES", "DEFAULT_COMPUTE_TYPE", "CACHE_ENV", "source_model", "converted"]

ROLES = ("qg", "nli")
DEFAULT_COMPUTE_TYPE = "int8"
CACHE_ENV = "Q2_CT2_CACHE"


def _split(name: str) -> tuple[str, str]:
    """``(model, compute type)`` of the part after ``ct2:``."""
    model, _, compute = name.partition("#")
    return model, compute or DEFAULT_COMPUTE_TYPE


def source_model(name: str) -> str:
    """The transformers model a ``ct2:`` name converts (its float32 reference)."""
    return _split(name)[0]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctranslate2")
    except PackageNotFoundError:
        raise ModuleNotFoundError("the ct2 backend needs CTranslate2: pip install 'q2-plugins[ct2]'") from None


def _revision(role: str, config: "Q2Config") -> Optional[str]:
    return getattr(config, f"{role}_revision")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise SettingError(f"{role}_model", f"the ct2 backend converts QG (T5) and NLI (RoBERTa, BERT) models, not "
                                            f"{role}; keep the {role.upper()} model on transformers (no ct2: prefix)")


def _cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "q2_plugins" / "ct2").expanduser()


def converted(role: str, name: str, revision: Optional[str]) -> Path:
    """The directory of the converted model (converted now if this machine has not yet done it)."""

    model, compute = _split(name)
    key = hashlib.sha256(f"{model_id(model, revision)}|{compute}|{_version()}".encode()).hexdigest()[:24]
    return made_once(_cache_root() / f"{role}-{key}", "model.bin",
                     lambda tmp: _convert(role, _local_files(role, model, revision), tmp, compute))


def _local_files(role: str, model: str, revision: Optional[str]) -> str:
    """A local directory holding the model's files, under the one load policy."""
    return model_files(role, model, revision)


def _convert(role: str, source: str, out: Path, compute: str) -> None:
    import ctranslate2
    import torch

    class Converter(ctranslate2.converters.TransformersConverter):
        rows = 0

        def load_model(self, model_class: Any, model_name_or_path: str, **kwargs: Any) -> Any:
            model = super().load_model(model_class, model_name_or_path, **kwargs)
            if not hasattr(model.config, "position_embedding_type"):  # transformers 5: absolute positions only
                model.config.position_embedding_type = "absolute"
            self.rows = model.get_input_embeddings().weight.shape[0]
            return model

        def load_tokenizer(self, tokenizer_class: Any, model_name_or_path: str, **kwargs: Any) -> Any:
            return _PaddedVocabulary(super().load_tokenizer(tokenizer_class, model_name_or_path, **kwargs),
                                     self.rows)

    from transformers.utils import logging as hf_logging

    quantization = compute if compute != "auto" else None
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # (its report on the head the encoder-only load leaves out: expected here)
    try:
        Converter(source).convert(str(out), quantization=quantization, force=True)
    except (ValueError, NotImplementedError, AssertionError) as e:
        raise ModelLoadError(f"The {role.upper()} model {source!r} cannot be converted for CTranslate2: {e}",
                             setting=f"{role}_model") from e
    finally:
        hf_logging.set_verbosity(level)
    if role == "nli":  # the classification head, kept in float32 beside the encoder
        from transformers import AutoModelForSequenceClassification

        model = AutoModelForSequenceClassification.from_pretrained(source, dtype=torch.float32)
        head = {k[len("classifier."):]: v.detach().clone() for k, v in model.state_dict().items()
                if k.startswith("classifier.")}
        if not head:
            raise ModelLoadError(f"The NLI model {source!r} has no classifier head the ct2 backend knows "
                                 f"(RoBERTa's classifier.dense / classifier.out_proj, or BERT's classifier)",
                                 setting="nli_model")
        torch.save({"head": head, "id2label": dict(model.config.id2label),
                    "kind": type(model).__name__}, out / "q2_head.pt")


class _PaddedVocabulary:
    """A tokenizer whose vocabulary is filled up to the model's embedding rows with placeholders no text produces
    (CTranslate2 wants one token per row; a model may have more rows than its tokenizer has tokens)."""

    def __init__(self, tokenizer: Any, rows: int) -> None:
        self._tokenizer, self._rows = tokenizer, rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def get_vocab(self) -> dict[str, int]:
        vocab = dict(self._tokenizer.get_vocab())
        taken = set(vocab.values())
        for i in range(self._rows):
            if i not in taken:
                vocab[f"<q2_unused_{i}>"] = i
        return vocab


def _threads() -> int:
    import torch

    return max(1, torch.get_num_threads())


def _workers(threads: int) -> tuple[int, int]:
    """(batches run side by side, threads each) for a translator or encoder on ``threads`` CPU threads. A matmul of
    one batch (batch x beams rows at a decoder step) is small, so threads split within one batch wait on each
    other at every op; whole batches run side by side do not (``benchmarks/bench_gpu.py --int8`` measures it). A
    call of one batch runs on one worker's threads. At most 4 side by side, to keep the memory of the batches in
    flight bounded."""
    side = min(threads, 4)
    return side, max(1, threads // side)


def _keeping_torch_threads(make: Any) -> Any:
    """``make()``, then torch's thread count put back: CTranslate2 sets the OpenMP thread count of the calling
    thread to its ``intra_threads``, which torch (QA, the float32 check) would then run on."""
    import torch

    threads = torch.get_num_threads()
    try:
        return make()
    finally:
        torch.set_num_threads(threads)


class CT2Backend:
    """Components of CTranslate2 conversions of transformers QG and NLI models (see the module docstring)."""

    def identity(self, role: str, name: str, config: "Q2Config") -> str:
        _check_role(role)
        model, compute = _split(name)
        return f"ct2-{_version()}:{model_id(model, _revision(role, config))}[{compute}]"

    def load(self, role: str, name: str, config: "Q2Config") -> Any:
        import ctranslate2
        from transformers import AutoTokenizer

        _check_role(role)
        model, compute = _split(name)
        cpu_only("ct2", role, config)
        path = converted(role, name, _revision(role, config))
        tokenizer = AutoTokenizer.from_pretrained(_local_files(role, model, _revision(role, config)))
        rt = config.role_runtime(role)
        batching = {"batch_size": rt.batch_size, "batch_tokens": rt.batch_tokens, "sort_by_length": rt.sort_by_length}
        if role == "qg":
            side, each = _workers(_threads())
            translator = _keeping_torch_threads(lambda: ctranslate2.Translator(
                str(path), device="cpu", compute_type=compute, inter_threads=side, intra_threads=each))
            qg = CT2QuestionGenerator(tokenizer, translator, **config.stage_settings("qg"), **batching)
            qg.end_tokens = _end_tokens(tokenizer, _local_files(role, model, _revision(role, config)))
            return qg
        side, each = _workers(_threads())
        encoder = _keeping_torch_threads(lambda: ctranslate2.Encoder(str(path), device="cpu", compute_type=compute,
                                                                     inter_threads=side, intra_threads=each))
        return CT2NLI(tokenizer, encoder, path / "q2_head.pt", **config.stage_settings("nli"), model_name=name,
                      **batching)


BACKEND = CT2Backend()


def _end_tokens(tokenizer: Any, source: str) -> Optional[list[str]]:
    """The tokens that end a question by the model's generation config (several ids: all of them), or None."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(source).eos_token_id
    except (OSError, ValueError):
        return None
    if eos is None:
        return None
    return tokenizer.convert_ids_to_tokens(list(eos) if isinstance(eos, (list, tuple)) else [eos])


def _hf() -> Any:
    return transformers_models


class CT2QuestionGenerator(_hf().HFQuestionGenerator):  # type: ignore[misc]
    """T5 question generation by a CTranslate2 translator: the inputs, limits and decoding of
    :class:`~q2_plugins.backends.hf.transformers_models.HFQuestionGenerator`, CTranslate2's beam search."""

    def __init__(self, tokenizer: Any, translator: Any, *, batch_size: int, decoding: str = "beam",
                 num_beams: int = 5, num_return: int = 5, no_repeat_ngram: int = 3, max_length: int = 128,
                 max_input_tokens: int = 512, input_template: str = "answer: {answer}  context: {context} </s>",
                 sort_by_length: bool = True, batch_tokens: Optional[int] = None) -> None:
        self.tokenizer, self.translator = tokenizer, translator
        self.batch_size, self.batch_tokens, self.sort_by_length = batch_size, batch_tokens, sort_by_length
        self.decoding = decoding
        self.num_beams = num_beams if decoding == "beam" else 1
        self.num_return = num_return if decoding == "beam" else 1
        self.no_repeat_ngram = no_repeat_ngram
        self.max_length, self.max_input_tokens, self.input_template = max_length, max_input_tokens, input_template
        self.generate_overrides: dict[str, Any] = {}  # benchmarks: min_new_tokens / max_new_tokens
        self.end_tokens: Optional[list[str]] = None  # the generation config's end tokens

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        encoded = self.tokenizer(self._texts(pairs), add_special_tokens=True)["input_ids"]
        for ids in encoded:
            if len(ids) > self.max_input_tokens:
                raise ValueError(self._too_long(len(ids)))
        tokens = [self.tokenizer.convert_ids_to_tokens(ids) for ids in encoded]
        most = self.generate_overrides.get("max_new_tokens", self.max_length - 1)  # (max_length counts the start)
        least = self.generate_overrides.get("min_new_tokens", 0)
        out: list[list[str]] = [[] for _ in pairs]
        # Every batch is queued at once (the same batches as one at a time, so the same questions); the
        # translator's workers run them side by side (see _workers).
        queued = [(batch, self.translator.translate_batch(
            [tokens[i] for i in batch], beam_size=self.num_beams, num_hypotheses=self.num_return,
            no_repeat_ngram_size=self.no_repeat_ngram if self.decoding == "beam" else 0,
            max_decoding_length=most, min_decoding_length=least, max_batch_size=len(batch), asynchronous=True,
            **({"end_token": self.end_tokens} if self.end_tokens else {})))
            for batch in length_batches([len(t) for t in tokens], self.batch_size, self.sort_by_length,
                                        self.batch_tokens)]
        for batch, results in queued:
            for i, pending in zip(batch, results):
                res = pending.result()
                texts = self.tokenizer.batch_decode([self.tokenizer.convert_tokens_to_ids(h) for h in res.hypotheses],
                                                    skip_special_tokens=True)
                out[i] = [q.replace("question: ", "", 1) for q in texts]
        return out


class CT2NLI(_hf().HFNLI):  # type: ignore[misc]
    """NLI by a CTranslate2 encoder and the model's own classification head (float32): the windows and the
    aggregation over windows of :class:`~q2_plugins.backends.hf.transformers_models.HFNLI`."""

    def __init__(self, tokenizer: Any, encoder: Any, head_file: Path, *, batch_size: int, max_length: int = 512,
                 stride: int = 128, model_name: str = "", sort_by_length: bool = True,
                 batch_tokens: Optional[int] = None) -> None:
        import torch

        saved = torch.load(head_file, weights_only=True)
        self.tokenizer, self.encoder = tokenizer, encoder
        self.batch_size, self.batch_tokens, self.sort_by_length = batch_size, batch_tokens, sort_by_length
        self.max_length, self.stride = max_length, stride
        self.labels = _hf().nli_label_map({int(k): v for k, v in saved["id2label"].items()}, model_name)
        self._head = saved["head"]
        self._feeders: Any = None  # the threads that hand batches to the encoder's workers, made on first use

    def _classify(self, first: Any) -> Any:
        """The head on each window's first-token state: RoBERTa's dense + tanh + out_proj, or BERT's linear layer
        on the pooled state (computed here from the encoder's pooler output)."""
        import torch

        h = self._head
        if "out_proj.weight" in h:
            x = torch.tanh(torch.nn.functional.linear(first, h["dense.weight"], h["dense.bias"]))
            return torch.nn.functional.linear(x, h["out_proj.weight"], h["out_proj.bias"])
        return torch.nn.functional.linear(first, h["weight"], h["bias"])

    def _logits(self, win: Any) -> list[Any]:
        import numpy as np
        import torch


        features = win.features
        lengths = [len(f["input_ids"]) for f in features]
        out: list[Any] = [None] * len(features)

        def encode(batch: list[int]) -> tuple[list[int], Any]:
            ids = [list(features[w]["input_ids"]) for w in batch]
            types = [list(features[w]["token_type_ids"]) for w in batch] if "token_type_ids" in features[0] else None
            return batch, self.encoder.forward_batch(ids, token_type_ids=types)

        batches = list(length_batches(lengths, self.batch_size, self.sort_by_length, self.batch_tokens))
        # whole batches side by side on the encoder's workers (see _workers); the same batches as one at a time
        workers = int(getattr(self.encoder, "num_encoders", 1) or 1)
        if workers > 1 and len(batches) > 1:
            if self._feeders is None:
                from concurrent.futures import ThreadPoolExecutor

                self._feeders = ThreadPoolExecutor(workers, thread_name_prefix="q2-ct2-nli")
            encoded: Any = self._feeders.map(encode, batches)
        else:
            encoded = map(encode, batches)
        for batch, result in encoded:
            pooled = getattr(result, "pooler_output", None) if "out_proj.weight" not in self._head else None
            first = (torch.as_tensor(np.array(pooled)) if pooled is not None
                     else torch.as_tensor(np.array(result.last_hidden_state))[:, 0])
            logits = self._classify(first.float())
            for j, w in enumerate(batch):
                out[w] = logits[j]
        return out
