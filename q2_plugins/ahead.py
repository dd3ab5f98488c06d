"""The next chunk's answer candidates, extracted while the models score this one (for runs whose models are on a
GPU, where spaCy's CPU work would otherwise sit on the critical path).

:class:`CandidatesAhead` wraps the scorer's candidate extractor: :meth:`~CandidatesAhead.start` parses a list of
responses in a background thread with its own spaCy pipeline (a pipeline is not shared across threads), and
:meth:`~CandidatesAhead.extract` serves the responses it has done and extracts the others itself. The rule and the
pipeline are the same, so the candidates are identical either way (tested).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

__all__ = ["CandidatesAhead", "off_cpu"]


def off_cpu(config: Any) -> bool:
    """Whether any model of ``config`` runs off the CPU (then the CPU stages are worth overlapping)."""
    import torch

    roles = ("qg", "qa", "nli") if config.uses_nli else ("qg", "qa")
    return any(torch.device(config.role_device(r)).type != "cpu" for r in roles)


class CandidatesAhead:
    """A candidate extractor that can work ahead in a thread (see the module docstring). ``make_background``
    builds the extractor the thread uses (with its own pipeline), once, on the first :meth:`start`."""

    def __init__(self, inner: Any, make_background: Callable[[], Any]) -> None:
        self.inner = inner
        self._make_background = make_background
        self._background: Any = None
        self._done: dict[str, list[str]] = {}
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def start(self, texts: Sequence[str]) -> None:
        """Extract the candidates of ``texts`` in a background thread (after the previous one finished)."""
        self.wait()
        todo = [t for t in dict.fromkeys(texts) if isinstance(t, str) and t not in self._done]
        if not todo:
            return

        def work() -> None:
            try:
                if self._background is None:
                    self._background = self._make_background()
                self._done.update(zip(todo, self._background.extract(todo)))
            except BaseException as e:  # noqa: BLE001 - the texts are extracted in the foreground instead
                self._error = e

        self._thread = threading.Thread(target=work, name="q2-candidates-ahead", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        """The candidates of each text: done ahead where they were, extracted now otherwise."""
        self.wait()
        rest = [t for t in texts if t not in self._done]
        fresh = dict(zip(rest, self.inner.extract(rest))) if rest else {}
        out = [list(self._done[t]) if t in self._done else fresh[t] for t in texts]
        for t in texts:
            self._done.pop(t, None)
        return out

    def __getattr__(self, name: str) -> Any:  # unfit, signature, ... of the wrapped extractor
        return getattr(self.inner, name)
