"""Exceptions with messages that say what to change."""

from __future__ import annotations

__all__ = ["ModelLoadError", "model_load_message"]


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the role, the model and the setting to change."""


def model_load_message(role: str, name: str, cause: BaseException) -> str:
    flag = f"--{role}-model"
    return (
        f"Cannot load the {role.upper()} model {name!r} (setting: {role}_model / {flag}): "
        f"{type(cause).__name__}: {cause}\n"
        f"If this machine has no network, fetch the models on a connected machine with\n"
        f"    q2 prefetch --output-dir q2-models\n"
        f"copy that directory here and pass {flag} q2-models/{role} (likewise for the other roles), "
        f"or set HF_HUB_OFFLINE=1 with a populated Hugging Face cache."
    )
