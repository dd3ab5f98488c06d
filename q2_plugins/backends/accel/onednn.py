"""Linear layers on oneDNN with their weights packed once, for CPU inference.

PyTorch runs a float32 ``nn.Linear`` on the CPU through its BLAS (MKL), which re-packs the weight matrix on every
call; on the few hundred rows a Q² batch holds (and the few rows of a beam-search step) that leaves much of the CPU
idle. oneDNN can pack a weight once into its own blocked layout and multiply against it directly, which helps most on
the few rows of a beam step (``benchmarks/bench_linear.py``; measured figures in ``docs/performance.md``).

:func:`pack_linear_layers` swaps every ``nn.Linear`` of a model for a :class:`PackedLinear` after checking, on the
model's first Linear, that the packed product matches PyTorch's; where oneDNN or its operators are missing, or the
check fails, the model is left as it was. The results are the same function computed with another summation order:
they agree with PyTorch's to float rounding, and a row's output never depends on the other rows of its batch.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import sys
import warnings
import weakref
from pathlib import Path
from typing import Any

import torch

__all__ = ["available", "bf16_supported", "pack_linear_layers", "fuse_tanh_gelu", "PackedLinear", "flop_formulas",
           "PACKABLE_DTYPES"]

PACKABLE_DTYPES = ("float32", "bfloat16")


def available() -> bool:
    """True when this PyTorch build has oneDNN and the packed-linear operators."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        return all(callable(getattr(torch.ops.mkldnn, op)) for op in ("_reorder_linear_weight", "_linear_pointwise"))
    except (AttributeError, RuntimeError):  # this build has no such operators
        return False


