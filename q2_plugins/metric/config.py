"""The one configuration object of the pipeline. Every field is also a CLI flag (``--qg-model`` for ``qg_model``)."""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from q2_plugins.metric.errors import SettingError

__all__ = ["Q2Config", "ConfigOption", "RoleRuntime", "Signed", "config_options", "config_from_args", "MODEL_KINDS",
           "STAGES", "DEFAULT_QG_MODEL", "DEFAULT_QA_MODEL", "DEFAULT_NLI_MODEL", "DEFAULT_COREF_MODEL",
           "DEFAULT_BACKEND", "split_model"]

#: the backend of a model string without a scheme (:mod:`q2_plugins.backends`)
DEFAULT_BACKEND = "hf"
_SCHEME = re.compile(r"^([a-z][a-z0-9_+.-]+):(.*)$", re.S)  # two characters at least: C:\... is a path


def split_model(model: str) -> tuple[str, str]:
    """``(scheme, name)`` of a model string: ``SCHEME:NAME`` names the backend registered as ``SCHEME`` and what it
    loads; a string without a scheme, or an existing path, is :data:`DEFAULT_BACKEND`'s."""
    found = _SCHEME.match(model)
    if found is None or os.path.exists(os.path.expanduser(model)):
        return DEFAULT_BACKEND, model
    return found.group(1), found.group(2)


DEFAULT_QG_MODEL = "mrm8488/t5-base-finetuned-question-generation-ap"
DEFAULT_QA_MODEL = "ktrapeznikov/albert-xlarge-v2-squad-v2"
DEFAULT_NLI_MODEL = "FacebookAI/roberta-large-mnli"
DEFAULT_COREF_MODEL = "biu-nlp/f-coref"
#: the kind of model (``transformers_models.load_model``'s ``kind``) each role loads
MODEL_KINDS = {"qg": "seq2seq", "qa": "qa", "nli": "classification"}

_CPU_BATCH_SIZE, _CPU_BATCH_TOKENS = 32, 2048  # (q2_plugins.backends.accel.device's CPU defaults; config imports light)
_DTYPES = ("float32", "bfloat16", "float16", "tf32")

#: what a field means: ``model`` names a model (in the signature through the model's identity), ``score`` can change
#: a score (in the signature as itself, and in the cache key of the stages it names), ``runtime`` only says how a run
#: goes (never in the signature)
KINDS = ("model", "score", "runtime")
#: the stages whose outputs are cached, each computed by the component of the same name
STAGES = ("coref", "candidates", "personal", "qg", "qa", "nli", "signals")


@dataclass(frozen=True)
class Signed:
    """How a score setting is written in the signature: a piece of the signature part ``part``.

    ``text`` writes the value (``"win{}"`` gives ``win512``); ``words`` instead maps each value to its piece (None:
    no piece), and may name a component's identity (``"remove:{personal}"``). ``when``: the setting only acts (and
    is only written) while these other settings have these values."""

    part: str
    text: str = "{}"
    words: Optional[Mapping[Any, Optional[str]]] = None
    when: Mapping[str, Any] = field(default_factory=dict)

    def applies(self, config: "Q2Config") -> bool:
        return all(getattr(config, name) == value for name, value in self.when.items())

    def piece(self, value: Any, ids: Optional[Mapping[str, str]] = None) -> Optional[str]:
        """The piece this setting writes for ``value`` (None: nothing); a word's ``{component}`` is filled from
        ``ids`` (left as it is without them)."""
        if self.words is None:
            return self.text.format(value)
        word = self.words[value]
        return word if word is None or ids is None else word.format_map(ids)


def _f(default: Any, help: str, choices: Optional[tuple] = None, *, kind: str, group: str,
       sig: Optional[Signed] = None, stages: tuple[str, ...] = (), common: bool = False) -> Any:
    if kind not in KINDS or not set(stages) <= set(STAGES):
        raise ValueError(f"kind must be one of {KINDS} and stages among {STAGES}, got {kind!r}, {stages!r}")
    if (sig is not None) != (kind == "score"):
        raise TypeError("a score setting says how the signature writes it (sig=Signed(...)), and only a score setting")
    return field(default=default, metadata={"help": help, "choices": choices, "kind": kind, "group": group,
                                            "sig": sig, "stages": stages, "common": common})


