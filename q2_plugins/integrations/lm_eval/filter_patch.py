"""One core call per task: lm-eval's ``process_results`` sees one document at a time, so Q² is scored before it runs.

lm-eval applies a task's filters to all its responses at once (``Task.apply_filters``), then calls
``process_results(doc, results)`` per document. :func:`install` wraps ``apply_filters``: after the filters, when the
task's ``process_results`` is one made by :func:`q2_plugins.integrations.lm_eval.make_process_results`, every (filtered
response, knowledge[, history]) of the task, over all filter pipelines, goes into one :meth:`Q2Scorer.score` call
with ``explain=True``; the results wait in :data:`STASH` and ``process_results`` takes its document's result from
there. The task's Q² settings come from its ``metadata`` (key ``q2``, also ``--metadata '{"q2": {...}}'``), else
from ``$Q2_LM_EVAL_CONFIG``; the settings used and the signature are written back into the task's ``metadata``
(keys ``q2`` and ``q2_signature``), which lm-eval records in the results JSON (``configs.<task>.metadata``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections import defaultdict
from typing import Any, Iterator, Mapping, Optional, Sequence

from q2_plugins.integrations.adapters import config_from_env, config_from_options, shared_scorer
from q2_plugins.io.rows import result_row
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.results import ResponseResult
from q2_plugins.scorer import Q2Scorer

__all__ = ["CONFIG_ENV", "METADATA_KEY", "SIGNATURE_KEY", "DETAILS_METRIC", "STASH", "Spec", "install",
           "task_settings", "scorer", "details_row", "random_weights_of"]

CONFIG_ENV = "Q2_LM_EVAL_CONFIG"
METADATA_KEY = "q2"
SIGNATURE_KEY = "q2_signature"
DETAILS_METRIC = "q2_details"

_LOCAL = threading.local()


def task_settings(metadata: Any) -> Optional[dict[str, Any]]:
    """The Q² settings in a task's ``metadata`` (``q2``: an object of ``Q2Config`` fields, a JSON string or the path
    of a JSON file), or None when the task names none."""
    if not isinstance(metadata, Mapping) or metadata.get(METADATA_KEY) is None:
        return None
    value = metadata[METADATA_KEY]
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            try:
                with open(text, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ValueError(f"task metadata {METADATA_KEY!r} must be an object of Q2Config fields, a JSON "
                                 f"string or the path of a JSON file; could not read {value!r}: {e}") from None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"task metadata {METADATA_KEY!r} is not valid JSON: {e}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"task metadata {METADATA_KEY!r} must be an object of Q2Config fields, "
                         f"got {type(value).__name__}")
    return dict(value)


def _config(options: Mapping[str, Any]) -> Q2Config:
    """The running task's settings (or ``$Q2_LM_EVAL_CONFIG``) with ``options`` on top."""
    settings = getattr(_LOCAL, "settings", None)
    if settings is None:
        return config_from_env(CONFIG_ENV, options)
    return config_from_options({**settings, **dict(options)})


def scorer(**options: Any) -> Q2Scorer:
    """The process-wide scorer for the running task's settings (or ``$Q2_LM_EVAL_CONFIG``) plus ``options``."""
    return shared_scorer(_config(options), slot="lm_eval")


@contextlib.contextmanager
def _task_settings(settings: Optional[dict[str, Any]]) -> Iterator[None]:
    previous = getattr(_LOCAL, "settings", None)
    _LOCAL.settings = settings
    try:
        yield
    finally:
        _LOCAL.settings = previous


def _key(config: Q2Config, response: Any, knowledge: Any, history: Any) -> tuple[Q2Config, str]:
    return config, json.dumps([response, knowledge, history], default=repr, sort_keys=True)


class _Stash:
    """Results scored ahead of ``process_results``, by (config, response, knowledge, history). Each entry is
    counted once per document that will ask for it and dropped when the last one has."""

    def __init__(self) -> None:
        self.results: dict[tuple[Q2Config, str], tuple[ResponseResult, str]] = {}
        self.wanted: dict[tuple[Q2Config, str], int] = defaultdict(int)
        self.configs: dict[int, Q2Config] = {}  # id(Spec) -> the config its task was scored with
        self.metric_configs: dict[str, Q2Config] = {}  # the ``q2`` metric's options -> the config they gave

    def put(self, key: tuple[Q2Config, str], result: ResponseResult, signature: str) -> None:
        self.results[key] = (result, signature)

    def take(self, key: tuple[Q2Config, str]) -> Optional[tuple[ResponseResult, str]]:
        found = self.results.get(key)
        if found is not None and key in self.wanted:
            self.wanted[key] -= 1
            if self.wanted[key] <= 0:
                del self.wanted[key]
                del self.results[key]
        return found

    def lookup(self, spec: "Spec", doc: Mapping[str, Any], results: Any) -> Optional[tuple[ResponseResult, str]]:
        """The result scored ahead for this document of a task using ``spec``, or None."""
        config = self.configs.get(id(spec))
        return None if config is None else self.take(spec.key(config, doc, results))

    def lookup_metric(self, options: Mapping[str, Any], prediction: Any, reference: Any
                      ) -> Optional[tuple[ResponseResult, str]]:
        """The result scored ahead for one call of the registered ``q2`` metric of the running task, or None."""
        config = self.metric_configs.get(_options_key(options))
        return None if config is None else self.results.get(_key(config, prediction, reference, None))

    def clear(self) -> None:
        self.results.clear()
        self.wanted.clear()
        self.configs.clear()
        self.metric_configs.clear()


