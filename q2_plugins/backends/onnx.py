"""The ``onnx`` backend: the QA model exported to ONNX once and run by ONNX Runtime, in int8 on the CPU.

``onnx:NAME`` (``qa_model="onnx:albert-xlarge-squad2"``, ``--qa-model onnx:DIR``) loads the transformers model NAME
under the one load policy, exports it with ``torch.onnx.export`` and quantises its weights to int8 with ONNX
Runtime's dynamic quantisation (``pip install 'q2-plugins[onnx]'``); ``onnx:NAME#fp32`` keeps the exported graph in
float32 (a reference for the export alone). The result is kept under ``$Q2_ONNX_CACHE`` (default
``~/.cache/q2_plugins/onnx``) keyed by the model's identity (its content or hub commit), the compute type and the
ONNX Runtime version, so a model is exported once per machine.

Role: ``qa`` (ALBERT, BERT, RoBERTa extractive QA: anything ``AutoModelForQuestionAnswering`` loads). QG and NLI stay
on ``ct2:`` (faster there). Each window runs alone, unpadded: dynamic quantisation scales a batch's activations
together, so batching windows would make a window's answer depend on the others of its batch; alone, the answers do
not depend on how a call is batched. The identity says ``onnx-<version>:<model>[<compute type>]``: results of this
backend never share a signature or a cache entry with the transformers model's. How far its decisions are from
float32: ``q2 check-precision --qa-model onnx:...``; a run checks its first rows itself
(:mod:`q2_plugins.metric.precision`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from q2_plugins.backends.accel.counters import RunStats
from q2_plugins.backends.hf import transformers_models
from q2_plugins.backends.loading import cpu_only, made_once, model_files, quiet_loading
from q2_plugins.metric.errors import ModelLoadError, SettingError
from q2_plugins.metric.signature import model_id

if TYPE_CHECKING:
    from q2_plugins.metric.config import Q2Config

__all__ = ["OnnxBackend", "BACKEND", "ROLES", "COMPUTE_TYPES", "DEFAULT_COMPUTE_TYPE", "CACHE_ENV", "source_model",
           "converted", "OnnxQuestionAnswerer"]

ROLES = ("qa",)
COMPUTE_TYPES = ("int8", "fp32")
DEFAULT_COMPUTE_TYPE = "int8"
CACHE_ENV = "Q2_ONNX_CACHE"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_FILE = "model.onnx"


def _split(name: str) -> tuple[str, str]:
    """``(model, compute type)`` of the part after ``onnx:``."""
    model, _, compute = name.partition("#")
    compute = compute or DEFAULT_COMPUTE_TYPE
    if compute not in COMPUTE_TYPES:
        raise SettingError("qa_model", f"onnx:{name}: the onnx backend's compute types are "
                                       f"{', '.join(COMPUTE_TYPES)} (after '#'), got {compute!r}")
    return model, compute


def source_model(name: str) -> str:
    """The transformers model an ``onnx:`` name exports (its float32 reference)."""
    return name.partition("#")[0]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnxruntime")
    except PackageNotFoundError:
        raise ModuleNotFoundError("the onnx backend needs ONNX Runtime: pip install 'q2-plugins[onnx]'") from None


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise SettingError(f"{role}_model", f"the onnx backend runs QA models, not {role}; keep the {role.upper()} "
                                            f"model on transformers (no prefix) or ct2:")


def _cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "q2_plugins" / "onnx").expanduser()


def converted(role: str, name: str, revision: Optional[str]) -> Path:
    """The ONNX file of the model, exported (and quantised) now if this machine has not yet done it."""
    _check_role(role)
    model, compute = _split(name)
    key = hashlib.sha256(f"{model_id(model, revision)}|{compute}|{_version()}".encode()).hexdigest()[:24]
    target = made_once(_cache_root() / f"{role}-{key}", _FILE,
                       lambda tmp: _export(role, model_files(role, model, revision), tmp, compute))
    return target / _FILE


class _QALogits:
    """The QA model's start and end logits as a module of tensors only (what the exporter traces)."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class QALogits(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> tuple[Any, Any]:
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
                return out.start_logits, out.end_logits

        return QALogits()


def _export(role: str, source: str, out: Path, compute: str) -> None:
    """Export ``source`` to ``out / model.onnx`` (int8: its weights quantised after the export)."""
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    with _quiet():
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForQuestionAnswering.from_pretrained(source, dtype=torch.float32).eval()
    example = tokenizer(["what is it?"], ["an example of a context"], return_tensors="pt")
    names = [k for k in _INPUTS if k in example]
    batch, tokens = torch.export.Dim("batch"), torch.export.Dim("tokens")
    plain = out / "float32.onnx" if compute == "int8" else out / _FILE
    try:
        with _quiet():
            torch.onnx.export(_QALogits(model), tuple(example[k] for k in names), str(plain), input_names=names,
                              output_names=["start_logits", "end_logits"], dynamo=True, external_data=False,
                              dynamic_shapes={k: {0: batch, 1: tokens} for k in names}, verbose=False)
    except Exception as e:  # noqa: BLE001 - the exporter's errors are of many kinds
        raise ModelLoadError(f"The {role.upper()} model {source!r} cannot be exported to ONNX: "
                             f"{type(e).__name__}: {' '.join(str(e).split())[:300]}", setting=f"{role}_model") from e
    _fold_weight_transposes(plain)
    if compute == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with _quiet():
            quantize_dynamic(str(plain), str(out / _FILE), weight_type=QuantType.QInt8)
        plain.unlink()