def _model(default: Any, help: str, choices: Optional[tuple] = None, *, common: bool = False) -> Any:
    return _f(default, help, choices, kind="model", group="models", common=common)


def _run(default: Any, help: str, choices: Optional[tuple] = None, group: str = "runtime", *,
         common: bool = False) -> Any:
    return _f(default, help, choices, kind="runtime", group=group, common=common)


def _role(default: Any, help: str, choices: Optional[tuple] = None, kind: str = "runtime") -> Any:
    return _f(default, help, choices, kind=kind, group="per-role")


_QG, _QA, _CMP = "question generation", "question answering", "filters and comparison"
_BUDGET = "budgets"


def _score(default: Any, help: str, choices: Optional[tuple] = None, *, group: str, sig: Signed,
           stages: tuple[str, ...] = (), common: bool = False) -> Any:
    """A setting that can change a score. ``sig``: how the signature writes it. ``stages``: the cached stages
    whose outputs it changes; it reaches each as a keyword of its component (the field name without the stage
    prefix: ``qa_stride`` is ``stride``) and is part of each one's cache key. ``common``: one of the few settings
    people change, shown by a command's short ``--help`` (the others by ``--help-all``)."""
    return _f(default, help, choices, kind="score", group=group, sig=sig, stages=stages, common=common)


_BEAM = {"qg_decoding": "beam"}  # the beam settings act with beam search only


