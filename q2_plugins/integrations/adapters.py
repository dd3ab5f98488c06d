"""Shared plumbing for the framework adapters (HF ``evaluate``, lm-eval, reranking, ...): config from options, one
scorer per configuration, and a result's explanation as text.

Nothing here scores: every adapter ends in :meth:`Q2Scorer.score`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Mapping, Optional

from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.results import ResponseResult
from q2_plugins.scorer import Q2Scorer

__all__ = ["config_from_options", "config_from_env", "ScorerCache", "shared_scorer", "explanation_of"]


def config_from_options(options: Optional[Mapping[str, Any]] = None, base: Optional[Q2Config] = None) -> Q2Config:
    """``base`` (default: ``Q2Config()``) with ``options`` applied; unknown option names raise ``TypeError``."""
    base = base if base is not None else Q2Config()
    if not options:
        return base
    return Q2Config.from_dict({**base.to_dict(), **dict(options)})


def config_from_env(variable: str, options: Optional[Mapping[str, Any]] = None) -> Q2Config:
    """A config from the environment variable ``variable`` (inline JSON object or path to a JSON file of
    ``Q2Config`` fields), then ``options`` on top. Unset variable: the defaults."""
    raw = os.environ.get(variable, "").strip()
    data: dict[str, Any] = {}
    if raw:
        text = raw
        if not raw.startswith("{"):
            if not os.path.isfile(raw):
                raise ValueError(f"${variable} must be a JSON object or the path of a JSON file, got {raw!r}")
            with open(raw, encoding="utf-8") as f:
                text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"${variable} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ValueError(f"${variable} must hold a JSON object of Q2Config fields, got {type(data).__name__}")
    return config_from_options({**data, **dict(options or {})})


class ScorerCache:
    """Keeps one :class:`Q2Scorer` and builds a new one only when the requested config differs from its config.

    A lookup compares configs and builds nothing. A change of device or batch size (not in the signature) also gets
    a new scorer, on the right device. A local model re-saved under the same path while the process runs is not
    noticed: the scorer keeps the weights it loaded (build a new scorer to pick the new files up).
    """

    def __init__(self) -> None:
        self._scorer: Optional[Q2Scorer] = None
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, config: Q2Config) -> Q2Scorer:
        with self._lock:
            if self._scorer is None or self._scorer.config != config:
                self._scorer = Q2Scorer(config)
                self.builds += 1
            return self._scorer


_SHARED: dict[str, ScorerCache] = {}
_SHARED_LOCK = threading.Lock()


def shared_scorer(config: Q2Config, slot: str = "default") -> Q2Scorer:
    """A process-wide scorer for ``config`` (one per ``slot``), so adapters called many times load models once."""
    with _SHARED_LOCK:
        cache = _SHARED.setdefault(slot, ScorerCache())
    return cache.get(config)


def explanation_of(result: ResponseResult) -> str:
    """The status, then one line per valid question: the question, the response's answer and the knowledge's."""
    lines = [f"status: {result.status}" + (f" ({result.error})" if result.error else "")]
    if result.used_fallback:
        lines.append(f"no valid question: end-to-end NLI says {result.fallback_label}")
    for q in result.questions or []:
        lines.append(f"Q: {q.question} | response: {q.response_answer} | knowledge: {q.knowledge_answer} "
                     f"(f1 {q.f1:.2f}, nli {q.nli_label}, score {q.score:.2f})")
    return "\n".join(lines)
