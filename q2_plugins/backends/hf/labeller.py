"""The five-way labeller ``q2 train --labels 5`` writes: a sequence classifier labelling responses with BEGIN's labels
(``--taxonomy-model``), loaded under the one load policy (:mod:`q2_plugins.backends.loading`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from q2_plugins.backends.hf import transformers_models as tm
from q2_plugins.backends.loading import fetch
from q2_plugins.metric.errors import ModelLoadError, SettingError
from q2_plugins.metric.results import ResponseStatus
from q2_plugins.metric.taxonomy import COARSE, LABELS

__all__ = ["TaxonomyModel", "TaxonomyModelError", "StartModelError", "load_for_training"]


class TaxonomyModelError(SettingError, ModelLoadError):
    """A :class:`TaxonomyModel` that cannot be loaded or is not five-way (setting ``taxonomy_model``)."""


class TaxonomyModel:
    """A five-way classifier ``q2 train --labels 5`` wrote, labelling responses with BEGIN's labels.

    ``predict`` takes evidence, previous turns (or None) and responses and returns one label per response, batched.
    ``label(result, ...)`` attaches them to a :class:`~q2_plugins.metric.results.Q2Result` (``label``, ``label3``,
    ``label_reason``), as ``Q2Scorer.label`` does with the text rules.
    """

    def __init__(self, path: str, *, batch_size: int = 32, max_length: int = 256, device: str = "cpu") -> None:
        try:  # the one load policy of every model (q2_plugins.backends.loading), without per-file loading bars
            with tm.quiet_loading():
                self.tokenizer, self.model = tm.load_model("taxonomy", path, None, device, "float32", "classification",
                                                           cpu_kernels="torch")
        except ModelLoadError as e:
            why = e.__cause__ if e.__cause__ is not None else e
            raise TaxonomyModelError("taxonomy_model", f"{path} could not be loaded ({str(why).splitlines()[0]})") \
                from None
        names = [str(self.model.config.id2label[i]).lower() for i in range(self.model.config.num_labels)]
        if sorted(names) != sorted(LABELS):
            raise TaxonomyModelError("taxonomy_model", f"{path} has labels {names}, not BEGIN's five {list(LABELS)}: "
                                                       f"train a five-way one (training labels 5)")
        self.path, self.names, self.batch_size, self.max_length, self.device = path, names, batch_size, max_length, \
            device

    def predict(self, evidence: Sequence[str], previous: Optional[Sequence[Optional[str]]],
                responses: Sequence[str]) -> list[str]:
        import torch

        prev = previous if previous is not None else [None] * len(responses)
        premises = [f"{e} {p}" if p else e for e, p in zip(evidence, prev)]
        out: list[str] = []
        for s in range(0, len(responses), self.batch_size):
            enc = self.tokenizer(premises[s:s + self.batch_size], list(responses[s:s + self.batch_size]),
                                 truncation=True, max_length=self.max_length, padding=True,
                                 return_tensors="pt").to(self.device)
            with torch.no_grad():
                out += [self.names[int(i)] for i in self.model(**enc).logits.argmax(-1)]
        return out

    def label(self, result: Any, *, responses: Sequence[Any], knowledge: Sequence[Any],
              history: Optional[Sequence[Any]] = None) -> Any:
        """Label the responses of ``result`` in place (a row with an error or an empty text is not labelled)."""

        ok = [i for i, r in enumerate(result.responses) if r.status != ResponseStatus.ERROR
              and isinstance(responses[i], str) and isinstance(knowledge[i], str)]
        hist = [history[i] if history is not None and isinstance(history[i], str) else None for i in ok]
        labels = self.predict([knowledge[i] for i in ok], hist, [responses[i] for i in ok]) if ok else []
        for i, label in zip(ok, labels):
            res = result.responses[i]
            res.label, res.label3, res.label_reason = label, COARSE[label], f"{label}: {Path(self.path).name} model"
        return result


class StartModelError(SettingError, ModelLoadError):
    """The model a training run starts from (setting ``base`` or ``init_from``) cannot be loaded."""


def _premise_order(model_labels: dict[int, str], wanted: Sequence[str]) -> tuple[str, ...]:
    """``wanted`` in the order of a starting checkpoint's labels when they are the same labels (its head is kept)."""
    have = [str(model_labels[i]).lower() for i in sorted(model_labels)]
    return tuple(have) if sorted(have) == sorted(wanted) else tuple(wanted)


def load_for_training(start: str, setting: str, labels: Sequence[str]) -> tuple[Any, Any, tuple[str, ...], int]:
    """The sequence classifier a training run starts from (``start``, named by ``setting``), under the one load
    policy, with a head for ``labels`` (in the order of the checkpoint's own labels when they are the same labels):
    the model, its tokenizer, the label order and how many labels the checkpoint had."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    def load(path: str, local: dict[str, Any]) -> tuple[Any, Any, tuple[str, ...], int]:
        config = AutoConfig.from_pretrained(path, **local)
        have = len(getattr(config, "id2label", None) or {})
        order = _premise_order(getattr(config, "id2label", None) or {}, labels)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the load report lists the re-initialised head as a MISMATCH
        try:
            model = AutoModelForSequenceClassification.from_pretrained(
                path, id2label=dict(enumerate(order)), label2id={name: i for i, name in enumerate(order)},
                ignore_mismatched_sizes=True, **local)
        finally:
            hf_logging.set_verbosity(verbosity)
        return model, AutoTokenizer.from_pretrained(path, **local), order, have

    try:
        return fetch("base", start, load)
    except ModelLoadError as e:
        why = e.__cause__ if e.__cause__ is not None else e
        raise StartModelError(setting, f"{start} could not be loaded as a sequence classifier "
                                       f"({str(why).splitlines()[0]}); name a local folder or a hub model") from None
