"""Exceptions with messages that say what to change."""

from __future__ import annotations

from typing import Mapping, Optional

__all__ = ["ModelLoadError", "SettingError", "flag_error", "model_load_message"]


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the role, the model and the setting to change."""


class SettingError(ValueError):
    """A setting that cannot work; ``setting`` names the field of the library's options to change (the command line
    names its flag instead, :func:`flag_error`)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting, self.message = setting, message


def flag_error(error: SettingError, flags: Optional[Mapping[str, str]] = None) -> ValueError:
    """``error`` as the command line says it: the flag of its setting (from ``flags``, else ``--the-setting``; each
    of several settings written ``a / b``)."""
    flags = flags or {}
    if error.setting in flags:
        return ValueError(f"{flags[error.setting]}: {error.message}")
    named = " / ".join(flags.get(s, "--" + s.replace("_", "-")) for s in error.setting.split(" / "))
    return ValueError(f"{named}: {error.message}")


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
