"""Exceptions with messages that say what to change.

A library error names the setting to change by its library name (``qg_model``) and keeps it in ``.setting``; it says
nothing of any front end. Each front end writes the setting its own way with :meth:`named` before showing the error:
``--qg-model`` (the ``q2`` command line), ``--q2-qg-model`` (ParlAI), ``qg_model=`` (``evaluate``).
"""

from __future__ import annotations

import difflib
import os
from typing import Callable, Optional, TypeVar

__all__ = ["SETTING", "NamesSetting", "ModelLoadError", "SettingError", "model_load_error", "model_load_message"]

# Where a message writes the name of its setting: str() puts the library name there, a front end its own form.
SETTING = "{setting}"
_E = TypeVar("_E", bound="NamesSetting")


def _library_name(setting: str) -> str:
    return setting


class NamesSetting(Exception):
    """An error that names a setting: ``setting`` (several written ``a / b``) where ``message`` has
    :data:`SETTING`, written by ``str`` through the naming function set with :meth:`named` (default: the library's
    own names)."""

    setting: Optional[str] = None
    _name: Callable[[str], str] = staticmethod(_library_name)

    def __init__(self, message: str, setting: Optional[str] = None) -> None:
        super().__init__(message)
        self.template, self.setting = message, setting

    def __str__(self) -> str:
        if self.setting is None:
            return self.template
        return self.template.replace(SETTING, self._setting_text())

    def __reduce__(self) -> tuple:  # rebuilt as it is (a subclass's __init__ may take other arguments): Ray ships it
        return _restore, (type(self), self.args, self.__dict__)

    def named(self: _E, name: Callable[[str], str]) -> _E:
        """This error, its setting written as ``name(setting)`` from now on (e.g. ``--qg-model``); returns it."""
        self._name = name
        return self

    def _setting_text(self) -> str:
        return " / ".join(self._name(s) for s in (self.setting or "").split(" / "))


class ModelLoadError(NamesSetting, RuntimeError):
    """A model could not be loaded; the message names the role, the model and the setting to change
    (``setting``, where the message has :data:`SETTING`)."""


class SettingError(NamesSetting, ValueError):
    """A setting that cannot work: ``setting`` names the field of the library's options to change, ``message``
    what is wrong with it; ``str()`` is ``"setting: message"`` with the setting as :meth:`named` writes it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting, self.message = setting, message

    def __str__(self) -> str:
        return f"{self._setting_text()}: {self.message}"


def _restore(cls: type, args: tuple, state: dict) -> BaseException:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


def _missing_folder(name: str) -> Optional[str]:
    """Why the local folder ``name`` cannot be a model (it does not exist, with the close names beside it), or None
    when ``name`` is not a path that is missing. A hub id such as ``org/model`` is no path unless ``org`` is a local
    folder."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        return None
    first = name.replace("\\", "/").split("/", 1)[0]
    if not (name.startswith((".", "/", "~")) or ("/" in name.replace("\\", "/") and first and os.path.isdir(first))):
        return None
    parent = os.path.dirname(os.path.normpath(path)) or "."
    if not os.path.isdir(parent):
        return f"the folder {name} does not exist (nor does {parent})"
    close = difflib.get_close_matches(os.path.basename(os.path.normpath(path)),
                                      sorted(e.name for e in os.scandir(parent) if e.is_dir()), n=3)
    near = f"; {parent} has {', '.join(close)}" if close else ""
    return f"the folder {name} does not exist{near}"


def model_load_message(role: str, name: str, cause: BaseException) -> str:
    """One line with :data:`SETTING` where the setting goes: the role, the model, the cause and what to change (for
    a local folder that does not exist, that it does not; else how to load without network)."""
    missing = _missing_folder(name)
    head = f"Cannot load the {role.upper()} model {name!r} (setting {SETTING})"
    if missing:
        return f"{head}: {missing}. Point {SETTING} at an existing model folder or a hub id."
    reason = " ".join(str(cause).split()).rstrip(".")
    if len(reason) > 300:
        reason = reason[:300] + "..."
    return (
        f"{head}: {type(cause).__name__}: {reason}. Without network, fetch the models on a connected machine with "
        f"`q2 prefetch`, copy them here and point {SETTING} at the copy, or set HF_HUB_OFFLINE=1 with a populated "
        f"Hugging Face cache."
    )


def model_load_error(role: str, name: str, cause: BaseException) -> ModelLoadError:
    """The :class:`ModelLoadError` of ``role``'s model ``name`` failing with ``cause`` (setting ``<role>_model``)."""
    return ModelLoadError(model_load_message(role, name, cause), setting=f"{role}_model")
