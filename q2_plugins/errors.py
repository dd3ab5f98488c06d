"""Exceptions with messages that say what to change."""

from __future__ import annotations

__all__ = ["ModelLoadError", "model_load_message"]


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the role, the model and the setting to change."""


def model_load_message(role: str, name: str, cause: BaseException) -> str:
    """One line: the role, the model, the setting to change, the cause and the offline route."""
    flag = f"--{role}-model"
    reason = " ".join(str(cause).split()).rstrip(".")
    if len(reason) > 300:
        reason = reason[:300] + "..."
    return (
        f"Cannot load the {role.upper()} model {name!r} (setting: {role}_model / {flag}): "
        f"{type(cause).__name__}: {reason}. Without network, run `q2 prefetch --output-dir q2-models` on a "
        f"connected machine, copy that directory here and pass {flag} q2-models/{role} (likewise for the other "
        f"roles), or set HF_HUB_OFFLINE=1 with a populated Hugging Face cache."
    )
