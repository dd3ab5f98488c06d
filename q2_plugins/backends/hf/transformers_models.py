"""Transformers-backed components: T5 question generation, extractive QA with windows, NLI.

Each component takes a whole list of inputs, turns it into model inputs (QG prompts; QA and NLI windows), has
:mod:`q2_plugins.backends.accel` run them in batches and decodes the outputs (questions, answer spans, labels) in input
order; how the models run never changes a result. Models are loaded by :func:`load_model`; the default backend
(:mod:`q2_plugins.backends.hf`) builds these components from the settings.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from q2_plugins.backends import accel
from q2_plugins.backends.loading import fetch, hub_unreachable, quiet_loading
from q2_plugins.metric.components import Answer, AnswerKind, NLILabel
from q2_plugins.metric.errors import SETTING, ModelLoadError

__all__ = ["load_model", "hub_unreachable", "quiet_loading", "HFQuestionGenerator", "HFQuestionAnswerer", "HFNLI",
           "nli_label_map"]


_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16", "tf32": "float32"}


def _torch() -> Any:
    import torch

    return torch


def load_model(role: str, name: str, revision: Optional[str], device: str, dtype: str, kind: str,
               cpu_kernels: str = "onednn") -> tuple[Any, Any]:
    """Load tokenizer + model for a role through the Auto classes, under the one load policy
    (:func:`q2_plugins.backends.loading.fetch`); errors say what to change. ``cpu_kernels``: see
    :func:`q2_plugins.backends.accel.prepare_model`."""
    if cpu_kernels not in accel.CPU_KERNELS:
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
    torch = _torch()

    def from_files(path: str, local: dict[str, Any]) -> tuple[Any, Any]:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, revision=revision, **local)
        # model.safetensors when the repository has it; a pickle checkpoint (pytorch_model.bin) only as tensors
        model = auto.from_pretrained(path, revision=revision, dtype=getattr(torch, _DTYPES[dtype]),
                                     weights_only=True, **local)
        return tokenizer, model

    tokenizer, model = fetch(role, name, from_files)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"The {role.upper()} model {name!r} has no fast tokenizer (setting {SETTING}); Q2 needs one for "
            f"windowing. Install 'tokenizers' and 'sentencepiece' so it can be converted.", setting=f"{role}_model"
        )
    model.to(device)
    model.eval()
    accel.prepare_model(model, cpu_kernels, tf32=dtype == "tf32")
    return tokenizer, model


def highlight(answer: str, context: str, mark: str = "<hl>") -> str:
    """The context with the first occurrence of the answer wrapped in highlight marks (for highlight-style QG)."""
    i = context.find(answer)
    if i < 0:
        return context
    return f"{context[:i]}{mark} {answer} {mark}{context[i + len(answer):]}"


class _HFComponent:
    """A tokenizer and a model, the batching settings of its calls, and the :mod:`q2_plugins.backends.accel` runner that
    runs them (``runner``)."""

    runner: Any

    def __init__(self, tokenizer: Any, model: Any, batch_size: int, sort_by_length: bool = True,
                 batch_tokens: Optional[int] = None) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.sort_by_length = sort_by_length

    def _batching(self) -> accel.Batching:
        return accel.Batching(self.batch_size, self.sort_by_length, self.batch_tokens)


class _WindowComponent(_HFComponent):
    """A component that reads (question or premise, context) windows with an encoder: QA and NLI."""

    _kind = ""  # the accel runner's kind: "qa" or "classification"

    def __init__(self, tokenizer: Any, model: Any, batch_size: int, sort_by_length: bool = True,
                 batch_tokens: Optional[int] = None, pack_windows: bool = True) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        self.runner = accel.window_runner(tokenizer, model, self._kind, pack_windows=pack_windows)

    def _logits(self, win: "_Windows") -> list[Any]:
        """Each window's logits (see :meth:`q2_plugins.backends.accel.windows.WindowRunner.logits`)."""
        return self.runner.logits(win.features, self._batching())

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


