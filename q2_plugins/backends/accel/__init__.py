"""How the models run fast; what they compute is the model wrappers' business
(:mod:`q2_plugins.backends.hf.transformers_models`).

The wrappers call this API and nothing else of the package:

- :func:`prepare_model` at load time: the CPU kernels (:mod:`.onednn`: oneDNN-packed Linear weights, one fused
  tanh-GELU kernel), or PyTorch's own with ``cpu_kernels="torch"``;
- :func:`question_decoder` for question generation: token ids from our T5 beam search (:mod:`.beam`) or the
  library's ``generate`` (``search="library"``);
- :func:`window_runner` for QA and NLI: window logits from packed windows (:mod:`.packed`) or padded batches
  (``pack_windows=False``);
- :func:`instrument`, for benchmarks: counters and a forward clock on a component.

Fast paths give the library path's outputs: tests check them on the CPU; elsewhere a run compares its first rows'
decisions with float32 on the library paths (:mod:`q2_plugins.metric.precision`). Batches are planned by
:mod:`.batching`; the device's defaults (batch sizes from its free memory, the window layout, TF32) by :mod:`.device`.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from q2_plugins.backends.accel.batching import Batching
from q2_plugins.backends.accel.counters import ForwardClock, RunStats
from q2_plugins.backends.accel.generation import QuestionDecoder
from q2_plugins.backends.accel.windows import WindowRunner

__all__ = ["Batching", "prepare_model", "question_decoder", "window_runner", "instrument", "CPU_KERNELS"]

CPU_KERNELS = ("onednn", "torch")


def prepare_model(model: Any, cpu_kernels: str = "onednn", *, tf32: bool = False) -> None:
    """Set up a loaded model's kernels in place: with ``"onednn"``, the Linear layers of a CPU model get their
    weights packed for oneDNN and a tanh-approximated GELU runs as one kernel (other devices are left alone);
    ``"torch"`` keeps PyTorch's own matmul and the model's own activation code. ``tf32``: the runners run its
    passes with TF32 matrix products (a CUDA model in float32)."""
    if cpu_kernels not in CPU_KERNELS:
        raise ValueError(f"cpu_kernels must be 'onednn' or 'torch', got {cpu_kernels!r}")
    model.q2_tf32 = tf32
    if cpu_kernels == "onednn":
        from q2_plugins.backends.accel.onednn import fuse_tanh_gelu, pack_linear_layers  # (lazy: torch)

        if pack_linear_layers(model):  # a CPU model on fast kernels: its activations too
            fuse_tanh_gelu(model)


def question_decoder(tokenizer: Any, model: Any, *, search: str = "own",
                     generate_overrides: Optional[Mapping[str, Any]] = None) -> "QuestionDecoder":
    """The runner of a question generator: ``.generate(encoded, gen_kwargs, batching)`` gives each input's
    generated token-id rows. ``search``: ``"own"`` (our beam search where it reproduces the call) or ``"library"``
    (``generate``)."""

    return QuestionDecoder(tokenizer, model, search=search, generate_overrides=generate_overrides)


def window_runner(tokenizer: Any, model: Any, kind: str, *, pack_windows: bool = True) -> "WindowRunner":
    """The runner of a QA (``kind="qa"``) or NLI (``"classification"``) model: ``.logits(features, batching)``
    gives each window's logits, packed end to end where the model allows unless ``pack_windows`` is off."""

    return WindowRunner(tokenizer, model, kind, pack_windows=pack_windows)


def instrument(component: Any) -> "RunStats":
    """The counters of a component (or of a runner) with a clock of the time inside its model's forward passes:
    ``call_seconds``, ``forward_seconds``, ``tokens``, ``padded_tokens``, ``batches``, ``reset()``. For benchmarks;
    calling it again returns the same counters."""

    runner = getattr(component, "runner", component)
    stats = runner.stats
    if getattr(stats, "clock", None) is None:
        stats.clock = ForwardClock(runner.model, stats)
    return stats