@dataclass(frozen=True)
class Q2Config:
    """Settings of a Q² scorer. Defaults reproduce the paper's pipeline (beam 5, single question per candidate)."""

    # -- models: named in the signature by their identity (repository and commit, or content) --------------------
    qg_model: str = _model(DEFAULT_QG_MODEL, "question generation model (T5, answer-aware): hub id or folder",
                           common=True)
    qg_revision: Optional[str] = _model(None, "hub revision (branch, tag or commit) of the QG model")
    qa_model: str = _model(DEFAULT_QA_MODEL, "extractive QA model with a no-answer option: hub id or folder",
                           common=True)
    qa_revision: Optional[str] = _model(None, "hub revision of the QA model")
    nli_model: str = _model(DEFAULT_NLI_MODEL, "NLI model (3 labels named in its config): hub id or folder",
                            common=True)
    nli_revision: Optional[str] = _model(None, "hub revision of the NLI model")
    coref_model: str = _model(DEFAULT_COREF_MODEL, "coreference model of --coref (F-coref layout, see "
                                                   "docs/coreference.md): hub id or local directory")
    coref_revision: Optional[str] = _model(None, "hub revision of the coreference model")
    spacy_model: str = _model("en_core_web_sm", "spaCy pipeline for answer candidates and the personal-question filter")
    dtype: str = _model("float32", "weights dtype for all models, in each model's identity (tf32: Ampere+ GPUs)",
                        _DTYPES, common=True)
    # -- Q² settings: each can change a score; ``sig`` says how the signature writes it, ``stages`` which cached ------
    # -- stages it changes (see docs/development.md, "Adding a setting") ------------------------------------------
    qg_decoding: str = _score("beam", "question decoding", ("beam", "greedy"), group=_QG, stages=("qg",),
                              sig=Signed("qg-dec", words={"beam": None, "greedy": "greedy"}))
    qg_num_beams: int = _score(5, "beam size", group=_QG, stages=("qg",), sig=Signed("qg-dec", "beam{}", when=_BEAM))
    qg_num_return: int = _score(5, "questions returned per candidate by beam search", group=_QG, stages=("qg",),
                                sig=Signed("qg-dec", "ret{}", when=_BEAM))
    qg_no_repeat_ngram: int = _score(3, "no_repeat_ngram_size of beam search (0 = off)", group=_QG, stages=("qg",),
                                     sig=Signed("qg-dec", "nrng{}", when=_BEAM))
    qg_max_length: int = _score(128, "maximum question length in tokens", group=_QG, stages=("qg",),
                                sig=Signed("qg-dec", "max{}"))
    qg_max_input_tokens: int = _score(512, "longest QG input (answer + response) accepted; longer rows get an error",
                                      group=_QG, stages=("qg",), sig=Signed("qg-dec", "in{}"))
    qg_input_template: str = _score(
        "answer: {answer}  context: {context} </s>",
        "QG input with {answer} and {context}, or {highlighted} (the response with the candidate between <hl> "
        "marks); the original appends a literal </s>, which the tokenizer doubles with its own EOS", group=_QG,
        stages=("qg",), sig=Signed("qg-dec", "tpl:{!r}"),
    )
    question_mode: str = _score(
        "single", "single: first passing question per candidate; all: every passing question", ("single", "all"),
        group=_QG, sig=Signed("questions"), common=True,
    )
    qa_decoding: str = _score(
        "original",
        "original: independent start/end argmax as in the original code; squad2: best valid span vs the null score",
        ("original", "squad2"), group=_QA, stages=("qa",), sig=Signed("qa-dec"),
    )
    qa_max_length: int = _score(512, "QA window length in tokens; longer knowledge is read in overlapping windows",
                                group=_QA, stages=("qa",), sig=Signed("qa-dec", "win{}"))
    qa_stride: int = _score(128, "tokens shared by consecutive QA windows", group=_QA, stages=("qa",),
                            sig=Signed("qa-dec", "stride{}"))
    qa_max_answer_tokens: int = _score(30, "longest answer span with qa_decoding=squad2", group=_QA, stages=("qa",),
                                       sig=Signed("qa-dec", "maxans{}", when={"qa_decoding": "squad2"}))
    remove_personal: bool = _score(True, "drop questions whose subject is I/you or with possessive my/your",
                                   group=_CMP, sig=Signed("personal", words={True: "remove:{personal}", False: "keep"}))
    normalization: str = _score("q2-original", "answer normalisation for the filter and F1", ("q2-original", "squad"),
                                group=_CMP, sig=Signed("norm"))
    use_nli: bool = _score(True, "compare answers with NLI when F1 < 1 (off = the paper's 'Q2 w/o NLI')", group=_CMP,
                           sig=Signed("cmp", words={True: "f1+nli", False: "f1"}), common=True)
    fallback: bool = _score(True, "score responses with no valid question by end-to-end NLI (1 / 0.5 / 0)",
                            group=_CMP, sig=Signed("fallback", words={True: "e2e-nli", False: "none"}))
    fallback_lowercase_knowledge: bool = _score(
        True, "lower-case the knowledge for the fallback NLI, as the original", group=_CMP,
        sig=Signed("fallback", words={True: "lowerknow", False: None}, when={"fallback": True}))
    fallback_lowercase_response: bool = _score(
        True, "lower-case the response for the fallback NLI, as the original", group=_CMP,
        sig=Signed("fallback", words={True: "lowerresp", False: None}, when={"fallback": True}))
    discard_unanswerable: bool = _score(
        False, "Q2* (the paper's Dialogue NLI variant): when at least one valid question of a response has an "
               "answer in the knowledge, questions with no answer there do not count towards its score", group=_CMP,
        sig=Signed("questions", words={True: "discard-unanswerable", False: None}))
    nli_max_length: int = _score(512, "NLI window length; a longer premise is read in overlapping windows",
                                 group=_CMP, stages=("nli",), sig=Signed("nli-dec", "win{}"))
    nli_stride: int = _score(128, "tokens shared by consecutive NLI premise windows", group=_CMP, stages=("nli",),
                             sig=Signed("nli-dec", "stride{}"))
    coref: bool = _score(False, "resolve the response's third-person pronouns over the dialogue history before "
                                "extracting candidates: the paper's appendix A step (docs/coreference.md)",
                         group="coreference", stages=("coref",),
                         sig=Signed("coref-dec", words={True: "pronouns-to-mention", False: None}), common=True)
    # -- per-row budgets: a row over one gets its own error (or, with over_budget=truncate, a warning) before the
    # work the budget bounds; 0 = no limit. Sized for dialogue: see docs/failures.md -----------------------------
    max_response_chars: int = _score(
        2000, "longest response, in characters (dialogue responses are one or two sentences; the longest in the "
              "reference data sets is 722); 0 = no limit", group=_BUDGET, sig=Signed("budget", "resp{}"))
    max_knowledge_chars: int = _score(
        20000, "longest knowledge, in characters (about 12 QA windows per question); 0 = no limit", group=_BUDGET,
        sig=Signed("budget", "know{}"))
    max_candidates: int = _score(100, "most answer candidates of one response; 0 = no limit", group=_BUDGET,
                                 sig=Signed("budget", "cand{}"))
    max_questions: int = _score(
        100, "most valid questions of one response (each is answered on the knowledge); 0 = no limit",
        group=_BUDGET, sig=Signed("budget", "q{}"))
    over_budget: str = _score(
        "error", "a row over a budget: error (the row gets an error naming the budget) or truncate (scored on its "
                 "first characters / candidates / questions within the budget, with a warning in the row)",
        ("error", "truncate"), group=_BUDGET, sig=Signed("budget"))
    # -- runtime: how a run goes, never what it computes (not in the signature) ----------------------------------
    device: str = _run("cpu", "torch device for all models (cpu, cuda, cuda:1, ...)", common=True)
    cpu_kernels: str = _run(
        "onednn", "matrix products of the models' Linear layers on the CPU: onednn (weights packed once at load, "
                  "float32/bfloat16, and tanh GELU in one pass; faster, see docs/performance.md) or torch "
                  "(PyTorch's matmul and the models' own activation code)", ("onednn", "torch"))
    qg_search: str = _run("own", "beam search of the QG model: own (this package's T5 beam search, checked against "
                                 "transformers' generate) or library (transformers' generate)", ("own", "library"))
    pack_windows: bool = _run(True, "QA and NLI on the CPU: run a batch's windows packed end to end instead of "
                                    "padded (same results; other devices run padded windows, faster there)")
    batch_size: Optional[int] = _run(
        None, "most inputs per forward pass, batched across responses (default: 32 on the CPU; on a GPU from the "
              "model and the free memory)")
    batch_tokens: Optional[int] = _run(
        None, "most padded input tokens per forward pass (inputs x longest input): bounds activation memory "
              "whatever the input lengths (default: 2048 on the CPU; on a GPU from the model and the free memory); "
              "0: --batch-size alone decides")
    precision_check: int = _run(
        16, "on settings the tests cannot run (a GPU, float16, bfloat16 off the CPU, tf32, int8 backends), the first "
            "this many rows are scored again in float32 on the library's code paths and the decisions compared "
            "(recorded in the result's .meta.json, a warning below the tolerance); 0: off")
    per_item: bool = _run(False, "reference mode: batch size 1 everywhere, no length sorting (same results, slower)")
    cache_dir: Optional[str] = _run(None, "directory of a persistent cache of model outputs (off when unset)")
    cache_trusted: bool = _run(
        False, "use a cache directory that another user owns or others can write: its entries are taken as they are, "
               "so everyone who can write it can change the scores it gives (without it, such a cache is refused; "
               "docs/failures.md)")
    # -- per-role settings: each overrides the setting of all models for one of them ------------------------------
    qg_dtype: Optional[str] = _role(None, "dtype of the QG model (default: --dtype)", _DTYPES, kind="model")
    qa_dtype: Optional[str] = _role(None, "dtype of the QA model (default: --dtype)", _DTYPES, kind="model")
    nli_dtype: Optional[str] = _role(None, "dtype of the NLI model (default: --dtype)", _DTYPES, kind="model")
    qg_device: Optional[str] = _role(None, "device of the QG model (default: --device)")
    qa_device: Optional[str] = _role(None, "device of the QA model (default: --device)")
    nli_device: Optional[str] = _role(None, "device of the NLI model (default: --device)")
    qg_batch_size: Optional[int] = _role(None, "most QG inputs per generate call (default: --batch-size)")
    qa_batch_size: Optional[int] = _role(None, "most QA windows per forward pass (default: --batch-size)")
    nli_batch_size: Optional[int] = _role(None, "most NLI pairs per forward pass (default: --batch-size)")
    qg_batch_tokens: Optional[int] = _role(None, "token cap of a QG generate call (default: --batch-tokens)")
    qa_batch_tokens: Optional[int] = _role(None, "token cap of a QA forward pass (default: --batch-tokens)")
    nli_batch_tokens: Optional[int] = _role(None, "token cap of an NLI forward pass (default: --batch-tokens)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            choices = f.metadata.get("choices")
            if choices and value is not None and value not in choices:
                raise SettingError(f.name, f"must be one of {list(choices)}, got {value!r}")
        if not isinstance(self.precision_check, int) or isinstance(self.precision_check, bool) \
                or self.precision_check < 0:
            raise SettingError("precision_check", f"must be a non-negative integer, got {self.precision_check!r}")
        for name in ("batch_size", "qg_batch_size", "qa_batch_size", "nli_batch_size", "batch_tokens",
                     "qg_batch_tokens", "qa_batch_tokens", "nli_batch_tokens", "qg_num_beams",
                     "qg_num_return", "qg_max_length", "qg_max_input_tokens", "qa_max_length",
                     "qa_max_answer_tokens", "nli_max_length"):
            value = getattr(self, name)
            lowest = 0 if name == "batch_tokens" else 1  # batch_tokens=0: no token cap
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < lowest):
                kind = "a positive integer" if lowest else "a non-negative integer or None"
                raise SettingError(name, f"must be {kind}, got {value!r}")
        for name in self.names("score"):
            value = getattr(self, name)
            if name.startswith("max_") and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise SettingError(name, f"must be a non-negative integer (0 = no limit), got {value!r}")
        if self.qg_no_repeat_ngram < 0:
            raise SettingError("qg_no_repeat_ngram", f"must be >= 0, got {self.qg_no_repeat_ngram!r}")
        if self.qg_decoding == "beam" and self.qg_num_return > self.qg_num_beams:
            raise SettingError("qg_num_return / qg_num_beams", f"the number of questions returned "
                               f"({self.qg_num_return}) cannot exceed the number of beams ({self.qg_num_beams})")
        for prefix in ("qa", "nli"):
            length, stride = getattr(self, f"{prefix}_max_length"), getattr(self, f"{prefix}_stride")
            if not 0 <= stride < length // 2:
                raise SettingError(f"{prefix}_stride", f"must be in [0, {prefix}_max_length / 2), got {stride!r}")
        tpl = self.qg_input_template
        if not ("{answer}" in tpl and "{context}" in tpl) and "{highlighted}" not in tpl:
            raise SettingError("qg_input_template", "must contain {answer} and {context}, or {highlighted} (the "
                                                    "response with the candidate wrapped in <hl> marks)")

    # -- derived settings ---------------------------------------------------------------------------------------
    def role_device(self, role: str) -> str:
        return getattr(self, f"{role}_device") or self.device

    def role_dtype(self, role: str) -> str:
        return getattr(self, f"{role}_dtype") or self.dtype

    def role_batch_size(self, role: str) -> int:
        """The batch size of ``role``: its own setting, ``batch_size``, or the CPU default (a model on a GPU
        replaces the default by one from its size and the free memory when it loads: :meth:`role_runtime`)."""
        if self.per_item:
            return 1
        return getattr(self, f"{role}_batch_size") or self.batch_size or _CPU_BATCH_SIZE

    def role_batch_tokens(self, role: str) -> Optional[int]:
        """The token cap of ``role`` (None: no cap), as :meth:`role_batch_size` finds it."""
        if self.per_item:
            return None
        own = getattr(self, f"{role}_batch_tokens") or self.batch_tokens
        return own or (None if self.batch_tokens == 0 else _CPU_BATCH_TOKENS)

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

    @classmethod
    def names(cls, kind: str) -> tuple[str, ...]:
        """The fields of one kind (``model``, ``score`` or ``runtime``; see their metadata), in declaration order."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata["kind"] == kind)

    @classmethod
    def signed(cls) -> tuple[tuple[str, Signed], ...]:
        """``(name, how the signature writes it)`` of every score setting, in declaration order."""
        return tuple((f.name, f.metadata["sig"]) for f in dataclasses.fields(cls) if f.metadata["kind"] == "score")

    @classmethod
    def stage_names(cls, stage: str) -> tuple[str, ...]:
        """The score settings that change the outputs of the cached stage ``stage`` (their ``stages`` name it)."""
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {list(STAGES)}, got {stage!r}")
        return tuple(f.name for f in dataclasses.fields(cls) if stage in f.metadata["stages"])

    def stage_settings(self, stage: str) -> dict[str, Any]:
        """The score settings of ``stage`` as its component's keyword arguments (``qa_stride`` -> ``stride``)."""
        return {name[len(stage) + 1:]: getattr(self, name) for name in self.stage_names(stage)}

    @property
    def uses_nli(self) -> bool:
        """Whether scoring needs the NLI model: to compare answers, or for the fallback."""
        return self.use_nli or self.fallback

    def role_runtime(self, role: str) -> "RoleRuntime":
        """How the model of ``role`` (qg, qa, nli) runs: its per-role settings, or the shared ones."""
        auto_size = not self.per_item and not (getattr(self, f"{role}_batch_size") or self.batch_size)
        auto_tokens = not self.per_item and not getattr(self, f"{role}_batch_tokens") and self.batch_tokens is None
        return RoleRuntime(self.role_device(role), self.role_batch_size(role), self.role_batch_tokens(role),
                           sort_by_length=not self.per_item, auto_batch_size=auto_size, auto_batch_tokens=auto_tokens)


