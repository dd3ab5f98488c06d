"""Q² as a scorer of lm-eval's 0.5 pre-release (0.5.0.dev1), where batch "scorers" replace the filters and
``get_metric`` is gone (the 0.4 front end, :mod:`q2_plugins.integrations.lm_eval`, needs both).

Importing this module registers the scorer ``q2``: a generation task that says ``scorer: q2`` (or ``{type: q2, kwargs:
{options: {...}}}``) is scored against its ``doc_to_target`` (the knowledge), all the task's documents and repeats in
**one** core call (:meth:`Q2Scorer.score`). Per document: ``q2`` and ``q2_no_nli``, both aggregated by ``mean``; a
response without a score (an error, or no valid question with the fallback off) has no value, so the task's figure is
the mean over scored responses, as in the core. The settings: the environment variable ``Q2_LM_EVAL_CONFIG`` (as for
0.4), then the scorer's ``options``. The signature of the last call is :data:`Q2LmEvalScorer.signature`.

Needs ``pip install 'q2-plugins[lm-eval-next]'`` (lm-eval 0.5.0.dev1; the 0.4 front end needs 0.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Optional

try:
    from lm_eval.api.registry import register_scorer
    from lm_eval.scorers import GenScorer, ScoredDoc
except (ModuleNotFoundError, ImportError) as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.lm_eval_scorer needs lm-eval 0.5: pip install 'q2-plugins[lm-eval-next]' ({e})"
    ) from e

from q2_plugins.integrations import adapters
from q2_plugins.metric import names as M

__all__ = ["Q2LmEvalScorer", "CONFIG_ENV"]

#: the environment variable of the settings, as for the 0.4 front end
CONFIG_ENV = "Q2_LM_EVAL_CONFIG"
_FIGURES = (M.Q2, M.Q2_NO_NLI)


@register_scorer("q2")
@dataclass
class Q2LmEvalScorer(GenScorer):
    """The ``q2`` scorer: every response of every document against its ``doc_to_target``, in one core call."""

    default_metric_cfg: ClassVar[Any] = [
        {"metric": m.framework_key, "aggregation": "mean", "higher_is_better": m.higher_is_better} for m in _FIGURES]
    options: dict = field(default_factory=dict)
    #: the signature of the last core call (None before one)
    signature: ClassVar[Optional[str]] = None
    calls: ClassVar[int] = 0  # core calls made

    def score_instances(self, instances: Mapping[int, list]) -> dict[int, ScoredDoc]:
        inputs = {doc_id: self._extract_inputs(doc_instances) for doc_id, doc_instances in instances.items()}
        pairs = [(doc_id, str(response), reference) for doc_id, (reference, responses, _) in inputs.items()
                 for response in responses]
        config = adapters.config_from_env(CONFIG_ENV, self.options)  # a bad setting fails here, before any model
        res = adapters.shared_scorer(config, slot="lm_eval_next").score(
            responses=[p[1] for p in pairs], knowledge=[p[2] for p in pairs])
        type(self).signature, type(self).calls = str(res.signature), type(self).calls + 1
        scores: dict[int, dict[str, list[float]]] = {doc_id: {} for doc_id in inputs}
        for (doc_id, _, _), result in zip(pairs, res.responses):
            if result.score is not None:
                for m, value in zip(_FIGURES, (result.score, result.score_no_nli)):
                    scores[doc_id].setdefault(m.framework_key, []).append(float(value))  # type: ignore[arg-type]
        return {doc_id: ScoredDoc(doc_id=doc_id, reference=inputs[doc_id][0], scores=s) for doc_id, s in scores.items()}
