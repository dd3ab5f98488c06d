"""Transformers-backed components: T5 question generation, extractive QA with windows, NLI.

Each component takes a whole list of inputs, sorts it by length, runs it in batches and returns outputs in input
order; padding never changes a result. QA and NLI windows run packed end to end where the model allows
(:mod:`q2_plugins.packed`), padded batches with attention masks otherwise; beam-search QG on a T5-style model runs
:mod:`q2_plugins.beam`, other decoding the library's ``generate``. Models are loaded by :func:`load_model`.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable, Iterator, Optional, Sequence, TypeVar

from .beam import T5BeamSearch, beam_settings
from .components import Answer, AnswerKind, NLILabel
from .errors import ModelLoadError, model_load_message
from .packed import PackedEncoder
from .selfcheck import FastPathCheck

__all__ = ["load_model", "HFQuestionGenerator", "HFQuestionAnswerer", "HFNLI", "nli_label_map"]

T = TypeVar("T")

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def _torch() -> Any:
    import torch

    return torch


def load_model(role: str, name: str, revision: Optional[str], device: str, dtype: str, kind: str,
               cpu_kernels: str = "onednn") -> tuple[Any, Any]:
    """Load tokenizer + model for a role through the Auto classes; errors say what to change.

    With ``cpu_kernels="onednn"``, the Linear layers of a CPU model get their weights packed for oneDNN and a
    tanh-approximated GELU runs as one kernel (:mod:`q2_plugins.onednn`, which leaves other devices alone);
    ``"torch"`` keeps PyTorch's own matmul and the model's own activation code.
    """
    if cpu_kernels not in ("onednn", "torch"):
        raise ValueError(f"cpu_kernels must be 'onednn' or 'torch', got {cpu_kernels!r}")
    try:
        import transformers
    except ModuleNotFoundError as e:  # pragma: no cover - core dependency
        raise ModuleNotFoundError("q2_plugins needs transformers: pip install 'transformers>=4.40'") from e
    auto = {
        "seq2seq": transformers.AutoModelForSeq2SeqLM,
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
    }[kind]
    looks_local = name.startswith((".", "/", "~")) or os.path.isdir(os.path.expanduser(name))
    if looks_local and not os.path.isdir(os.path.expanduser(name)):
        raise ModelLoadError(model_load_message(role, name, FileNotFoundError(f"no directory {name!r}")))
    path = os.path.expanduser(name) if looks_local else name
    torch = _torch()
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, revision=revision)
        # model.safetensors when the repository has it; a pickle checkpoint (pytorch_model.bin) only as tensors
        model = auto.from_pretrained(path, revision=revision, dtype=getattr(torch, _DTYPES[dtype]),
                                     weights_only=True)
    except ModelLoadError:
        raise
    except Exception as e:  # transformers raises OSError, ValueError, HF hub errors...
        if _unpickling_refused(e):
            raise ModelLoadError(
                f"Refused to load the {role.upper()} model {name!r} (setting: {role}_model): its pickle checkpoint "
                f"holds objects other than tensors, and Q2 loads pickle checkpoints only with torch.load("
                f"weights_only=True), which runs no code. Use a copy with model.safetensors, or convert a checkpoint "
                f"you trust to safetensors. ({_refusal_reason(e)})"
            ) from e
        raise ModelLoadError(model_load_message(role, name, e)) from e
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"The {role.upper()} model {name!r} has no fast tokenizer (setting: {role}_model); Q2 needs one for "
            f"windowing. Install 'tokenizers' and 'sentencepiece' so it can be converted."
        )
    model.to(device)
    model.eval()
    if cpu_kernels == "onednn":
        from .onednn import fuse_tanh_gelu, pack_linear_layers

        if pack_linear_layers(model):  # a CPU model on fast kernels: its activations too
            fuse_tanh_gelu(model)
    return tokenizer, model


def _unpickling_refused(error: BaseException) -> bool:
    """Whether ``error`` (or an error it came from) is torch.load refusing a pickle with ``weights_only=True``."""
    import pickle

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, pickle.UnpicklingError):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def _refusal_reason(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line]
    return (named or lines or [type(error).__name__])[0]


def highlight(answer: str, context: str, mark: str = "<hl>") -> str:
    """The context with the first occurrence of the answer wrapped in highlight marks (for highlight-style QG)."""
    i = context.find(answer)
    if i < 0:
        return context
    return f"{context[:i]}{mark} {answer} {mark}{context[i + len(answer):]}"


# A forward pass costs about as much as this many more input tokens would: small matrix products run far below the
# machine's speed, and every pass has fixed work. Batching trades this against padding (see _length_batches).
BATCH_OVERHEAD_TOKENS = 64


def _length_batches(lengths: Sequence[int], batch_size: int, sort: bool, max_tokens: Optional[int] = None,
                    overhead: int = BATCH_OVERHEAD_TOKENS) -> list[list[int]]:
    """Index batches of at most ``batch_size`` inputs and, with ``max_tokens``, at most that many padded tokens
    (inputs x longest input; an input longer than the cap goes alone).

    The inputs, sorted by length (or in input order with ``sort`` off, as the per-item reference mode runs them), are
    cut into the consecutive batches that minimise the padded tokens computed plus ``overhead`` per batch: a few very
    long inputs no longer pad a batch of short ones, and similar lengths still fill whole batches.
    """
    n = len(lengths)
    order = sorted(range(n), key=lambda i: lengths[i]) if sort else list(range(n))
    best = [0] * (n + 1)  # best[j]: least cost of batching the first j inputs of ``order``
    start = [0] * (n + 1)  # where the last batch of that best split starts
    for j in range(1, n + 1):
        longest = 0
        best[j] = -1
        for size in range(1, min(batch_size, j) + 1):
            longest = max(longest, lengths[order[j - size]])
            if size > 1 and max_tokens is not None and size * longest > max_tokens:
                break  # size x longest only grows with size
            cost = best[j - size] + size * longest + overhead
            if best[j] < 0 or cost <= best[j]:  # ties: the larger batch
                best[j], start[j] = cost, j - size
    batches: list[list[int]] = []
    j = n
    while j > 0:
        batches.append(order[start[j] : j])
        j = start[j]
    return batches[::-1]


# Real tokens per pass when windows are packed (no padding): enough rows for the matrix products to run near the
# machine's speed, few enough that a layer's activations stay in cache (measured: docs/performance.md).
PACKED_BATCH_TOKENS = 512


def _packed_batches(lengths: Sequence[int], batch_size: int, sort: bool, max_tokens: int) -> list[list[int]]:
    """Consecutive runs of the inputs (sorted by length, or in input order without ``sort``) of at most
    ``batch_size`` inputs and ``max_tokens`` real tokens (an input longer than that goes alone)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i]) if sort else list(range(len(lengths)))
    batches: list[list[int]] = []
    total = 0
    for i in order:
        if batches and len(batches[-1]) < batch_size and total + lengths[i] <= max_tokens:
            batches[-1].append(i)
            total += lengths[i]
        else:
            batches.append([i])
            total = lengths[i]
    return batches


