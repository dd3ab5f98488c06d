"""Fast paths that check themselves where the test suite cannot run them.

The own beam search (:mod:`q2_plugins.accel.beam`) and packed windows (:mod:`q2_plugins.accel.packed`) are tested
equal to the library's ``generate`` and to padded batches on the CPU in float32 and bfloat16 only. On any other
device or dtype (CUDA, MPS, float16), the first call of each fast path also runs the library path on the same batch;
on any difference it warns once, naming the path, and the component uses the library path for the rest of the run.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

__all__ = ["tested_setting", "FastPathCheck"]


def tested_setting(device: Any, dtype: Any) -> bool:
    """Whether the test suite runs the fast paths on this device and dtype (the CPU, float32 or bfloat16)."""
    import torch

    return torch.device(device).type == "cpu" and dtype in (torch.float32, torch.bfloat16)


class FastPathCheck:
    """The state of one fast path's check in one component: not checked yet, agreed, or switched off."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.agreed: Optional[bool] = None

    def needed(self, device: Any, dtype: Any) -> bool:
        """Whether this call should compare against the library path (first call on an untested setting)."""
        return self.agreed is None and not tested_setting(device, dtype)

    def record(self, same: bool, device: Any, dtype: Any, detail: str = "") -> bool:
        """Keep the outcome; on a difference warn (once per component) and return False (use the library path)."""
        self.agreed = same
        if not same:
            warnings.warn(
                f"q2: {self.path} gave other results than the library path on {device} / {dtype}"
                f"{f' ({detail})' if detail else ''}; this run uses the library path from now on.",
                RuntimeWarning, stacklevel=3)
        return same