def bf16_supported() -> bool:
    """True when oneDNN runs bfloat16 products on this CPU (AVX-512 or newer)."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


def _file_mappings() -> list[tuple[int, int]]:
    """Address ranges where this process maps a file (Linux; [] elsewhere): a checkpoint loaded with mmap, say."""
    if not sys.platform.startswith("linux"):
        return []
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            out.append((lo, hi))
    return out


def _drop_file_pages(start: int, nbytes: int, mappings: list[tuple[int, int]]) -> None:
    """Let the kernel drop the resident pages of a freed tensor storage that lived in a file mapping.

    Only whole pages inside the freed bytes are dropped, and only in a file mapping: such a page is read again from
    the file if it is ever touched, while nothing can touch it since its storage is gone. Anonymous memory (where
    dropping would zero the pages) is never touched.
    """
    page = mmap.PAGESIZE
    lo = -(-start // page) * page
    hi = (start + nbytes) // page * page
    if hi <= lo or not any(m_lo <= lo and hi <= m_hi for m_lo, m_hi in mappings):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), ctypes.c_int(4))  # MADV_DONTNEED; failure is harmless


class PackedLinear(torch.nn.Module):
    """``y = x W^T + b`` with ``W`` (out x in, as ``nn.Linear`` keeps it) packed once for oneDNN. Inference only: the
    packed weight is not a parameter."""

    def __init__(self, weight: Any, bias: Any = None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        with torch.no_grad():
            # the packed weight keeps ``weight``'s name and dtype: model code that reads ``layer.weight.dtype``
            # (T5 does) still works
            self.weight = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())
            self.bias = None if bias is None else bias.detach().clone()

    def forward(self, x: Any) -> Any:
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _matches(linear: Any, packed: PackedLinear) -> bool:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 2, linear.in_features, generator=gen).to(linear.weight.dtype)
    with torch.inference_mode():
        want = torch.nn.functional.linear(x, linear.weight, linear.bias).float()
        got = packed(x).float()
    tol = 1e-2 if linear.weight.dtype == torch.bfloat16 else 1e-4
    return got.shape == want.shape and bool(torch.allclose(got, want, rtol=tol, atol=tol * float(want.abs().max())))


def _child_slots(model: Any, cls: type) -> list[tuple[Any, str]]:
    """``(parent, attribute)`` of every submodule of exactly type ``cls``, once per parent that holds it."""
    return [(parent, name) for parent in model.modules() for name, child in parent.named_children()
            if type(child) is cls]


def fuse_tanh_gelu(model: Any) -> int:
    """Replace the tanh-approximated GELU that some models (ALBERT's ``gelu_new``) compute as five elementwise
    passes over the activations by PyTorch's single-pass kernel of the same function; returns how many.

    The five passes cost several times the one (measured in ``docs/performance.md``). The two agree to float rounding
    (about 1 element in 100 differs, by one unit in the last place), like two matmul kernels.
    """
    try:
        from transformers.activations import GELUTanh, NewGELUActivation
    except ImportError:  # pragma: no cover - transformers without these classes
        return 0
    slots = _child_slots(model, NewGELUActivation)
    for parent, name in slots:
        setattr(parent, name, GELUTanh())
    return len(slots)


def pack_linear_layers(model: Any) -> int:
    """Replace every ``nn.Linear`` of a CPU ``model`` in float32 or bfloat16 by a :class:`PackedLinear`.

    Returns how many layers were replaced: 0 when oneDNN is unavailable, the model is not on the CPU or not in a
    packable dtype (bfloat16 needs a CPU oneDNN runs it on), or the packed product disagrees with PyTorch's (then a
    warning says so).
    """
    if not available():
        return 0
    slots = _child_slots(model, torch.nn.Linear)
    if not slots:
        return 0
    first = getattr(*slots[0])
    if first.weight.device.type != "cpu" or str(first.weight.dtype).replace("torch.", "") not in PACKABLE_DTYPES:
        return 0
    if first.weight.dtype == torch.bfloat16 and not bf16_supported():
        return 0
    try:
        ok = _matches(first, PackedLinear(first.weight, first.bias))
    except RuntimeError as e:  # an operator this build or CPU does not support
        warnings.warn(f"oneDNN packed Linear layers unavailable here ({e}); using PyTorch's matmul", stacklevel=2)
        return 0
    if not ok:
        warnings.warn("oneDNN packed Linear disagrees with PyTorch's matmul here; using PyTorch's matmul",
                      stacklevel=2)
        return 0
    del first
    # One layer at a time, each original weight freed as soon as its packed copy exists, so memory never holds two
    # copies of the model. Weights loaded from safetensors live in a memory-mapped file whose pages, once read for
    # packing, would stay resident beside the copy: they are dropped as soon as the weight is freed. A Linear reachable
    # from two parents is packed once (it stays alive until its last parent, so its id is not reused before).
    mappings = _file_mappings()
    done: dict[int, PackedLinear] = {}
    for parent, name in slots:
        child = getattr(parent, name)
        packed = done.get(id(child))
        if packed is None:
            packed = PackedLinear(child.weight, child.bias)
            done[id(child)] = packed
        storage = child.weight.untyped_storage()
        span, alive = (storage.data_ptr(), storage.nbytes()), weakref.ref(storage)
        setattr(parent, name, packed)
        del child, packed, storage
        if alive() is None:  # no tensor (a tied embedding, a view) uses these bytes any more
            _drop_file_pages(*span, mappings)
    # The remaining (non-Linear) tensors are copied, so nothing refers to the mapped file any more and it is unmapped.
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.clone()
    return len(done)


def _linear_flop(x_shape: Any, w_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    return 2 * math.prod(out_shape) * x_shape[-1]


def _attention_flop(q_shape: Any, k_shape: Any, v_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(q_shape, k_shape, v_shape)


def flop_formulas() -> dict[Any, Any]:
    """FLOP formulas for ``torch.utils.flop_counter.FlopCounterMode(custom_mapping=...)``: the packed linear, and
    the CPU attention kernel the counter does not know (counted as its two matrix products)."""
    out: dict[Any, Any] = {}
    if available():
        out[torch.ops.mkldnn._linear_pointwise] = _linear_flop
    cpu_sdpa = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if cpu_sdpa is not None:
        out[cpu_sdpa] = _attention_flop
    return out
