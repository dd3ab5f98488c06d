"""What the benchmarks measure and print about the machine their figures come from: its CPU, its matmul peaks,
the best time of a call, memory in use."""

from __future__ import annotations

import os
import platform
import resource
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    import torch


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``; elsewhere what :mod:`platform` knows): timings compare only on one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def best_seconds(fn: Callable[[], object], reps: int = 5, trials: int = 5) -> float:
    """Seconds per call of ``fn``: after two warm-up calls, the best of ``trials`` timings of ``reps`` calls (what
    the machine can do, not a moment when something else ran)."""
    for _ in range(2):
        fn()
    best = float("inf")
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def native_dtypes() -> list["torch.dtype"]:
    """The dtypes this CPU multiplies natively: float32 always, bfloat16 where oneDNN runs it (AVX-512 BF16 or AMX).
    Elsewhere bf16 is emulated at ~1 GFLOP/s: one 2048 x 2048 product takes ~18 s, so its peak says nothing and
    measuring it would take most of an hour."""
    import torch

    from q2_plugins.backends.accel.onednn import bf16_supported

    return [torch.float32] + ([torch.bfloat16] if bf16_supported() else [])


def matmul_peaks(n: int) -> dict[str, dict[str, float]]:
    """:func:`matmul_peak` of each of :func:`native_dtypes`, keyed by the dtype's name."""
    return {str(dtype).removeprefix("torch."): matmul_peak(dtype, n) for dtype in native_dtypes()}


def matmul_peak(dtype: "torch.dtype", n: int = 2048) -> dict[str, float]:
    """GFLOP/s of an n x n matmul with PyTorch's matmul and with a oneDNN packed weight (:class:`PackedLinear`, as
    the models use it, where this CPU runs it); ``best``: the higher."""
    import torch

    from q2_plugins.backends.accel.onednn import PackedLinear, available, bf16_supported

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    products = {"torch": lambda: a @ b}
    if available() and (dtype != torch.bfloat16 or bf16_supported()):
        packed = PackedLinear(b.t())
        products["onednn"] = lambda: packed(a)
    with torch.inference_mode():
        out = {name: 2 * n**3 / best_seconds(product) / 1e9 for name, product in products.items()}
    out["best"] = max(out.values())
    return out


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def current_rss_gb() -> Optional[float]:
    """Resident memory now (Linux); unlike the peak, it leaves out pages that were resident only for a moment."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**3
    except (OSError, ValueError, IndexError):
        return None