class HFQuestionGenerator(_HFComponent):
    """Answer-aware T5 question generation (beam or greedy), batched across all candidates.

    ``search``: ``"own"`` or ``"library"``, how beam search runs (same questions; see
    :func:`q2_plugins.backends.accel.question_decoder`). ``generate_overrides``: extra ``generate`` arguments on every
    call, for benchmarks (which fix the question length with ``min/max_new_tokens``); they can change the questions.
    """

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, decoding: str = "beam", num_beams: int = 5,
                 num_return: int = 5, no_repeat_ngram: int = 3, max_length: int = 128, max_input_tokens: int = 512,
                 input_template: str = "answer: {answer}  context: {context} </s>",
                 sort_by_length: bool = True, batch_tokens: Optional[int] = None, search: str = "own",
                 generate_overrides: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens)
        self.runner = accel.question_decoder(tokenizer, model, search=search, generate_overrides=generate_overrides)
        self.decoding = decoding
        self.num_beams = num_beams if decoding == "beam" else 1
        self.num_return = num_return if decoding == "beam" else 1
        self.no_repeat_ngram = no_repeat_ngram
        self.max_length = max_length
        self.max_input_tokens = max_input_tokens
        self.input_template = input_template

    def _texts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        return [self.input_template.format(answer=a, context=c, highlighted=highlight(a, c)) for a, c in pairs]

    def _too_long(self, n: int) -> str:
        return (f"QG input is {n} tokens, over qg_max_input_tokens={self.max_input_tokens}: "
                f"the response is too long to generate questions from (raise qg_max_input_tokens)")

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
                          f"{self.max_input_tokens}: too long to generate questions from (raise "
                          f"qg_max_input_tokens)")
        lengths = [len(ids) for ids in self.tokenizer(self._texts([pairs[i] for i in rest]), add_special_tokens=True,
                                                      verbose=False)["input_ids"]] if rest else []
        for i, n in zip(rest, lengths):
            if n > self.max_input_tokens:
                out[i] = self._too_long(n)
        return out

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        encoded = self.tokenizer(self._texts(pairs), add_special_tokens=True)["input_ids"]
        for ids in encoded:
            if len(ids) > self.max_input_tokens:
                raise ValueError(self._too_long(len(ids)))
        gen_kwargs: dict[str, Any] = {"max_length": self.max_length, "num_beams": self.num_beams,
                                      "num_return_sequences": self.num_return, "do_sample": False}
        if self.decoding == "beam":
            gen_kwargs.update(no_repeat_ngram_size=self.no_repeat_ngram, early_stopping=True)
        generated = self.runner.generate(encoded, gen_kwargs, self._batching())
        return [[q.replace("question: ", "", 1) for q in self.tokenizer.batch_decode(rows, skip_special_tokens=True)]
                for rows in generated]


class HFQuestionAnswerer(_WindowComponent):
    """Extractive QA that can say "no answer"; contexts longer than the window are read in overlapping windows.

    ``decoding="original"`` reproduces the original Q² code: independent argmax of start and end logits over the
    whole window, answer text rebuilt from the tokens. The best window is the one with the highest start+end logit
    among windows that found an answer. ``decoding="squad2"``: best span inside the context (end >= start, at most
    ``max_answer_tokens``) against the smallest null score over windows; text cut from the context by offsets.
    """

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, decoding: str = "original",
                 max_length: int = 512, stride: int = 128, max_answer_tokens: int = 30,
                 sort_by_length: bool = True, batch_tokens: Optional[int] = None, pack_windows: bool = True) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens, pack_windows)
        self.decoding = decoding
        self.max_length = max_length
        self.stride = stride
        self.max_answer_tokens = max_answer_tokens

    _kind = "qa"
    _windowed_side = 1
    _fixed_name = "question"
    _setting = "qa_max_length"

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]:
        contexts = [c for _, c in pairs]
        win = self._windows(pairs, offsets=self.decoding == "squad2")
        logits = self._logits(win)
        start_logits, end_logits = [s for s, _ in logits], [e for _, e in logits]
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
            f"The NLI model {model_name!r} (setting {SETTING}) names its labels {dict(id2label)}; Q2 needs "
            f"exactly entailment / neutral / contradiction in config.id2label. Fix the model's config.json.",
            setting="nli_model"
        )
    return mapping


class HFNLI(_WindowComponent):
    """Three-way NLI; a premise longer than the window is read in overlapping windows.

    Across windows: entailment if any window entails, else contradiction if any contradicts, else neutral.
    """

    def __init__(self, tokenizer: Any, model: Any, *, batch_size: int, max_length: int = 512, stride: int = 128,
                 model_name: str = "", sort_by_length: bool = True, batch_tokens: Optional[int] = None,
                 pack_windows: bool = True) -> None:
        super().__init__(tokenizer, model, batch_size, sort_by_length, batch_tokens, pack_windows)
        self.max_length = max_length
        self.stride = stride
        self.labels = nli_label_map(model.config.id2label, model_name)

    _kind = "classification"
    _windowed_side = 0
    _fixed_name = "hypothesis (the response, for the fallback)"
    _setting = "nli_max_length"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]:
        win = self._windows(pairs)
        window_labels = [self.labels[int(logits.argmax())] for logits in self._logits(win)]
        out = []
        for labels in ([window_labels[w] for w in ws] for ws in win.of_pairs()):
            if NLILabel.ENTAILMENT in labels:
                out.append(NLILabel.ENTAILMENT)
            elif NLILabel.CONTRADICTION in labels:
                out.append(NLILabel.CONTRADICTION)
            else:
                out.append(NLILabel.NEUTRAL)
        return out