class _ForwardClock:
    """Wall time inside a model's own ``forward`` calls (and its encoder's, which ``generate`` calls directly).

    Hooks count only the outermost call, so nested modules are not counted twice. What ``generate`` does between
    decoder steps (beam bookkeeping, logits processors, cache reordering) is outside the clock.
    """

    def __init__(self, model: Any) -> None:
        self.seconds = 0.0
        self._depth = 0
        self._t0 = 0.0
        modules = [model]
        encoder = getattr(model, "get_encoder", None)
        if callable(encoder) and getattr(model.config, "is_encoder_decoder", False):
            modules.append(encoder())
        for module in modules:
            module.register_forward_pre_hook(self._enter)
            module.register_forward_hook(self._exit)

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Count the time inside this block as forward time (for model computations made outside ``forward``)."""
        self._enter()
        try:
            yield
        finally:
            self._exit()

    def _enter(self, *_: Any) -> None:
        if self._depth == 0:
            self._t0 = time.perf_counter()
        self._depth += 1

    def _exit(self, *_: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._t0


class _HFComponent:
    def __init__(self, tokenizer: Any, model: Any, batch_size: int, sort_by_length: bool = True,
                 batch_tokens: Optional[int] = None) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.sort_by_length = sort_by_length
        self.device = next(model.parameters()).device
        self._clock = _ForwardClock(model)
        self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters benchmarks read: time in calls and in forwards, real and padded input tokens, batches."""
        self.call_seconds = 0.0  # inside model(...) / model.generate(...)
        self._clock.seconds = 0.0
        self.tokens = 0  # input tokens fed to the model
        self.padded_tokens = 0  # input positions computed, padding included
        self.batches = 0  # forward passes / generate calls

    @property
    def forward_seconds(self) -> float:
        """Wall time inside the model's forward passes since the last :meth:`reset_stats`."""
        return self._clock.seconds

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        return _length_batches(lengths, self.batch_size, self.sort_by_length, self.batch_tokens)

    def _pad(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        batch = self.tokenizer.pad(features, padding=True, return_tensors="pt")
        self.tokens += sum(len(f["input_ids"]) for f in features)
        self.padded_tokens += int(batch["input_ids"].numel())
        self.batches += 1
        return {k: v.to(self.device) for k, v in batch.items()}

    def _clocked(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` with its time counted as forward time (model computations made outside ``model.forward``)."""

        def run(**kwargs: Any) -> T:
            with self._clock.timing():
                return fn(**kwargs)

        return run

    def _timed(self, fn: Callable[..., T], **kwargs: Any) -> T:
        t0 = time.perf_counter()
        try:
            return fn(**kwargs)
        finally:
            self.call_seconds += time.perf_counter() - t0


class _WindowComponent(_HFComponent):
    """A component that reads (question or premise, context) windows with an encoder: QA and NLI."""

    def __init__(self, tokenizer: Any, model: Any, batch_size: int, sort_by_length: bool = True,
                 batch_tokens: Optional[int] = None) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        # run windows packed end to end instead of padded (same outputs, less work); off: padded batches
        self.pack_windows = True
        self._packed: Any = None
        self._pack_check = FastPathCheck("packed windows of q2_plugins.packed")

    def _packer(self, kind: str) -> Optional[PackedEncoder]:
        """The packed-window runner for this model, or None (padded batches): see :mod:`q2_plugins.packed`."""
        if not self.pack_windows or self._pack_check.agreed is False:
            return None
        if self._packed is None:
            self._packed = PackedEncoder.for_model(self.model, kind) or False
        return self._packed or None

    def _window_batches(self, kind: str, lengths: Sequence[int],
                        features: Callable[[list[int]], list[dict[str, Any]]]) -> tuple[Optional[PackedEncoder],
                                                                                       list[list[int]]]:
        """The packer (or None) and the window batches of one call. On the first call on a device / dtype the tests
        do not cover, the first packed batch also runs padded: any other argmax (span ends, labels) turns packing
        off for the rest of the run."""
        packer = self._packer(kind)
        if packer is None:
            return None, self._batches(lengths)
        batches = self._packed_batch_list(lengths)
        dtype = next(self.model.parameters()).dtype
        if batches and self._pack_check.needed(self.device, dtype):
            first = features(batches[0])
            stripped = [{k: v for k, v in f.items() if k != "attention_mask"} for f in first]
            padded = {k: v.to(self.device) for k, v in
                      self.tokenizer.pad(first, padding=True, return_tensors="pt").items()}
            with _torch().inference_mode():
                if kind == "qa":
                    starts, ends = packer.qa_logits(stripped)
                    ref = self.model(**padded)
                    same = all(int(starts[j].argmax()) == int(ref.start_logits[j][: len(starts[j])].argmax())
                               and int(ends[j].argmax()) == int(ref.end_logits[j][: len(ends[j])].argmax())
                               for j in range(len(first)))
                else:
                    logits = packer.class_logits(stripped)
                    same = bool((logits.float().argmax(-1) == self.model(**padded).logits.float().argmax(-1)).all())
            if not self._pack_check.record(same, self.device, dtype, "argmax of the window logits"):
                return None, self._batches(lengths)
        return packer, batches

    def _packed_features(self, features: list[dict[str, list[int]]]) -> list[dict[str, list[int]]]:
        n = sum(len(f["input_ids"]) for f in features)
        self.tokens += n
        self.padded_tokens += n  # no padding in the token-wise layers (attention pads per window)
        self.batches += 1
        return [{k: v for k, v in f.items() if k != "attention_mask"} for f in features]

    def _packed_batch_list(self, lengths: Sequence[int]) -> list[list[int]]:
        cap = min(self.batch_tokens or PACKED_BATCH_TOKENS, PACKED_BATCH_TOKENS)
        return _packed_batches(lengths, self.batch_size, self.sort_by_length, cap)

    # which side of a pair is windowed: QA reads (question, context) and windows the context; NLI reads
    # (premise, hypothesis) and windows the premise
    _windowed_side = 1
    _fixed_name = "text"
    _setting = "max_length"

    def _rooms(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, int]]:
        """``(tokens of the fixed side, tokens left for the windowed side)`` of each pair."""
        fixed = [p[1 - self._windowed_side] for p in pairs]
        added = self.tokenizer.num_special_tokens_to_add(pair=True)
        lengths = [len(ids) for ids in self.tokenizer(fixed, add_special_tokens=False, verbose=False)["input_ids"]]
        return [(n, self.max_length - n - added) for n in lengths]

    def unfit(self, pairs: Sequence[tuple[str, str]]) -> list[Optional[str]]:
        """Why each pair cannot be read (its fixed side leaves no room in the window), or None. Measured once,
        without tokenizing the windowed side."""
        return [None if room > 0 else
                f"the {self._fixed_name} is {n} tokens: no room left in the {self._setting}={self.max_length} window"
                for n, room in self._rooms(pairs)]

    def _windows(self, pairs: Sequence[tuple[str, str]], offsets: bool = False) -> "_Windows":
        """Tokenize pairs into overlapping windows of the windowed side.

        The stride is ``self.stride`` unless the other side leaves less room than that; then it is half the room
        (the tokenizer needs a stride below the room). A pair whose other side fills the window raises ValueError.
        """
        rooms = [room for _, room in self._rooms(pairs)]
        if min(rooms, default=1) <= 0:
            raise ValueError(next(r for r in self.unfit(pairs) if r))
        strides = [self.stride if self.stride < room else room // 2 for room in rooms]
        windows = _Windows(len(pairs))
        for stride in sorted(set(strides)):
            idx = [i for i, s in enumerate(strides) if s == stride]
            part = [pairs[i] for i in idx]
            enc = self.tokenizer(
                [p[0] for p in part], [p[1] for p in part],
                truncation="only_second" if self._windowed_side == 1 else "only_first",
                max_length=self.max_length, stride=stride, return_overflowing_tokens=True,
                return_offsets_mapping=offsets,
            )
            windows.add(enc, idx)
        return windows


class _Windows:
    """Windows of several tokenizer calls, numbered in one sequence: ``features[w]``, the pair ``sample_of[w]``."""

    def __init__(self, n_pairs: int) -> None:
        self.n_pairs = n_pairs
        self.features: list[dict[str, list[int]]] = []
        self.sample_of: list[int] = []
        self._source: list[tuple[Any, int]] = []

    def add(self, enc: Any, pair_index: Sequence[int]) -> None:
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
        for w, i in enumerate(enc["overflow_to_sample_mapping"]):
            self.features.append({k: enc[k][w] for k in keys})
            self.sample_of.append(pair_index[i])
            self._source.append((enc, w))

    def input_ids(self, w: int) -> list[int]:
        return self.features[w]["input_ids"]

    def sequence_ids(self, w: int) -> list[Optional[int]]:
        enc, local = self._source[w]
        return enc.sequence_ids(local)

    def offsets(self, w: int) -> list[tuple[int, int]]:
        enc, local = self._source[w]
        return enc["offset_mapping"][local]

    def of_pairs(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.n_pairs)]
        for w, i in enumerate(self.sample_of):
            out[i].append(w)
        return out


_BEAM_CACHE_CLASS: Any = None


def _beam_search_cache(model: Any) -> Optional[Any]:
    """An encoder-decoder cache for beam search that never reorders its cross-attention part, or None.

    Every beam of an input attends to the same encoder output, so its cross-attention keys and values are the same
    for all beams of that input, and beam search only ever picks beams within an input: reordering them (what the
    default cache does after every decoder step, a copy of every layer's keys and values) moves nothing. The
    self-attention cache is reordered as usual. None (the library's default cache is used) when this transformers
    version has no such cache classes.
    """
    global _BEAM_CACHE_CLASS
    if not getattr(model.config, "is_encoder_decoder", False):
        return None
    try:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    except ImportError:  # pragma: no cover - transformers without Cache classes
        return None
    if _BEAM_CACHE_CLASS is None:

        class BeamSharedCrossAttentionCache(EncoderDecoderCache):
            def reorder_cache(self, beam_idx: Any) -> None:
                self.self_attention_cache.reorder_cache(beam_idx)

        _BEAM_CACHE_CLASS = BeamSharedCrossAttentionCache
    try:
        config = model.config.get_text_config(decoder=True)
        return _BEAM_CACHE_CLASS(DynamicCache(config=config), DynamicCache(config=config))
    except TypeError:  # pragma: no cover - older DynamicCache without config
        return _BEAM_CACHE_CLASS(DynamicCache(), DynamicCache())


class HFQuestionGenerator(_HFComponent):
    """Answer-aware T5 question generation (beam or greedy), batched across all candidates."""

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, decoding: str = "beam", num_beams: int = 5,
                 num_return: int = 5, no_repeat_ngram: int = 3, max_length: int = 128, max_input_tokens: int = 512,
                 input_template: str = "answer: {answer}  context: {context} </s>",
                 sort_by_length: bool = True, batch_tokens: Optional[int] = None) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        self.decoding = decoding
        self.num_beams = num_beams if decoding == "beam" else 1
        self.num_return = num_return if decoding == "beam" else 1
        self.no_repeat_ngram = no_repeat_ngram
        self.max_length = max_length
        self.max_input_tokens = max_input_tokens
        self.input_template = input_template
        # extra model.generate arguments (benchmarks fix the question length with min/max_new_tokens)
        self.generate_overrides: dict[str, Any] = {}
        # beam search by q2_plugins.beam for T5-style models (same beams, less work per step); off: the library's
        # generate, with a cache that never reorders cross-attention
        self.own_beam_search = True
        self._beam: Optional[T5BeamSearch] = None
        self._beam_check = FastPathCheck("the beam search of q2_plugins.beam")

    def _texts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        return [self.input_template.format(answer=a, context=c, highlighted=highlight(a, c)) for a, c in pairs]

    def _too_long(self, n: int) -> str:
        return (f"QG input is {n} tokens, over qg_max_input_tokens={self.max_input_tokens}: "
                f"the response is too long to generate questions from")

    def unfit(self, pairs: Sequence[tuple[str, str]]) -> list[Optional[str]]:
        """Why each (answer, context) cannot be asked about (its input is over ``max_input_tokens``), or None.

        Each distinct context is measured once; a context over the limit on its own rejects all its answers
        without building their inputs."""
        out: list[Optional[str]] = [None] * len(pairs)
        rest = list(range(len(pairs)))
        if "{context}" in self.input_template or "{highlighted}" in self.input_template:
            contexts = list(dict.fromkeys(c for _, c in pairs))
            context_len = dict(zip(contexts, (len(ids) for ids in
                                              self.tokenizer(contexts, add_special_tokens=False,
                                                             verbose=False)["input_ids"])))
            # (a margin: a context's tokens inside the template may differ by one at its edges)
            rest = [i for i in rest if context_len[pairs[i][1]] <= self.max_input_tokens + 4]
            for i in set(range(len(pairs))) - set(rest):
                out[i] = (f"the response is {context_len[pairs[i][1]]} tokens, over qg_max_input_tokens="
                          f"{self.max_input_tokens}: too long to generate questions from")
        lengths = [len(ids) for ids in self.tokenizer(self._texts([pairs[i] for i in rest]), add_special_tokens=True,
                                                      verbose=False)["input_ids"]] if rest else []
        for i, n in zip(rest, lengths):
            if n > self.max_input_tokens:
                out[i] = self._too_long(n)
        return out

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        torch = _torch()
        texts = self._texts(pairs)
        encoded = self.tokenizer(texts, add_special_tokens=True)["input_ids"]
        for ids in encoded:
            if len(ids) > self.max_input_tokens:
                raise ValueError(self._too_long(len(ids)))
        out: list[list[str]] = [[] for _ in texts]
        gen_kwargs: dict[str, Any] = {"max_length": self.max_length, "num_beams": self.num_beams,
                                      "num_return_sequences": self.num_return, "do_sample": False}
        if self.decoding == "beam":
            gen_kwargs.update(no_repeat_ngram_size=self.no_repeat_ngram, early_stopping=True)
        gen_kwargs.update(self.generate_overrides)
        own_beam = self.own_beam_search and self._beam_check.agreed is not False
        settings = beam_settings(self.model, gen_kwargs) if self.num_beams > 1 and own_beam else None
        if settings is not None and self._beam is None:
            self._beam = T5BeamSearch.for_model(self.model)
        own = settings is not None and self._beam is not None
        groups = self._batches([len(x) for x in encoded])  # encoder batches: similar lengths, little padding
        # the decoder's cost per input does not depend on its length: our beam search decodes consecutive encoder
        # batches together, up to batch_size inputs; generate takes one encoder batch at a time
        calls = _merge_consecutive(groups, self.batch_size) if own else [[g] for g in groups]
        for call in calls:
            padded = [self._pad([{"input_ids": encoded[i]} for i in g]) for g in call]
            with torch.inference_mode():
                if own and self._beam_check.agreed is not False:  # (a failed check hands the rest to generate)
                    pairs_in = [(p["input_ids"], p["attention_mask"]) for p in padded]
                    generated = self._timed(self._beam.generate, encoder_batches=pairs_in, settings=settings,
                                            timer=self._clock.timing)
                    reference = self._check_beam(generated, padded, gen_kwargs, settings)
                    if reference is not None:  # the check found a difference: the library's sequences
                        generated = reference
                else:
                    generated = [self._timed(self._library_generate, inputs=p, gen_kwargs=gen_kwargs) for p in padded]
            if not isinstance(generated, list):
                generated = [generated]
            decoded = [text for g in generated for text in self.tokenizer.batch_decode(g, skip_special_tokens=True)]
            for j, i in enumerate(i for g in call for i in g):
                group = decoded[j * self.num_return : (j + 1) * self.num_return]
                out[i] = [q.replace("question: ", "", 1) for q in group]
        return out

    def _check_beam(self, generated: Any, padded: list[dict[str, Any]], gen_kwargs: dict[str, Any],
                    settings: Any) -> Optional[list[Any]]:
        """On the first call on a device / dtype the tests do not cover, the library's ``generate`` on the same
        inputs: None when the token ids agree (or no check is due), else the library's outputs, one per group."""
        dtype = next(self.model.parameters()).dtype
        if not self._beam_check.needed(self.device, dtype):
            return None
        reference = [self._library_generate(inputs=p, gen_kwargs=gen_kwargs) for p in padded]
        fill = settings.pad if settings.pad is not None else settings.eos[0]

        def rows(t: Any) -> list[list[int]]:
            out = []
            for row in t.tolist():
                while row and row[-1] == fill:
                    row.pop()
                out.append(row)
            return out

        same = rows(generated) == [r for t in reference for r in rows(t)]
        return None if self._beam_check.record(same, self.device, dtype, "token ids") else reference

    def _library_generate(self, inputs: dict[str, Any], gen_kwargs: dict[str, Any]) -> Any:
        cache = _beam_search_cache(self.model) if self.num_beams > 1 else None
        if cache is not None:
            inputs = dict(inputs, past_key_values=cache)
        return self.model.generate(**inputs, **gen_kwargs)


def _merge_consecutive(groups: list[list[int]], most: int) -> list[list[list[int]]]:
    """Consecutive groups joined while their total size stays within ``most``."""
    runs = _packed_batches([len(g) for g in groups], len(groups), False, most)
    return [[groups[j] for j in run] for run in runs]


class HFQuestionAnswerer(_WindowComponent):
    """Extractive QA that can say "no answer"; contexts longer than the window are read in overlapping windows.

    ``decoding="original"`` reproduces the original Q² code: independent argmax of start and end logits over the
    whole window, answer text rebuilt from the tokens. The best window is the one with the highest start+end logit
    among windows that found an answer. ``decoding="squad2"``: best span inside the context (end >= start, at most
    ``max_answer_tokens``) against the smallest null score over windows; text cut from the context by offsets.
    """

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, decoding: str = "original",
                 max_length: int = 512, stride: int = 128, max_answer_tokens: int = 30,
                 sort_by_length: bool = True, batch_tokens: Optional[int] = None) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        self.decoding = decoding
        self.max_length = max_length
        self.stride = stride
        self.max_answer_tokens = max_answer_tokens

    _windowed_side = 1
    _fixed_name = "question"
    _setting = "qa_max_length"

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]:
        torch = _torch()
        contexts = [c for _, c in pairs]
        win = self._windows(pairs, offsets=self.decoding == "squad2")
        n_windows = len(win.features)
        start_logits: list[Any] = [None] * n_windows
        end_logits: list[Any] = [None] * n_windows
        lengths = [len(f["input_ids"]) for f in win.features]
        packer, batches = self._window_batches("qa", lengths, lambda b: [win.features[w] for w in b])
        for batch in batches:
            features = [win.features[w] for w in batch]
            with torch.inference_mode():
                if packer:
                    starts, ends = self._timed(self._clocked(packer.qa_logits),
                                               features=self._packed_features(features))
                else:
                    outputs = self._timed(self.model, **self._pad(features))
                    starts, ends = outputs.start_logits, outputs.end_logits
            for j, w in enumerate(batch):
                start_logits[w] = starts[j][: lengths[w]].float().cpu()  # padding positions are never candidates
                end_logits[w] = ends[j][: lengths[w]].float().cpu()
        decode = self._decode_original if self.decoding == "original" else self._decode_squad2
        return [decode(ws, win, start_logits, end_logits, contexts[i]) for i, ws in enumerate(win.of_pairs())]

    def _tokens_text(self, ids: Sequence[int]) -> str:
        return self.tokenizer.convert_tokens_to_string(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def _decode_original(self, windows: list[int], win: _Windows, starts: list, ends: list, context: str) -> Answer:
        best: Optional[tuple[float, Answer]] = None
        for w in windows:
            s = int(starts[w].argmax())
            e = int(ends[w].argmax())
            if s == 0 and e == 0:
                continue  # the null answer in this window
            if e < s:
                answer = Answer(AnswerKind.EMPTY, "")
            else:
                kind = AnswerKind.SPAN_FROM_NULL if s == 0 else AnswerKind.SPAN
                answer = Answer(kind, self._tokens_text(win.input_ids(w)[s : e + 1]))
            value = float(starts[w][s] + ends[w][e])
            if best is None or value > best[0]:
                best = (value, answer)
        return best[1] if best is not None else Answer.none()

    def _decode_squad2(self, windows: list[int], win: _Windows, starts: list, ends: list, context: str) -> Answer:
        torch = _torch()
        min_null = None
        best: Optional[tuple[float, int, int]] = None
        for w in windows:
            s_log, e_log = starts[w], ends[w]
            null = float(s_log[0] + e_log[0])
            min_null = null if min_null is None else min(min_null, null)
            seq_ids = win.sequence_ids(w)
            in_ctx = torch.tensor([sid == 1 for sid in seq_ids])
            scores = s_log[:, None] + e_log[None, :]
            n = len(seq_ids)
            idx = torch.arange(n)
            valid = (idx[None, :] >= idx[:, None]) & (idx[None, :] - idx[:, None] < self.max_answer_tokens)
            valid &= in_ctx[:, None] & in_ctx[None, :]
            if not bool(valid.any()):
                continue
            scores = scores.masked_fill(~valid, float("-inf"))
            flat = int(scores.argmax())
            s, e = divmod(flat, n)
            value = float(scores[s, e])
            if best is None or value > best[0]:
                offsets = win.offsets(w)
                best = (value, offsets[s][0], offsets[e][1])
        if best is None or min_null is None or best[0] <= min_null:
            return Answer.none()
        return Answer.span(context[best[1] : best[2]])


def nli_label_map(id2label: dict[int, str], model_name: str) -> dict[int, NLILabel]:
    """Map a model's label ids to NLI labels by their names in the model config; never by position."""
    mapping: dict[int, NLILabel] = {}
    for idx, name in id2label.items():
        low = str(name).lower()
        for label in NLILabel:
            if low.startswith(label.value[:6]):
                mapping[int(idx)] = label
    if sorted(mapping.values(), key=lambda x: x.value) != sorted(NLILabel, key=lambda x: x.value):
        raise ModelLoadError(
            f"The NLI model {model_name!r} (setting: nli_model) names its labels {dict(id2label)}; Q2 needs "
            f"exactly entailment / neutral / contradiction in config.id2label. Fix the model's config.json."
        )
    return mapping


class HFNLI(_WindowComponent):
    """Three-way NLI; a premise longer than the window is read in overlapping windows.

    Across windows: entailment if any window entails, else contradiction if any contradicts, else neutral.
    """

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, max_length: int = 512, stride: int = 128,
                 model_name: str = "", sort_by_length: bool = True, batch_tokens: Optional[int] = None) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        self.max_length = max_length
        self.stride = stride
        self.labels = nli_label_map(model.config.id2label, model_name)

    _windowed_side = 0
    _fixed_name = "hypothesis (the response, for the fallback)"
    _setting = "nli_max_length"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]:
        torch = _torch()
        win = self._windows(pairs)
        lengths = [len(f["input_ids"]) for f in win.features]
        window_labels: list[NLILabel] = [NLILabel.NEUTRAL] * len(lengths)
        packer, batches = self._window_batches("classification", lengths, lambda b: [win.features[w] for w in b])
        for batch in batches:
            features = [win.features[w] for w in batch]
            with torch.inference_mode():
                if packer:
                    logits = self._timed(self._clocked(packer.class_logits), features=self._packed_features(features))
                else:
                    logits = self._timed(self.model, **self._pad(features)).logits
            for j, w in enumerate(batch):
                window_labels[w] = self.labels[int(logits[j].float().argmax())]
        out = []
        for labels in ([window_labels[w] for w in ws] for ws in win.of_pairs()):
            if NLILabel.ENTAILMENT in labels:
                out.append(NLILabel.ENTAILMENT)
            elif NLILabel.CONTRADICTION in labels:
                out.append(NLILabel.CONTRADICTION)
            else:
                out.append(NLILabel.NEUTRAL)
        return out
