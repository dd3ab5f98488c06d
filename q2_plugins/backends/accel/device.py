"""What a device can do, and the batching and window layout that fit it.

The decisions are pure functions of a :class:`DeviceProps` (probed from torch by :func:`probe`, or made up in tests)
and a :class:`ModelShape` (read from a model's config by :func:`model_shape`), so they are tested without the
hardware. On the CPU they give the settings the package was tuned with (32 inputs and 2,048 padded tokens a pass,
packed windows); on a GPU, batches sized from the free memory and padded windows (plain padded batches are faster
there than the packed layout built for CPU caches). ``--batch-size`` / ``--batch-tokens`` override them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from q2_plugins.metric.errors import SettingError

__all__ = ["CPU_BATCH_SIZE", "CPU_BATCH_TOKENS", "DeviceProps", "ModelShape", "probe", "model_shape",
           "default_batching", "packed_windows", "supports_tf32", "DTYPE_BYTES", "check_device", "check_devices"]

#: the CPU defaults (measured on 2-core CPUs: docs/performance.md)
CPU_BATCH_SIZE = 32
CPU_BATCH_TOKENS = 2048

#: bytes of one value of each dtype setting (tf32 keeps float32 storage)
DTYPE_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2}

# GPU limits: a batch never holds more inputs than this (the host side of a batch grows with it), nor a pass more
# padded tokens than this (beyond it a pass is long enough to fill any card; larger only costs memory)
GPU_MAX_BATCH = 1024
GPU_MAX_TOKENS = 1 << 18
# the share of the free memory one stage's activations may take: the other models, the allocator's fragmentation
# and the library's workspaces share the rest
GPU_MEMORY_SHARE = 0.4
# an input of the typical length in Q²'s stages (QG prompts ~40 tokens, QA windows up to 512): batch sizes are set
# so a batch of such inputs reaches the token cap
TYPICAL_TOKENS = 128


@dataclass(frozen=True)
class DeviceProps:
    """A device as the batching decisions see it: its kind (``cpu``, ``cuda``, ``mps``, ...), name, free and total
    memory in bytes (None: unknown) and CUDA compute capability (``(8, 0)`` for an A100; None elsewhere)."""

    kind: str
    name: str = ""
    free_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    capability: Optional[tuple[int, int]] = None


@dataclass(frozen=True)
class ModelShape:
    """What a model's activations cost per token: hidden and feed-forward widths, layers, attention heads, and for a
    seq2seq model the beams each input decodes (and the longest question)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    seq2seq: bool = False
    beams: int = 1
    max_new_tokens: int = 0


def probe(device: Any) -> DeviceProps:
    """The properties of a torch device (``"cpu"``, ``"cuda:1"``, ...): free and total memory and compute capability
    from ``torch.cuda`` for a CUDA device, the kind alone for the others."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return DeviceProps(dev.type)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(index)
    return DeviceProps("cuda", torch.cuda.get_device_name(index), int(free), int(total),
                       tuple(torch.cuda.get_device_capability(index)))  # type: ignore[arg-type]


def model_shape(config: Any, *, beams: int = 1, max_new_tokens: int = 0) -> ModelShape:
    """The :class:`ModelShape` of a transformers model config (T5's ``d_model`` / ``d_ff`` / ``num_heads`` names
    included; decoder layers count with the encoder's for a seq2seq model)."""
    hidden = getattr(config, "hidden_size", None) or config.d_model
    intermediate = getattr(config, "intermediate_size", None) or getattr(config, "d_ff", None) or 4 * hidden
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "num_heads", 1)
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "num_layers", 1)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    if seq2seq:
        layers += getattr(config, "num_decoder_layers", None) or layers
    return ModelShape(int(hidden), int(intermediate), int(layers), int(heads), seq2seq, max(1, beams),
                      max_new_tokens)


