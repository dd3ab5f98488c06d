"""The devices a configuration names, checked before any model loads: a device that is not here (``cuda`` on a
machine without a GPU, or with a torch built without CUDA; ``cuda:3`` with two GPUs) is a
:class:`~q2_plugins.errors.SettingError` naming the setting and saying what to set instead."""

from __future__ import annotations

from typing import Any, Sequence

from .errors import SettingError

__all__ = ["check_device", "check_devices"]


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