STASH = _Stash()


class Spec:
    """What a ``process_results`` made by ``make_process_results`` reads from a document, and its options."""

    def __init__(self, knowledge: str, history: Optional[str], options: Mapping[str, Any]) -> None:
        self.knowledge = knowledge
        self.history = history
        self.options = dict(options)

    def field(self, doc: Mapping[str, Any], key: str, what: str) -> Any:
        if key not in doc:
            raise KeyError(f"q2: the document has no {what} field {key!r} (fields: {sorted(doc)}); name it with "
                           f"make_process_results({what}=...) or the filter's `{what}:` option")
        return doc[key]

    def inputs(self, doc: Mapping[str, Any], results: Any) -> tuple[Any, Any, Any]:
        """(response, knowledge, history) of one document, as lm-eval hands them to ``process_results``."""
        history = None if self.history is None else self.field(doc, self.history, "history")
        return first_response(results), self.field(doc, self.knowledge, "knowledge"), history

    def key(self, config: Q2Config, doc: Mapping[str, Any], results: Any) -> tuple[Q2Config, str]:
        return _key(config, *self.inputs(doc, results))


def first_response(results: Any) -> Any:
    """lm-eval passes one entry per request; a filter may leave a list of candidates: take the first."""
    value = results[0] if isinstance(results, (list, tuple)) else results
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return value


def details_row(result: ResponseResult, response: Any, knowledge: Any, signature: str,
                random_weights: Sequence[str] = ()) -> dict[str, Any]:
    """A logged sample's Q² result: the row of ``q2 score --explain`` (plus the signature, and the random-weight test
    models when some); its ``row`` is None (the sample's ``doc_id`` names the document)."""
    return result_row(None, {"response": response, "knowledge": knowledge}, result, explain=True, signature=signature,
                      random_weights=random_weights)


def details_aggregation(rows: list[Any]) -> int:
    """``q2_details`` aggregated, for an lm-eval that has no ``_compute_task_aggregations`` to leave it out of the
    results (see :func:`install`): how many documents carry their Q² result in the logged samples."""
    return len(rows)


def _without_details(original: Any) -> Any:
    """lm-eval's ``_compute_task_aggregations`` for a Q² task without ``q2_details``: the details are each sample's
    Q² result, kept in the logged samples, not a metric (their count would show as a row of the results table)."""
    @functools.wraps(original)
    def compute(task: Any, raw_metrics: Any, *args: Any, **kwargs: Any) -> Any:
        process_results = getattr(getattr(task, "config", None), "process_results", None)
        if isinstance(getattr(process_results, "__q2_plugins__", None), Spec):
            raw_metrics = {key: values for key, values in raw_metrics.items() if key[0] != DETAILS_METRIC}
        return original(task, raw_metrics, *args, **kwargs)

    compute.__q2_plugins__ = True  # type: ignore[attr-defined]
    return compute


def random_weights_of(spec: "Spec") -> tuple[str, ...]:
    """The random-weight test models among those the task of ``spec`` was scored with (for its logged samples)."""
    config = STASH.configs.get(id(spec))
    return () if config is None else tuple(getattr(shared_scorer(config, slot="lm_eval"), "random_weights", ()))


def stash_results(config: Q2Config, inputs: list[tuple[Any, Any, Any]], results: list[ResponseResult],
                  signature: str) -> None:
    """Keep results scored elsewhere (the rerank filter) so that the task's call does not score them again."""
    for (response, knowledge, history), result in zip(inputs, results):
        STASH.put(_key(config, response, knowledge, history), result, signature)


def _documents(task: Any) -> list[tuple[str, Any, Any]]:
    """(filter name, document, that document's responses) as the evaluator will pass them to ``process_results``."""
    by_doc: dict[Any, list[Any]] = defaultdict(list)
    for inst in task.instances:
        by_doc[inst.doc_id].append(inst)
    out = []
    for instances in by_doc.values():
        instances.sort(key=lambda inst: inst.idx)
        for name in instances[0].filtered_resps:
            out.append((name, instances[0].doc, [inst.filtered_resps[name] for inst in instances]))
    return out


def _options_key(options: Mapping[str, Any]) -> str:
    return json.dumps(dict(options), sort_keys=True, default=repr)


