"""Backends: which code computes a role's component and how it loads, chosen by the model string.

A model setting (``qg_model``, ``qa_model``, ``nli_model``, ``coref_model``, and the trained labeller's
``taxonomy_model``) names a backend and what it loads: ``SCHEME:REST`` picks the backend registered as ``SCHEME``
(``ct2:DIR``, ``openai:URL#model``, ...); anything else (a hub id, a directory) is the default backend ``hf``
(transformers, :mod:`q2_plugins.backends.hf`), as is ``hf:REST``. Because every front end (the CLI, Python, ParlAI,
evaluate, lm-eval, Ray) passes these strings through :class:`~q2_plugins.metric.config.Q2Config`, a backend is reachable
from all of them.

A backend is an object with two methods (:class:`Backend`):

- ``identity(role, name, config)``: what the signature and the cache keys call the component (computed without
  loading it; it should name the backend, e.g. ``myscheme:<content hash>``);
- ``load(role, name, config)``: the component, implementing the role's protocol of :mod:`q2_plugins.metric.components`
  (``QuestionGenerator``, ``QuestionAnswerer``, ``NLIModel``, ``Coreference``, ``ResponseLabeller``); a model that
  cannot load raises :class:`~q2_plugins.metric.errors.ModelLoadError` (it is called before any row is read);
- optionally ``prefetch(role, name, config, target)``: copy the model into the folder ``target`` for an offline
  machine and return the path a model string names it by there (``q2 prefetch``).

``name`` is the model string without its scheme. A backend is registered by one line: :func:`register` in
Python, an entry point of the group ``q2_plugins.backends`` in a package's metadata (name: the scheme; value:
``module:object``), or, for a module that is not installed as a package, its name in the environment variable
``Q2_BACKEND_MODULES`` (comma-separated; importing it calls :func:`register`). Entry points and those modules are
looked at only when a model string names a scheme not registered yet.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any, Optional, Protocol, Union

from q2_plugins.metric.config import DEFAULT_BACKEND, Q2Config, split_model
from q2_plugins.metric.errors import ModelLoadError, SettingError

__all__ = ["Backend", "BackendError", "ROLES", "DEFAULT", "ENTRY_POINT_GROUP", "MODULES_ENV", "register",
           "unregister", "registered", "resolve", "identity", "load", "prefetch"]

#: the roles a backend can fill: role -> its model setting
ROLES = {"qg": "qg_model", "qa": "qa_model", "nli": "nli_model", "coref": "coref_model",
         "taxonomy": "taxonomy_model"}
#: the backend of a model string without a scheme
DEFAULT = DEFAULT_BACKEND
ENTRY_POINT_GROUP = "q2_plugins.backends"
MODULES_ENV = "Q2_BACKEND_MODULES"



class Backend(Protocol):
    """Builds the component of a role from a model name, and names it for the signature."""

    def identity(self, role: str, name: str, config: "Q2Config") -> str: ...

    def load(self, role: str, name: str, config: "Q2Config") -> Any: ...


class BackendError(SettingError, ModelLoadError):
    """A model string naming a backend that is not registered (``setting``: the model setting)."""


# scheme -> a backend, or "module:attribute" of one, imported when first used
_REGISTRY: dict[str, Union[Backend, str]] = {DEFAULT: "q2_plugins.backends.hf:BACKEND",
                                              "ct2": "q2_plugins.backends.ct2:BACKEND",
                                              "onnx": "q2_plugins.backends.onnx:BACKEND"}
_discovered = False


def register(scheme: str, backend: Union[Backend, str]) -> None:
    """Make ``scheme:...`` model strings load through ``backend`` (an object, or ``"module:attribute"`` naming one,
    imported on first use). Registering a scheme again replaces its backend."""
    if not re.match(r"^[a-z][a-z0-9_+.-]+$", scheme):
        raise ValueError(f"a backend scheme is lower-case letters, digits and _+.- (two or more, starting with a "
                         f"letter), got {scheme!r}")
    if not isinstance(backend, str) and not (callable(getattr(backend, "load", None))
                                             and callable(getattr(backend, "identity", None))):
        raise TypeError(f"Expected a backend with load() and identity(), but got {type(backend).__name__}")
    _REGISTRY[scheme] = backend


def unregister(scheme: str) -> None:
    """Forget the backend of ``scheme`` (the default backend stays)."""
    if scheme != DEFAULT:
        _REGISTRY.pop(scheme, None)


def registered() -> list[str]:
    """The schemes known so far (entry points and ``Q2_BACKEND_MODULES`` included once they were looked at)."""
    return sorted(_REGISTRY)


def _discover() -> None:
    """Register the entry points of ``q2_plugins.backends`` and import the modules of ``Q2_BACKEND_MODULES``."""
    global _discovered
    _discovered = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _REGISTRY.setdefault(ep.name, ep.value)
    for module in filter(None, (m.strip() for m in os.environ.get(MODULES_ENV, "").split(","))):
        importlib.import_module(module)


def resolve(role: str, model: str) -> tuple[Backend, str]:
    """The backend a model string of ``role`` names, and the name it is given (the string without its scheme)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {list(ROLES)}, got {role!r}")
    scheme, name = split_model(model)
    if scheme not in _REGISTRY and not _discovered:
        _discover()
    if scheme not in _REGISTRY:
        raise BackendError(ROLES[role], f"{model!r} names the backend {scheme!r}, which is not registered (known: "
                                        f"{', '.join(registered())}); a backend registers through the entry point "
                                        f"group {ENTRY_POINT_GROUP!r}, or a module named in ${MODULES_ENV}")
    backend = _REGISTRY[scheme]
    if isinstance(backend, str):
        module, _, attribute = backend.partition(":")
        backend = getattr(importlib.import_module(module), attribute)
        _REGISTRY[scheme] = backend
    return backend, name


def _config(config: Optional["Q2Config"]) -> "Q2Config":
    return Q2Config() if config is None else config


def _model(role: str, config: "Q2Config", model: Optional[str]) -> str:
    if model is not None:
        return model
    if role == "taxonomy":
        raise TypeError("the taxonomy role has no setting in Q2Config: pass model=")
    return getattr(config, ROLES[role])


def identity(role: str, config: Optional["Q2Config"] = None, model: Optional[str] = None) -> str:
    """The identity of the component of ``role`` (the signature's and the cache keys' name for it), for the model
    string ``model`` (default: the role's setting in ``config``), without loading it."""
    config = _config(config)
    backend, name = resolve(role, _model(role, config, model))
    return backend.identity(role, name, config)


def load(role: str, config: Optional["Q2Config"] = None, model: Optional[str] = None) -> Any:
    """The component of ``role``, loaded by the backend its model string names (``model``, default: the role's
    setting in ``config``; ``config`` gives the settings the component runs with)."""
    config = _config(config)
    backend, name = resolve(role, _model(role, config, model))
    return backend.load(role, name, config)


def prefetch(role: str, target: Union[str, "os.PathLike[str]"], config: Optional["Q2Config"] = None,
             model: Optional[str] = None) -> Any:
    """Copy the model of ``role`` (``model``, default: the role's setting in ``config``) into the folder ``target``
    through its backend's ``prefetch``, and return what names it there; a backend without one raises
    :class:`BackendError`."""
    config = _config(config)
    model = _model(role, config, model)
    backend, name = resolve(role, model)
    hook = getattr(backend, "prefetch", None)
    if not callable(hook):
        raise BackendError(ROLES[role], f"{model!r}: its backend cannot copy its model for an offline machine")
    return hook(role, name, config, target)
