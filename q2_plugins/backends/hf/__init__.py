"""The default backend, ``hf``: transformers models from the Hugging Face hub or a directory.

QG is an answer-aware seq2seq model, QA an extractive model with a no-answer option, NLI a three-way sequence
classifier (:mod:`.transformers_models`); coreference an F-coref checkpoint (:mod:`.coref`); the labeller a five-way
classifier of ``q2 train`` (:class:`.labeller.TaxonomyModel`). All load under the one load policy
(:mod:`q2_plugins.backends.loading`) and are named by content or hub commit
(:func:`q2_plugins.metric.signature.model_id`), with the dtype they run in. ``q2 prefetch`` copies their published files
(:mod:`.prefetch`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

from q2_plugins.backends.accel.device import check_dtype, fitted_batching
from q2_plugins.backends.hf import transformers_models as tm
from q2_plugins.backends.hf.prefetch import prefetch_model
from q2_plugins.metric.config import MODEL_KINDS, Q2Config
from q2_plugins.metric.signature import model_id

__all__ = ["HFBackend", "BACKEND"]


def _revision(role: str, config: "Q2Config") -> Optional[str]:
    return None if role == "taxonomy" else getattr(config, f"{role}_revision")


class HFBackend:
    """Components of transformers models (see the module docstring)."""

    def identity(self, role: str, name: str, config: "Q2Config") -> str:
        ident = model_id(name, _revision(role, config))
        if role == "taxonomy":
            return ident
        if role == "coref":
            from q2_plugins.backends.hf.coref import COREF_IMPL  # (lazy: torch)

            return f"{COREF_IMPL}:{ident}[float32]"
        return f"{ident}[{config.role_dtype(role)}]"

    def load(self, role: str, name: str, config: "Q2Config") -> Any:
        c = config
        if role == "coref":
            from q2_plugins.backends.hf.coref import FCoref, load_fcoref  # (lazy: torch)

            tok, model = load_fcoref(name, c.coref_revision, c.device)
            return FCoref(tok, model, batch_size=1 if c.per_item else c.batch_size or 32, sort_by_length=not c.per_item)
        if role == "taxonomy":
            # (lazy: the labeller, and the taxonomy it reads, load only when labels are asked for)
            from q2_plugins.backends.hf.labeller import TaxonomyModel

            return TaxonomyModel(name, device=c.device)

        dtype_setting = f"{role}_dtype" if getattr(c, f"{role}_dtype") else "dtype"
        check_dtype(c.role_dtype(role), c.role_device(role), dtype_setting)
        tok, model = tm.load_model(role, name, _revision(role, c), c.role_device(role), c.role_dtype(role),
                                   MODEL_KINDS[role], c.cpu_kernels)
        rt = c.role_runtime(role)
        size, tokens = fitted_batching(model, rt.device, c.role_dtype(role), rt.batch_size, rt.batch_tokens,
                                       auto_size=rt.auto_batch_size, auto_tokens=rt.auto_batch_tokens,
                                       beams=c.qg_num_beams if role == "qg" and c.qg_decoding == "beam" else 1)
        batching = {"batch_size": size, "batch_tokens": tokens, "sort_by_length": rt.sort_by_length}
        if role == "qg":
            return tm.HFQuestionGenerator(tok, model, **c.stage_settings("qg"), **batching, search=c.qg_search)
        if role == "qa":
            return tm.HFQuestionAnswerer(tok, model, **c.stage_settings("qa"), **batching, pack_windows=c.pack_windows)
        return tm.HFNLI(tok, model, **c.stage_settings("nli"), model_name=name, **batching,
                        pack_windows=c.pack_windows)

    def prefetch(self, role: str, name: str, config: "Q2Config", target: "Union[str, os.PathLike[str]]") -> Path:
        """The model's published files copied into ``target`` (:func:`.prefetch.prefetch_model`), then loaded once
        from there on the CPU, so that a copy that cannot load fails here; returns ``target``."""

        copied = prefetch_model(role, name, _revision(role, config), target)
        if role == "coref":
            from q2_plugins.backends.hf.coref import load_fcoref  # (lazy: torch)

            load_fcoref(str(copied))
        else:
            tm.load_model(role, str(copied), None, "cpu", "float32", MODEL_KINDS[role], cpu_kernels="torch")
        return copied


BACKEND = HFBackend()