def _score_ahead(config: Q2Config, items: dict[tuple[Q2Config, str], tuple[Any, Any, Any]],
                 with_history: bool) -> str:
    """Score the items not stashed yet in one core call, stash them; returns the signature."""
    the_scorer = shared_scorer(config, slot="lm_eval")
    todo = {key: item for key, item in items.items() if key not in STASH.results}
    if not todo:
        return the_scorer.signature
    keys, rows = list(todo), list(todo.values())
    result = the_scorer.score(responses=[r[0] for r in rows], knowledge=[r[1] for r in rows],
                              history=[r[2] for r in rows] if with_history else None, explain=True)
    for key, res in zip(keys, result.responses):
        STASH.put(key, res, result.signature)
    return result.signature


def _record(task: Any, config: Q2Config, signature: str) -> None:
    """The settings used and the signature, in the task's metadata (saved in the results JSON)."""
    metadata = task.config.metadata if isinstance(task.config.metadata, dict) else {}
    metadata[METADATA_KEY] = config.to_dict()
    metadata[SIGNATURE_KEY] = str(signature)
    task.config.metadata = metadata


def prepare_metric_task(task: Any) -> None:
    """For a task that lists the registered ``q2`` metric without Q²'s ``process_results`` (``doc_to_target`` is
    the knowledge): score every document in one core call per metric configuration, as lm-eval will ask."""
    functions = getattr(task, "_metric_fn_list", None) or {}
    names = [n for n, fn in functions.items() if getattr(fn, "__q2_plugins_metric__", False)]
    if (not names or callable(getattr(task.config, "process_results", None)) or not task.instances
            or getattr(task, "OUTPUT_TYPE", None) != "generate_until" or task.config.doc_to_choice is not None
            or getattr(task, "multiple_target", False)):
        return  # lm-eval then calls the metric per document, which scores on its own
    settings = task_settings(task.config.metadata)
    documents = _documents(task)
    for name in names:
        options = getattr(task, "_metric_fn_kwargs", {}).get(name, {})
        if _options_key(options) in STASH.metric_configs:
            continue
        with _task_settings(settings):
            config = _config(options)
        STASH.metric_configs[_options_key(options)] = config
        items = {}
        for _, doc, results in documents:
            response, gold = results[0], task.doc_to_target(doc)
            if type(gold) is not type(response) and not isinstance(response, list):
                gold = type(response)(gold)  # as lm-eval casts the reference before calling the metric
            items[_key(config, response, gold, None)] = (response, gold, None)
        _record(task, config, _score_ahead(config, items, with_history=False))


def prepare_task(task: Any) -> None:
    """Score every document of ``task`` in one core call (after its filters ran) and record settings and signature
    in its metadata. Tasks whose ``process_results`` is not Q²'s are left alone."""
    spec = getattr(getattr(task.config, "process_results", None), "__q2_plugins__", None)
    if not isinstance(spec, Spec):
        prepare_metric_task(task)
        return
    if not task.instances:
        return
    settings = task_settings(task.config.metadata)
    with _task_settings(settings):
        config = _config(spec.options)
    items: dict[tuple[Q2Config, str], tuple[Any, Any, Any]] = {}
    for _, doc, results in _documents(task):
        item = spec.inputs(doc, results)
        key = _key(config, *item)
        STASH.wanted[key] += 1
        items.setdefault(key, item)
    STASH.configs[id(spec)] = config
    _record(task, config, _score_ahead(config, items, with_history=spec.history is not None))
    aggregations = task.aggregation()
    if isinstance(aggregations, dict):
        aggregations.setdefault(DETAILS_METRIC, details_aggregation)


def _wrap(original: Any) -> Any:
    @functools.wraps(original)
    def apply_filters(self: Any, *args: Any, **kwargs: Any) -> Any:
        STASH.clear()  # tasks are processed one after the other: what is left belongs to none of them
        with _task_settings(task_settings(getattr(self.config, "metadata", None))):
            out = original(self, *args, **kwargs)
        prepare_task(self)
        return out

    apply_filters.__q2_plugins__ = True  # type: ignore[attr-defined]
    return apply_filters


def install() -> None:
    """Wrap lm-eval's ``apply_filters`` (idempotent): Q² tasks are scored in one call after their filters."""
    from lm_eval.api.task import ConfigurableTask, Task

    for cls in (Task, ConfigurableTask):
        original = cls.__dict__.get("apply_filters")
        if original is not None and not getattr(original, "__q2_plugins__", False):
            cls.apply_filters = _wrap(original)  # type: ignore[method-assign]
    try:
        from lm_eval import evaluator_utils
    except ImportError:  # pragma: no cover - an lm-eval without it: q2_details shows as a count (details_aggregation)
        return
    aggregate = getattr(evaluator_utils, "_compute_task_aggregations", None)
    if aggregate is not None and not getattr(aggregate, "__q2_plugins__", False):
        evaluator_utils._compute_task_aggregations = _without_details(aggregate)
