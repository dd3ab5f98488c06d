"""The one configuration object of the pipeline. Every field is also a CLI flag (``--qg-model`` for ``qg_model``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

__all__ = ["Q2Config", "ConfigOption", "config_options", "DEFAULT_QG_MODEL", "DEFAULT_QA_MODEL",
           "DEFAULT_NLI_MODEL", "ROLES"]

DEFAULT_QG_MODEL = "mrm8488/t5-base-finetuned-question-generation-ap"
DEFAULT_QA_MODEL = "ktrapeznikov/albert-xlarge-v2-squad-v2"
DEFAULT_NLI_MODEL = "FacebookAI/roberta-large-mnli"
ROLES = ("qg", "qa", "nli")

_DTYPES = ("float32", "bfloat16", "float16")


def _f(default: Any, help: str, choices: Optional[tuple] = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class Q2Config:
    """Settings of a Q² scorer. Defaults reproduce the paper's pipeline (beam 5, single question per candidate)."""

    # models
    qg_model: str = _f(DEFAULT_QG_MODEL, "question generation model: hub id or local directory (T5, answer-aware)")
    qg_revision: Optional[str] = _f(None, "hub revision (branch, tag or commit) of the QG model")
    qa_model: str = _f(DEFAULT_QA_MODEL, "extractive QA model with a no-answer option: hub id or local directory")
    qa_revision: Optional[str] = _f(None, "hub revision of the QA model")
    nli_model: str = _f(DEFAULT_NLI_MODEL, "NLI model (sequence classification, 3 labels named in its config)")
    nli_revision: Optional[str] = _f(None, "hub revision of the NLI model")
    spacy_model: str = _f("en_core_web_sm", "spaCy pipeline for answer candidates and the personal-question filter")
    # hardware
    device: str = _f("cpu", "torch device for all models (cpu, cuda, cuda:1, ...)")
    dtype: str = _f("float32", "weights dtype for all models", _DTYPES)
    qg_device: Optional[str] = _f(None, "device of the QG model (default: --device)")
    qa_device: Optional[str] = _f(None, "device of the QA model (default: --device)")
    nli_device: Optional[str] = _f(None, "device of the NLI model (default: --device)")
    qg_dtype: Optional[str] = _f(None, "dtype of the QG model (default: --dtype)", _DTYPES)
    qa_dtype: Optional[str] = _f(None, "dtype of the QA model (default: --dtype)", _DTYPES)
    nli_dtype: Optional[str] = _f(None, "dtype of the NLI model (default: --dtype)", _DTYPES)
    cpu_kernels: str = _f(
        "onednn", "matrix products of the models' Linear layers on the CPU: onednn (weights packed once at load, "
                  "float32/bfloat16, and tanh GELU in one pass; faster, see docs/performance.md) or torch "
                  "(PyTorch's matmul and the models' own activation code)", ("onednn", "torch"))
    batch_size: int = _f(32, "most inputs per forward pass, batched across responses")
    qg_batch_size: Optional[int] = _f(None, "most QG inputs per generate call (default: --batch-size)")
    qa_batch_size: Optional[int] = _f(None, "most QA windows per forward pass (default: --batch-size)")
    nli_batch_size: Optional[int] = _f(None, "most NLI pairs per forward pass (default: --batch-size)")
    batch_tokens: Optional[int] = _f(
        2048, "most padded input tokens per forward pass (inputs x longest input): bounds activation memory "
              "whatever the input lengths; 0 or None: --batch-size alone decides")
    qg_batch_tokens: Optional[int] = _f(None, "token cap of a QG generate call (default: --batch-tokens)")
    qa_batch_tokens: Optional[int] = _f(None, "token cap of a QA forward pass (default: --batch-tokens)")
    nli_batch_tokens: Optional[int] = _f(None, "token cap of an NLI forward pass (default: --batch-tokens)")
    per_item: bool = _f(False, "reference mode: batch size 1 everywhere, no length sorting (same results, slower)")
    # question generation
    qg_decoding: str = _f("beam", "question decoding", ("beam", "greedy"))
    qg_num_beams: int = _f(5, "beam size")
    qg_num_return: int = _f(5, "questions returned per candidate by beam search")
    qg_no_repeat_ngram: int = _f(3, "no_repeat_ngram_size of beam search (0 = off)")
    qg_max_length: int = _f(128, "maximum question length in tokens")
    qg_max_input_tokens: int = _f(512, "longest QG input (answer + response) accepted; longer rows get an error")
    qg_input_template: str = _f(
        "answer: {answer}  context: {context} </s>",
        "QG input with {answer} and {context}, or {highlighted} (the response with the candidate between <hl> "
        "marks); the original appends a literal </s>, which the tokenizer doubles with its own EOS",
    )
    question_mode: str = _f(
        "single", "single: first passing question per candidate; all: every passing question", ("single", "all")
    )
    # question answering
    qa_decoding: str = _f(
        "original",
        "original: independent start/end argmax as in the original code; squad2: best valid span vs the null score",
        ("original", "squad2"),
    )
    qa_max_length: int = _f(512, "QA window length in tokens; longer knowledge is read in overlapping windows")
    qa_stride: int = _f(128, "tokens shared by consecutive QA windows")
    qa_max_answer_tokens: int = _f(30, "longest answer span with qa_decoding=squad2")
    # filters and comparison
    remove_personal: bool = _f(True, "drop questions whose subject is I/you or with possessive my/your")
    normalization: str = _f("q2-original", "answer normalisation for the filter and F1", ("q2-original", "squad"))
    use_nli: bool = _f(True, "compare answers with NLI when F1 < 1 (off = the paper's 'Q2 w/o NLI')")
    fallback: bool = _f(True, "score responses with no valid question by end-to-end NLI (1 / 0.5 / 0)")
    fallback_lowercase_knowledge: bool = _f(True, "lower-case the knowledge for the fallback NLI, as the original")
    fallback_lowercase_response: bool = _f(True, "lower-case the response for the fallback NLI, as the original")
    discard_unanswerable: bool = _f(
        False, "Q2* (the paper's Dialogue NLI variant): when at least one valid question of a response has an "
               "answer in the knowledge, questions with no answer there do not count towards its score")
    nli_max_length: int = _f(512, "NLI window length; a longer premise is read in overlapping windows")
    nli_stride: int = _f(128, "tokens shared by consecutive NLI premise windows")
    # cache
    cache_dir: Optional[str] = _f(None, "directory of a persistent cache of model outputs (off when unset)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            choices = f.metadata.get("choices")
            if choices and value is not None and value not in choices:
                raise ValueError(f"Q2Config.{f.name} must be one of {list(choices)}, got {value!r}")
        for name in ("batch_size", "qg_batch_size", "qa_batch_size", "nli_batch_size", "batch_tokens",
                     "qg_batch_tokens", "qa_batch_tokens", "nli_batch_tokens", "qg_num_beams",
                     "qg_num_return", "qg_max_length", "qg_max_input_tokens", "qa_max_length",
                     "qa_max_answer_tokens", "nli_max_length"):
            value = getattr(self, name)
            lowest = 0 if name == "batch_tokens" else 1  # batch_tokens=0: no token cap
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < lowest):
                kind = "a positive integer" if lowest else "a non-negative integer or None"
                raise ValueError(f"Q2Config.{name} must be {kind}, got {value!r}")
        if self.qg_no_repeat_ngram < 0:
            raise ValueError(f"Q2Config.qg_no_repeat_ngram must be >= 0, got {self.qg_no_repeat_ngram!r}")
        if self.qg_decoding == "beam" and self.qg_num_return > self.qg_num_beams:
            raise ValueError(
                f"Q2Config.qg_num_return ({self.qg_num_return}) cannot exceed qg_num_beams ({self.qg_num_beams})"
            )
        for prefix in ("qa", "nli"):
            length, stride = getattr(self, f"{prefix}_max_length"), getattr(self, f"{prefix}_stride")
            if not 0 <= stride < length // 2:
                raise ValueError(f"Q2Config.{prefix}_stride must be in [0, {prefix}_max_length / 2), got {stride!r}")
        tpl = self.qg_input_template
        if not ("{answer}" in tpl and "{context}" in tpl) and "{highlighted}" not in tpl:
            raise ValueError("Q2Config.qg_input_template must contain {answer} and {context}, or {highlighted} "
                             "(the response with the candidate wrapped in <hl> marks)")

    # -- derived settings ---------------------------------------------------------------------------------------
    def role_device(self, role: str) -> str:
        return getattr(self, f"{role}_device") or self.device

    def role_dtype(self, role: str) -> str:
        return getattr(self, f"{role}_dtype") or self.dtype

    def role_batch_size(self, role: str) -> int:
        if self.per_item:
            return 1
        return getattr(self, f"{role}_batch_size") or self.batch_size

    def role_batch_tokens(self, role: str) -> Optional[int]:
        if self.per_item:
            return None
        return getattr(self, f"{role}_batch_tokens") or self.batch_tokens or None

    def replace(self, **changes: Any) -> "Q2Config":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Q2Config":
        """Build a config from a mapping; unknown keys are an error, never ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise TypeError(f"Unknown Q2Config option(s) {unknown}; known options: {sorted(known)}")
        return cls(**dict(data))

    #: settings that say how a run goes, never what it computes
    RUN_SETTINGS = frozenset({"device", "qg_device", "qa_device", "nli_device", "cpu_kernels", "batch_size",
                              "qg_batch_size", "qa_batch_size", "nli_batch_size", "batch_tokens", "qg_batch_tokens",
                              "qa_batch_tokens", "nli_batch_tokens", "per_item", "cache_dir"})

    def fingerprint(self) -> str:
        """Hash of every setting that can change a score (not devices, kernels, batch sizes or the cache location)."""
        data = {k: v for k, v in self.to_dict().items() if k not in self.RUN_SETTINGS}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ConfigOption:
    """One :class:`Q2Config` field seen as a command-line option (what a CLI adapter needs to declare it)."""

    name: str
    type: type  # str, int or bool; ``Optional[...]`` is unwrapped (``default`` may still be None)
    default: Any
    help: str
    choices: Optional[tuple]


def config_options() -> list[ConfigOption]:
    """Every :class:`Q2Config` field, in declaration order: the one list CLI front ends build their flags from."""
    hints = typing.get_type_hints(Q2Config)
    options = []
    for f in dataclasses.fields(Q2Config):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        options.append(ConfigOption(f.name, args[0] if args else hint, f.default, f.metadata.get("help", ""),
                                    f.metadata.get("choices")))
    return options
