"""lm-eval integration: the ``q2`` metrics, ``process_results`` reading the knowledge from the document, the
``q2_rerank`` filter (best of ``repeats: k`` by Q²) and the bundled ``q2_wow`` tasks.

Importing this module registers, in lm-eval's registries:

- metrics ``q2``, ``q2_no_nli``, ``q2_coverage`` (higher is better) and ``q2_fallback_rate`` (lower is better),
  all aggregated by ``mean``, as :mod:`q2_plugins.metric.names` declares them; lm-eval reports each one's standard
  error itself (``q2_stderr``: its closed form for a ``mean``, the same as ``q2 score``'s). A document whose
  response has no score (an error, or no valid question with the fallback off) reports no ``q2`` value, so ``q2``
  is the mean over scored responses, as in the core; it still counts in ``q2_coverage`` / ``q2_fallback_rate``
  unless it is an error.
- ``q2_ci_low``, ``q2_ci_high``: the bounds of ``q2``'s 95% interval, the one ``q2 score`` prints (inside [0, 1]:
  :data:`q2_plugins.metric.names.MEAN_INTERVAL_METHOD`), aggregated from the documents' ``q2`` values.
- ``q2_details``: per document (in ``--log_samples`` output) the full Q² result, the row of ``q2 score --explain``
  plus the signature; in the results, the number of documents that carry one.
- filter ``q2_rerank``: keeps, per document, the candidate with the highest Q² against the document's knowledge.

All documents of a task are scored in one core call, after the task's filters and before lm-eval's per-document
``process_results`` (see :mod:`q2_plugins.integrations.lm_eval.filter_patch`). A task YAML that says ``process_results:
!function q2_plugins.integrations.lm_eval.process_results`` imports this module while lm-eval reads it. The Q² settings
are the task's
``metadata.q2`` (an object of ``Q2Config`` fields; ``--metadata '{"q2": {...}}'`` on the command line), else the
environment variable ``Q2_LM_EVAL_CONFIG`` (a JSON object, or the path of a JSON file), with keyword options of
:func:`make_process_results` / the filter on top. The settings used and the signature land in the task's metadata
in the results JSON. The scorer is built once per configuration.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

try:
    # lm-eval's own aggregations ("mean", ...) are registered when lm_eval.api.metrics is imported; register_metric
    # looks the aggregation up at once, so this import must come first.
    import lm_eval.api.metrics  # noqa: F401
    from lm_eval.api.filter import Filter
    from lm_eval.api.registry import (
        AGGREGATION_REGISTRY,
        filter_registry,
        metric_registry,
        register_aggregation,
        register_filter,
        register_metric,
    )
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "q2_plugins.integrations.lm_eval needs lm-eval: pip install 'q2-plugins[lm-eval]' (lm-eval>=0.4.5)"
    ) from e

from q2_plugins.integrations.lm_eval import filter_patch
from q2_plugins.integrations.lm_eval.filter_patch import CONFIG_ENV, DETAILS_METRIC, Spec, details_row, scorer
from q2_plugins.integrations.rerank import rerank_batch
from q2_plugins.metric import names as M
from q2_plugins.metric.results import ResponseResult, ResponseStatus
from q2_plugins.metric.significance import mean_interval_of

__all__ = [
    "CONFIG_ENV",
    "TASKS_DIR",
    "SAMPLE_DATA",
    "scorer",
    "result_metrics",
    "make_process_results",
    "process_results",
    "q2",
    "Q2RerankFilter",
    "load_q2_wow",
    "wow_prompt",
    "task_manager",
]

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
SAMPLE_DATA = TASKS_DIR / "q2_wow" / "q2_wow_sample.jsonl"


def result_metrics(result: ResponseResult) -> dict[str, float]:
    """Per-document values of the registered metrics (see the module docstring for what is left out)."""
    if result.status == ResponseStatus.ERROR:
        return {}
    out = {M.COVERAGE.framework_key: float(result.status == ResponseStatus.SCORED),
           M.FALLBACK_RATE.framework_key: float(result.used_fallback)}
    if result.score is not None:
        out[M.Q2.framework_key] = result.score
        out[M.Q2_NO_NLI.framework_key] = result.score_no_nli  # type: ignore[assignment]
        for bound in (M.Q2_CI_LOW, M.Q2_CI_HIGH):  # (aggregated into the bounds of q2's interval)
            out[bound.framework_key] = result.score
    return out


def _interval_bound(which: str) -> Callable[[list], float]:
    """The aggregation of ``q2``'s per-document values into the ``which`` (``"low"`` / ``"high"``) bound of its 95%
    interval, the one ``q2 score`` prints (:func:`q2_plugins.metric.significance.mean_interval_of`)."""

    def aggregate(values: list) -> float:
        interval = mean_interval_of(values, M.INTERVAL_CONFIDENCE)[1]
        return math.nan if interval is None else getattr(interval, which)

    aggregate.__name__ = f"q2_ci_{which}"
    return aggregate


_warned_per_document = False


def make_process_results(knowledge: str = "knowledge", history: Optional[str] = None,
                         **options: Any) -> Callable[[dict, list], dict]:
    """A ``process_results(doc, results)`` for lm-eval that scores the model's response against
    ``doc[knowledge]`` (a string or a list of sentences). ``options`` are ``Q2Config`` fields, on top of the
    task's settings. Inside lm-eval's evaluator the task's documents are scored in one call beforehand; called
    on its own, it scores its one document."""
    spec = Spec(knowledge, history, options)

    def process_results(doc: dict, results: list) -> dict[str, Any]:
        response, know, hist = spec.inputs(doc, results)
        found = filter_patch.STASH.lookup(spec, doc, results)
        if found is not None:
            result, signature = found
            details = details_row(result, response, know, signature, filter_patch.random_weights_of(spec))
            return {**result_metrics(result), DETAILS_METRIC: details}
        global _warned_per_document
        if not _warned_per_document:
            _warned_per_document = True
            warnings.warn("q2: scoring lm-eval documents one at a time (the task was not prepared by "
                          "q2_plugins.integrations.lm_eval.filter_patch); expect it to be slow", RuntimeWarning,
                          stacklevel=2)
        res = scorer(**options).score(responses=[response], knowledge=[know],
                                      history=None if hist is None else [hist])
        return result_metrics(res.responses[0])

    process_results.__q2_plugins__ = spec  # type: ignore[attr-defined]
    return process_results


#: ``process_results`` for documents with a ``knowledge`` field.
process_results = make_process_results()


def q2(references: list, predictions: list, **options: Any) -> dict[str, float]:
    """The registered ``q2`` metric for tasks *without* ``process_results``: lm-eval passes ``doc_to_target`` as
    the reference, so such a task makes ``doc_to_target`` return the knowledge. ``options`` (the metric's keys in
    ``metric_list``, other than ``aggregation`` / ``higher_is_better``) are ``Q2Config`` fields. Inside lm-eval's
    evaluator the task's documents were scored in one call beforehand (see :mod:`.filter_patch`)."""
    if len(predictions) == 1 and len(references) == 1:
        found = filter_patch.STASH.lookup_metric(options, predictions[0], references[0])
        if found is not None:  # the task was scored in one call after its filters
            return result_metrics(found[0])
    res = scorer(**options).score(responses=list(predictions), knowledge=list(references))
    return result_metrics(res.responses[0]) if len(res) == 1 else res.stats.summary()