def _fold_weight_transposes(path: Path) -> None:
    """Replace each ``Transpose`` of a weight by the transposed weight. The exporter's optimiser leaves weights over
    its size limit behind a ``Transpose`` node (so do all of a paper-size model's), and the quantiser then sees no
    weight to quantise: each such ``MatMul`` would stay in float32."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    weights = {w.name: w for w in model.graph.initializer}
    folded = []
    for node in model.graph.node:
        if node.op_type == "Transpose" and node.input[0] in weights:
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
            array = numpy_helper.to_array(weights[node.input[0]])
            model.graph.initializer.append(numpy_helper.from_array(array.transpose(perm).copy(), node.output[0]))
            folded.append(node)
    for node in folded:
        model.graph.node.remove(node)
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    for w in [w for w in model.graph.initializer if w.name not in used]:
        model.graph.initializer.remove(w)
    onnx.save(model, str(path))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's and the quantiser's progress lines and advice off (a run's output stays its own)."""
    import logging
    import warnings

    loggers = [logging.getLogger(name) for name in ("", "torch.onnx", "torch.export", "onnxscript")]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), quiet_loading():
            warnings.simplefilter("ignore")
            yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


def _session(path: Path) -> Any:
    """An ONNX Runtime session on the CPU with torch's thread count (one thread: ``torch.set_num_threads(1)``)."""
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(1, torch.get_num_threads())
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxBackend:
    """The QA component of an ONNX export of a transformers QA model (see the module docstring)."""

    def identity(self, role: str, name: str, config: "Q2Config") -> str:
        _check_role(role)
        model, compute = _split(name)
        return f"onnx-{_version()}:{model_id(model, config.qa_revision)}[{compute}]"

    def load(self, role: str, name: str, config: "Q2Config") -> Any:
        from transformers import AutoTokenizer

        _check_role(role)
        model, _ = _split(name)
        cpu_only("onnx", role, config)
        session = _session(converted(role, name, config.qa_revision))
        tokenizer = AutoTokenizer.from_pretrained(model_files(role, model, config.qa_revision))
        rt = config.role_runtime(role)
        return OnnxQuestionAnswerer(tokenizer, session, **config.stage_settings("qa"), batch_size=rt.batch_size)


BACKEND = OnnxBackend()


class _SessionRunner:
    """Runs each window alone through the session; its :class:`RunStats` count what it computed (a benchmark's
    :func:`q2_plugins.backends.accel.instrument` finds them)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.inputs = [i.name for i in session.get_inputs()]
        self.stats = RunStats()
        self.stats.clock = self  # type: ignore[assignment] # (forward time: the session's runs, counted below)
        self.stats.timer = self._forward

    @contextlib.contextmanager
    def _forward(self) -> Iterator[None]:
        import time

        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stats.forward_seconds += time.perf_counter() - t0

    def logits(self, features: list[dict[str, list[int]]]) -> list[tuple[Any, Any]]:
        import numpy as np
        import torch

        out = []
        for f in features:
            n = len(f["input_ids"])
            feed = {k: np.asarray([f.get(k) or [int(k == "attention_mask")] * n], dtype=np.int64)
                    for k in self.inputs}
            self.stats.count(n, n)
            start, end = self.stats.timed(self.session.run, None, feed, forward=True)
            out.append((torch.from_numpy(start[0]), torch.from_numpy(end[0])))
        return out


class OnnxQuestionAnswerer(transformers_models.HFQuestionAnswerer):
    """Extractive QA by an ONNX Runtime session: the windows and decoding of
    :class:`~q2_plugins.backends.hf.transformers_models.HFQuestionAnswerer`, each window run alone."""

    def __init__(self, tokenizer: Any, session: Any, *, batch_size: int, decoding: str = "original",
                 max_length: int = 512, stride: int = 128, max_answer_tokens: int = 30) -> None:
        self.tokenizer, self.model = tokenizer, None
        self.batch_size, self.batch_tokens, self.sort_by_length = batch_size, None, False
        self.decoding, self.max_length, self.stride = decoding, max_length, stride
        self.max_answer_tokens = max_answer_tokens
        self.runner = _SessionRunner(session)

    def _logits(self, win: Any) -> list[Any]:
        return self.runner.logits(win.features)