def _floor_pow2(n: float) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def default_batching(device: DeviceProps, shape: ModelShape, dtype: str) -> tuple[int, Optional[int]]:
    """``(batch size, padded-token cap)`` of a model on ``device`` when the user set neither.

    The CPU (and any device whose free memory is unknown) keeps the tuned CPU values. On a GPU, one pass may take
    :data:`GPU_MEMORY_SHARE` of the free memory (measured after the model loaded): a padded token costs its largest
    live activations (the feed-forward and the attention projections of one layer, the attention scores of its
    heads over a 512-token window; inference keeps no other layer's) and, for a seq2seq model, its beams' key/value
    cache over every decoder layer. The cap is the largest power of two within that budget (at most
    :data:`GPU_MAX_TOKENS`), the batch size the number of :data:`TYPICAL_TOKENS`-token inputs that fill it (at least
    the CPU's 32, at most :data:`GPU_MAX_BATCH`).
    """
    if device.kind == "cpu" or device.free_bytes is None:
        return CPU_BATCH_SIZE, CPU_BATCH_TOKENS
    value = DTYPE_BYTES[dtype]
    per_token = value * (shape.intermediate + 4 * shape.hidden + shape.heads * 512)
    if shape.seq2seq:  # each input's beams keep self- and cross-attention keys and values in every decoder layer
        per_token += value * shape.beams * shape.layers * 2 * shape.hidden
    budget = device.free_bytes * GPU_MEMORY_SHARE
    tokens = min(GPU_MAX_TOKENS, _floor_pow2(max(budget / per_token, 1)))
    if tokens < CPU_BATCH_TOKENS:  # a card this full: the CPU's small passes are what fits
        return CPU_BATCH_SIZE, max(TYPICAL_TOKENS, tokens)
    size = min(GPU_MAX_BATCH, max(CPU_BATCH_SIZE, _floor_pow2(tokens / TYPICAL_TOKENS)))
    return size, tokens


def packed_windows(device_kind: str, pack_windows: bool) -> bool:
    """Whether QA and NLI windows run packed end to end: on the CPU when ``pack_windows`` is on; padded elsewhere
    (measured on an H200: padded bf16 windows 3x the packed ones; the packed layout wins on CPU caches only)."""
    return pack_windows and device_kind == "cpu"


def supports_tf32(device: DeviceProps) -> bool:
    """Whether ``device`` has TF32 tensor cores: a CUDA GPU of compute capability 8.0 (Ampere) or newer."""
    return device.kind == "cuda" and device.capability is not None and device.capability >= (8, 0)


def fitted_batching(model: Any, device: str, dtype: str, batch_size: int, batch_tokens: Optional[int], *,
                    auto_size: bool, auto_tokens: bool, beams: int = 1) -> tuple[int, Optional[int]]:
    """The batch size and token cap a loaded model runs with: the user's where set (``auto_*`` False), else
    :func:`default_batching` for its device (probed now, after the model took its memory) and shape."""
    if not (auto_size or auto_tokens):
        return batch_size, batch_tokens
    props = probe(device)
    if props.kind == "cpu":
        return batch_size, batch_tokens
    size, tokens = default_batching(props, model_shape(model.config, beams=beams), dtype)
    return (size if auto_size else batch_size), (tokens if auto_tokens else batch_tokens)


def check_dtype(dtype: str, device: str, setting: str = "dtype") -> None:
    """Stop before loading when ``dtype`` cannot run on ``device`` (tf32 without TF32 tensor cores)."""
    if dtype != "tf32":
        return
    props = probe(device)
    if not supports_tf32(props):
        raise SettingError(setting, f"tf32 needs a CUDA GPU of compute capability 8.0 or newer (Ampere, Hopper, ...); "
                                    f"the device is {device!r}{f' ({props.name})' if props.name else ''}: use float32")


class matmul_precision:
    """A context in which CUDA float32 matrix products and convolutions run in TF32 (``tf32`` True) or not, the
    previous settings restored after it (so one role in tf32 leaves the others' float32 alone)."""

    def __init__(self, tf32: bool) -> None:
        self.tf32 = tf32
        self._saved: Optional[tuple[bool, bool]] = None

    def __enter__(self) -> "matmul_precision":
        import torch

        if self.tf32:
            self._saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        if self._saved is not None:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = self._saved
            self._saved = None


def check_device(device: str, setting: str = "device") -> None:
    """Raise :class:`SettingError` (naming ``setting``) when ``device`` is no torch device this machine has."""
    if device == "cpu":  # always here (and no torch import: the checks of the input come after this one)
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise SettingError(setting, f"{device!r} is not a torch device ({' '.join(str(e).split())[:200]}); "
                                    f"set it to cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if torch.version.cuda is None:
            why = f"this torch ({torch.__version__}) is built without CUDA"
        elif not torch.cuda.is_available():
            why = "torch sees no GPU here"
        elif dev.index is not None and dev.index >= torch.cuda.device_count():
            why = f"this machine has {torch.cuda.device_count()} GPU(s), numbered from 0"
        else:
            return
        raise SettingError(setting, f"{device} is not available: {why}; set it to cpu")
    if dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise SettingError(setting, f"{device} is not available on this machine; set it to cpu")


def check_devices(config: Any, roles: Sequence[str] = ("qg", "qa", "nli")) -> None:
    """Check the device of each model role of ``config`` in ``roles`` (a role's own device setting, else
    ``device``)."""
    for role in roles:
        own = getattr(config, f"{role}_device", None)
        check_device(own or config.device, f"{role}_device" if own else "device")