@dataclass(frozen=True)
class RoleRuntime:
    """The runtime settings of one model role, with the per-role overrides applied."""

    device: str
    batch_size: int
    batch_tokens: Optional[int]
    sort_by_length: bool
    auto_batch_size: bool = False  # the user set no batch size: the device's default applies
    auto_batch_tokens: bool = False  # the user set no token cap: the device's default applies


@dataclass(frozen=True)
class ConfigOption:
    """One :class:`Q2Config` field seen as a command-line option (what a CLI adapter needs to declare it)."""

    name: str
    type: type  # str, int or bool; ``Optional[...]`` is unwrapped (``default`` may still be None)
    default: Any
    help: str
    choices: Optional[tuple]
    kind: str = "score"  # model, score or runtime (see Q2Config.names)
    group: str = ""  # models, question generation, question answering, filters and comparison, budgets, runtime,
    # per-role
    common: bool = False  # one of the few settings people change: a command's short --help shows it


def config_options() -> list[ConfigOption]:
    """Every :class:`Q2Config` field, in declaration order: the one list CLI front ends build their flags from."""
    hints = typing.get_type_hints(Q2Config)
    options = []
    for f in dataclasses.fields(Q2Config):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        options.append(ConfigOption(f.name, args[0] if args else hint, f.default, f.metadata.get("help", ""),
                                    f.metadata.get("choices"), f.metadata["kind"], f.metadata["group"],
                                    f.metadata["common"]))
    return options


def config_from_args(args: Any) -> Q2Config:
    """The config of parsed command-line flags (an object with an attribute per field it sets; a
    command that declares only some fields, such as ``q2 prefetch``, leaves the others at their defaults)."""
    return Q2Config(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Q2Config) if hasattr(args, f.name)})
