"""The one load policy of every model a backend reads from a directory or the Hugging Face hub.

:func:`fetch` decides where a model's files come from and how a failure reads, for every role (QG, QA, NLI,
coreference, the trained labeller): a name that looks like a path must be a directory; a hub id is loaded after one
probe of the hub per process (:func:`hub_unreachable`), and from the local cache only, at once, when the hub does not
answer; a pickle checkpoint that holds more than tensors is refused; any other failure is one
:class:`~q2_plugins.metric.errors.ModelLoadError` line naming the role, the model, the setting and the offline route
(``q2 prefetch``). Weights load as ``model.safetensors`` where the files have it, a pickle checkpoint only with
``torch.load(weights_only=True)``; a model's identity in the signature is its content or hub commit
(:func:`q2_plugins.metric.signature.model_id`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

from q2_plugins.metric.errors import SETTING, ModelLoadError, SettingError, model_load_error

__all__ = ["fetch", "hub_unreachable", "quiet_loading", "RANDOM_WEIGHTS_MARK", "random_weight_models", "model_files",
           "made_once", "cpu_only"]

T = TypeVar("T")


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """transformers' own per-file progress bars (loading weights, writing shards) off while it runs."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def fetch(role: str, name: str, load: Callable[[str, dict[str, Any]], T]) -> T:
    """``load(path, local)`` under the load policy (see the module docstring): ``path`` is the directory (``~``
    expanded) or the hub id, ``local`` the keyword arguments that keep a Hugging Face loader on the local cache
    (``{"local_files_only": True}`` when the hub cannot be reached, else empty). Any failure of ``load`` is raised
    as one :class:`~q2_plugins.metric.errors.ModelLoadError` naming ``role`` and ``name``."""
    looks_local = name.startswith((".", "/", "~")) or os.path.isdir(os.path.expanduser(name))
    if looks_local and not os.path.isdir(os.path.expanduser(name)):
        missing = FileNotFoundError(f"no directory {name!r}")
        raise model_load_error(role, name, missing) from missing
    path = os.path.expanduser(name) if looks_local else name
    unreachable = None if looks_local else hub_unreachable()
    try:
        # an unreachable hub: the local cache only, at once (the hub client would wait and retry for each file)
        local = {"local_files_only": True} if unreachable else {}
        with _hub_offline(bool(unreachable)):
            return load(path, local)
    except ModelLoadError:
        raise
    except Exception as e:  # transformers raises OSError, ValueError, HF hub errors...
        if unreachable:
            # the message says all there is (the hub's and transformers' chained errors only repeat it at length)
            raise model_load_error(role, name, OSError(
                f"the Hugging Face hub ({unreachable}) cannot be reached and the model is not in the local cache"
            )) from None
        if _unpickling_refused(e):
            raise ModelLoadError(
                f"Refused to load the {role.upper()} model {name!r} (setting {SETTING}): its pickle checkpoint "
                f"holds objects other than tensors, and Q2 loads pickle checkpoints only with torch.load("
                f"weights_only=True), which runs no code. Use a copy with model.safetensors, or convert a checkpoint "
                f"you trust to safetensors. ({_refusal_reason(e)})", setting=f"{role}_model"
            ) from e
        raise model_load_error(role, name, e) from e


def model_files(role: str, name: str, revision: Optional[str]) -> str:
    """A local directory holding the model's files (a hub model: its snapshot), under the load policy."""

    def where(path: str, local: dict[str, Any]) -> str:
        if os.path.isdir(path):
            return path
        from huggingface_hub import snapshot_download

        return snapshot_download(path, revision=revision, **local)

    return fetch(role, os.path.expanduser(name) if name.startswith("~") else name, where)


def cpu_only(scheme: str, role: str, config: Any) -> None:
    """A backend that runs on the CPU only: any other device of ``role`` is a setting error, said up front."""
    if config.role_device(role) != "cpu":
        raise SettingError(f"{role}_device", f"the {scheme} backend runs on the CPU here; use device cpu for it, "
                                             f"or the transformers model (no {scheme}: prefix) on the GPU")


def made_once(target: Path, marker: str, make: Callable[[Path], None]) -> Path:
    """``target``, a directory a backend makes from a model (a conversion, an export), made by ``make(tmp)`` into a
    temporary directory beside it and moved into place whole, unless ``target / marker`` is there already (another
    process making it meanwhile is no error)."""
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        make(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process made it meanwhile
            if not (target / marker).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


_HUB_PROBE: dict[str, Optional[str]] = {}  # endpoint -> why it cannot be reached (None: reachable), once a process


def hub_unreachable(timeout: float = 3.0) -> Optional[str]:
    """Why the Hugging Face hub cannot be reached (``"<endpoint>: <reason>"``), or None when it answers or when the
    hub client is offline anyway (``HF_HUB_OFFLINE``). Asked once per process and endpoint, with one request through
    the environment's proxies that gets at most ``timeout`` seconds, name lookup included: any HTTP answer, an error
    status too, means reachable."""
    try:
        from huggingface_hub import constants
    except ModuleNotFoundError:  # pragma: no cover - a dependency of transformers
        return None
    if constants.HF_HUB_OFFLINE:
        return None
    endpoint = constants.ENDPOINT
    if endpoint not in _HUB_PROBE:
        import threading

        found: list[Optional[str]] = []
        asking = threading.Thread(target=lambda: found.append(_ask_hub(endpoint, timeout)), daemon=True)
        asking.start()
        asking.join(timeout + 0.5)  # a name lookup is not bound by the socket's timeout: the thread is
        _HUB_PROBE[endpoint] = found[0] if found else f"{endpoint}: no answer within {timeout:.0f} s"
    return _HUB_PROBE[endpoint]


@contextlib.contextmanager
def _hub_offline(on: bool) -> Iterator[None]:
    """While loading from the cache because the hub cannot be reached, the hub client is offline too (it makes no
    request of its own, such as the one it makes when it first builds its request headers)."""
    if not on:
        yield
        return
    from huggingface_hub import constants

    was = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was


def _ask_hub(endpoint: str, timeout: float) -> Optional[str]:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(endpoint + "/api/models", method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:  # it answered
        pass
    except (OSError, ValueError) as e:  # refused, no route, no name, timed out, a malformed endpoint
        reason = getattr(e, "reason", e)
        return f"{endpoint}: {type(reason).__name__}: {' '.join(str(reason).split())}"
    return None


def _unpickling_refused(error: BaseException) -> bool:
    """Whether ``error`` (or an error it came from) is torch.load refusing a pickle with ``weights_only=True``."""
    import pickle

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, pickle.UnpicklingError):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def _refusal_reason(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line]
    return (named or lines or [type(error).__name__])[0]


#: the line the model card (README.md) of a tiny random-weight test model holds (written by
#: :func:`q2_plugins.backends.hf.tiny.mark_random_weights`, read by the report to warn that its scores mean nothing);
#: cards are no model files, so the mark leaves the model's identity as it is
RANDOM_WEIGHTS_MARK = "q2-plugins test model: random weights, its outputs mean nothing"


def random_weight_models(config: Optional[dict[str, Any]]) -> list[str]:
    """The ``*_model`` settings of ``config`` naming a folder whose model card carries :data:`RANDOM_WEIGHTS_MARK`."""
    found = []
    for key, value in sorted((config or {}).items()):
        if key.endswith("_model") and isinstance(value, str):
            card = Path(os.path.expanduser(value)) / "README.md"
            try:
                if card.is_file() and RANDOM_WEIGHTS_MARK in card.read_text(encoding="utf-8", errors="replace"):
                    found.append(key)
            except OSError:
                continue
    return found