q2.__q2_plugins_metric__ = True  # type: ignore[attr-defined]


def _register() -> None:
    """Register the metrics and the filter once (re-importing this module must not fail lm-eval's registry)."""
    for m in M.PER_RESPONSE:  # lm-eval aggregates per-document values; it computes their standard error itself
        if m.framework_key not in metric_registry:
            register_metric(metric=m.framework_key, higher_is_better=m.higher_is_better, aggregation="mean")(q2)
    for m, which in ((M.Q2_CI_LOW, "low"), (M.Q2_CI_HIGH, "high")):  # q2's interval, its bounds as metrics
        if m.framework_key not in AGGREGATION_REGISTRY:
            register_aggregation(m.framework_key)(_interval_bound(which))
        if m.framework_key not in metric_registry:
            register_metric(metric=m.framework_key, higher_is_better=m.higher_is_better,
                            aggregation=m.framework_key)(q2)
    if "q2_rerank" not in filter_registry:
        register_filter("q2_rerank")(Q2RerankFilter)
    filter_patch.install()


class Q2RerankFilter(Filter):
    """Keep, per document, the candidate response with the highest Q² against the document's knowledge.

    For tasks with ``repeats: k``: every candidate of every document is scored in one call; the output per document
    is ``[best]`` (chain ``take_first`` after it, as with ``majority_vote``). Ties and unscored candidates follow
    :func:`q2_plugins.integrations.rerank.rerank`. YAML options: ``knowledge`` (document field, default ``knowledge``)
    and any
    ``Q2Config`` field.
    """

    def __init__(self, knowledge: str = "knowledge", **options: Any) -> None:
        self.knowledge = knowledge
        self.options = options

    def apply(self, resps: Any, docs: list) -> list:
        candidates = [[r] if isinstance(r, str) else list(r) for r in resps]
        field = Spec(self.knowledge, None, self.options).field
        knowledge = [field(doc, self.knowledge, "knowledge") for doc in docs]
        the_scorer = scorer(**self.options)
        ranked = rerank_batch(candidates, knowledge, scorer=the_scorer, explain=True)
        config = getattr(the_scorer, "config", None)
        for r, know in zip(ranked, knowledge if config is not None else []):  # the task's call need not rescore
            filter_patch.stash_results(config, [(c, know, None) for c in r.candidates], r.results, r.signature)
        return [[r.best_text] for r in ranked]


_register()


# -- the bundled q2_wow task ------------------------------------------------------------------------------------------
BUNDLED_TASKS = ("q2_wow", "q2_wow_rerank")


def _without_bundled_kwargs_note(record: logging.LogRecord) -> bool:
    """lm-eval warns, for every task whose data come from a function, that such a function takes keyword arguments
    from ``--metadata`` (with an example of another task's); the bundled tasks' one argument (``q2_wow_data``) is in
    their docs, so the note is left out for them, and only for them."""
    message = record.getMessage()
    return not any(message.startswith(f"{task}: Custom kwargs can be passed") for task in BUNDLED_TASKS)


logging.getLogger("lm_eval.api.task").addFilter(_without_bundled_kwargs_note)


def load_q2_wow(q2_wow_data: Optional[str] = None, **_metadata: Any) -> Any:
    """``custom_dataset`` of the ``q2_wow`` tasks: the bundled 8-row sample, or the WoW-style JSONL given with
    ``--metadata '{"q2_wow_data": "FILE.jsonl"}'`` (fields: ``history`` list of turns, ``knowledge``, ``response``)."""
    import datasets

    path = Path(q2_wow_data) if q2_wow_data else SAMPLE_DATA
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows):
        missing = {"history", "knowledge", "response"} - set(row)
        if missing:
            raise ValueError(f"{path}: line {i + 1} lacks the field(s) {sorted(missing)}")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def wow_prompt(doc: dict) -> str:
    """Wizard-of-Wikipedia prompt: the knowledge, then the turns (the apprentice speaks last), then ``Wizard:``."""
    turns = doc["history"] if isinstance(doc["history"], list) else [doc["history"]]
    speakers = ["Apprentice", "Wizard"]
    first = (len(turns) - 1) % 2  # the last turn is the apprentice's
    lines = [f"Knowledge: {doc['knowledge']}"]
    lines += [f"{speakers[(first + i) % 2]}: {turn}" for i, turn in enumerate(turns)]
    return "\n".join(lines) + "\nWizard:"


def task_manager(include_path: Any = None, **kwargs: Any) -> Any:
    """An lm-eval ``TaskManager`` that also finds the bundled tasks (``q2_wow``, ``q2_wow_rerank``)."""
    from lm_eval.tasks import TaskManager

    extra = [] if include_path is None else (list(include_path) if isinstance(include_path, (list, tuple))
                                             else [include_path])
    return TaskManager(include_path=[str(TASKS_DIR), *map(str, extra)], **kwargs)
