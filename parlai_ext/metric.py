"""``--metrics q2`` inside ParlAI's evaluation loop (``eval_model``, ``train_model`` validation, ...).

ParlAI computes metrics in the teacher: ``FixedDialogTeacher.observe`` receives the model's response and feeds
``TeacherMetrics``. The hook (:mod:`parlai_ext.hook`) swaps in :class:`Q2TeacherMetrics` and wraps ``observe`` so that
each response, with the knowledge from the teacher's own message, goes into a buffer shared by the teacher and its
batch clones. The buffer is scored in one :meth:`Q2Scorer.score` call when it holds ``--q2-score-every``
responses and whenever the teacher reports; the result's additive statistics become ParlAI metrics, so partial
results add up exactly to the full-data figures:

==================  ==================================================================================
``q2``              mean Q² over scored responses (sum of scores / responses scored; NaN, shown blank, if none)
``q2_no_nli``       the same without NLI ("Q2 w/o NLI"); only when ``--q2-use-nli true``
``q2_coverage``     share of responses with at least one valid question (errors excluded)
``q2_fallback_rate`` share scored by the end-to-end NLI fallback (errors excluded)
``q2_stderr``       standard error of ``q2``; ``q2_ci_low`` / ``q2_ci_high``: its 95% interval (in [0, 1])
``q2_coverage_ci_*`` ``_low`` / ``_high``: coverage's 95% Wilson interval (all four from the additive sums, as in
                    ``q2 score``'s summary; blank with fewer than two scored responses)
``q2_errors``       responses that could not be scored (SumMetric)
``q2_no_knowledge`` examples whose knowledge is Wizard of Wikipedia's ``no_passages_used`` (SumMetric; not scored)
==================  ==================================================================================

Per-example Q² is not in ``observation['metrics']``: scoring one example at a time is what the buffer avoids.
``--q2-per-example-file FILE.jsonl`` writes every scored example (task, episode and turn ids, response, knowledge,
the full explanation) from the same batched calls. The signature is logged once and, with ``-rf`` /
``--report-filename``, written into the report JSON as ``report.q2_signature`` (``eval_model``).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from typing import IO, Any, Optional

from parlai.core.metrics import AverageMetric, Metric, SumMetric, TeacherMetrics

from parlai_ext.options import NO_KNOWLEDGE, config_from_opt, knowledge_error, knowledge_field, scorer_for
from q2_plugins.io.rows import result_row
from q2_plugins.metric import names as M
from q2_plugins.metric.progress import on_a_terminal
from q2_plugins.metric.results import Q2Stats
from q2_plugins.scorer import Q2Scorer

__all__ = ["Q2TeacherMetrics", "Q2AverageMetric", "Q2FigureMetric", "Q2KnowledgeFieldError", "wants_q2",
           "patch_teachers"]


class Q2KnowledgeFieldError(SystemExit, ValueError):
    """The teacher's message lacks the knowledge field (see ``--q2-knowledge-field``).

    A ``SystemExit`` as well, so that the ``parlai`` command ends with its one-line message and status 1, no traceback
    (as ParlAI's own option errors do); in-process callers can catch it as a ``ValueError``."""


def wants_q2(metrics_list: Optional[str]) -> bool:
    """True when ``--metrics`` asks for Q² (``q2``, or ``all``)."""
    names = {n.strip() for n in (metrics_list or "").split(",")}
    return "q2" in names or "all" in names


class Q2AverageMetric(AverageMetric):
    """An AverageMetric that is NaN (a blank cell in ParlAI's table) when nothing was counted, never 0."""

    def value(self) -> float:
        return math.nan if self._denom == 0 else super().value()


class Q2FigureMetric(Metric):
    """A figure of the run's :class:`Q2Stats` that is no plain average (an interval bound, the standard error): the
    statistics add, and the figure is computed from their sum, as ``q2 score``'s summary does."""

    __slots__ = ("_stats", "_key")

    def __init__(self, stats: Q2Stats, key: str) -> None:
        self._stats = stats
        self._key = key

    def __add__(self, other: Any) -> "Q2FigureMetric":
        if other is None:
            return self
        return Q2FigureMetric(self._stats + other._stats, self._key)

    def value(self) -> float:
        figure = self._stats.summary()[self._key]
        return math.nan if figure is None else float(figure)


class _Pending:
    """Responses waiting for one Q² call; one per teacher, shared with its batch clones."""

    def __init__(self) -> None:
        self.responses: list[Any] = []
        self.knowledge: list[Any] = []
        self.history: list[Any] = []
        self.ids: list[dict[str, Any]] = []
        self.opt: Optional[dict[str, Any]] = None
        self.rows: Optional[IO[str]] = None
        self.config: Any = None
        self.scorer: Any = None
        self.signature_logged = False

    def configure(self, opt: Any) -> None:
        every = opt.get("q2_score_every", 256)
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"--q2-score-every must be a positive integer, got {every!r}")
        self.opt = {"field": knowledge_field(opt), "history": bool(opt.get("q2_history", False)), "every": every}
        self.config = config_from_opt(opt)  # bad options fail here; the models load at the first response to score
        path = opt.get("q2_per_example_file")
        if path:
            self.rows = _per_example_file(path)

    def discard(self) -> None:
        self.responses.clear()
        self.knowledge.clear()
        self.history.clear()
        self.ids.clear()

    def write_rows(self, result: Any) -> None:
        """One JSON line per scored example (:func:`~q2_plugins.io.rows.result_row`): its position in the file, its ids,
        response and knowledge, the core's result with its explanation, then the signature."""
        if self.rows is None:
            return
        for ids, response, knowledge, res in zip(self.ids, self.responses, self.knowledge, result.responses):
            position = _ROW_COUNTS.get(self.rows.name, 0)
            row = result_row(position, {**ids, "response": response, "knowledge": knowledge}, res, explain=True,
                             signature=result.signature, random_weights=result.random_weights)
            self.rows.write(json.dumps(row, ensure_ascii=False, default=repr) + "\n")
            _ROW_COUNTS[self.rows.name] = position + 1
        self.rows.flush()


_ROW_FILES: dict[str, IO[str]] = {}
_ROW_COUNTS: dict[str, int] = {}  # rows written to each open per-example file: the next row's position


def _per_example_file(path: str) -> IO[str]:
    """The open per-example file: created (emptied) by the first teacher of a run that writes it; teachers of later
    tasks of a multi-task run append to it. ``eval_model`` closes it at the end of the run."""
    if path not in _ROW_FILES or _ROW_FILES[path].closed:
        try:
            _ROW_FILES[path] = open(path, "w", encoding="utf-8")
            _ROW_COUNTS[path] = 0
        except OSError as e:
            raise ValueError(f"--q2-per-example-file {path!r} cannot be written: {e}") from None
    return _ROW_FILES[path]


def close_per_example_files() -> None:
    """End of a run: the next run that names a file starts it afresh."""
    while _ROW_FILES:
        _ROW_FILES.popitem()[1].close()
    _ROW_COUNTS.clear()


class Q2TeacherMetrics(TeacherMetrics):
    """ParlAI's ``TeacherMetrics`` plus the Q² buffer (only when ``--metrics`` asks for ``q2`` or ``all``)."""

    def __init__(self, metrics_list: str = "default", shared: Optional[dict[str, Any]] = None) -> None:
        super().__init__(metrics_list=metrics_list, shared=shared)
        if shared is not None and "q2" in shared:
            self.q2: Optional[_Pending] = shared["q2"]
        else:
            self.q2 = _Pending() if wants_q2(metrics_list) else None

    def share(self) -> dict[str, Any]:
        shared = super().share()
        if self.q2 is not None:
            shared["q2"] = self.q2
        return shared

    def report(self) -> dict[str, Metric]:
        self.score_pending()
        if self.q2 is not None:
            patch_report_file()
        return super().report()

    def clear(self) -> None:
        if self.q2 is not None:
            self.q2.discard()
        super().clear()

    def _add_total(self, key: str, value: Metric) -> None:
        # into the running totals only: these figures belong to no single example
        self._data[key] = self._data.get(key) + value

    def add_q2_example(self, teacher: Any, action: Any, response: Any) -> None:
        """Collect one (response, knowledge[, history]); scores the buffer when it is full."""
        pending = self.q2
        if pending is None:
            return
        if pending.opt is None:
            pending.configure(teacher.opt)
        field = pending.opt["field"]  # type: ignore[index]
        if field not in action:
            raise Q2KnowledgeFieldError(knowledge_error(action, field, f"--metrics q2 (teacher {teacher.getID()})"))
        history = _episode_history(teacher, action) if pending.opt["history"] else None  # type: ignore[index]
        knowledge = action[field]
        if knowledge == NO_KNOWLEDGE:
            self.add("q2_no_knowledge", SumMetric(1))
            return
        if pending.scorer is None:
            pending.scorer = scorer_for(pending.config)
        pending.responses.append(response.get("text"))
        pending.knowledge.append(knowledge)
        pending.history.append(history)
        if pending.rows is not None:
            pending.ids.append({"task": teacher.opt.get("task"), "episode_idx": getattr(teacher, "episode_idx", None),
                                "entry_idx": getattr(teacher, "entry_idx", None)})
        if len(pending.responses) >= pending.opt["every"]:  # type: ignore[index]
            self.score_pending()

    def score_pending(self) -> None:
        """Score the buffered responses in one core call and add the results to the running totals."""
        pending = self.q2
        if pending is None or not pending.responses:
            return
        # (bars on a terminal for a long call, as evaluate and reranking show them; a scorer of the caller's own is
        # called as before)
        shown = {"progress": True} if isinstance(pending.scorer, Q2Scorer) and on_a_terminal(len(pending.responses)) \
            else {}
        result = pending.scorer.score(responses=list(pending.responses), knowledge=list(pending.knowledge),
                                      history=list(pending.history) if pending.opt["history"] else None,
                                      explain=pending.rows is not None, **shown)
        pending.write_rows(result)
        pending.discard()
        s = result.stats
        valid = s.n - s.n_errors
        self._add_total(M.Q2.framework_key, Q2AverageMetric(s.sum_score, s.n_scored))
        if pending.scorer.config.use_nli:
            self._add_total(M.Q2_NO_NLI.framework_key, Q2AverageMetric(s.sum_score_no_nli, s.n_scored))
        self._add_total(M.COVERAGE.framework_key, Q2AverageMetric(s.n_with_questions, valid))
        self._add_total(M.FALLBACK_RATE.framework_key, Q2AverageMetric(s.n_fallback, valid))
        for m in (M.Q2_STDERR, M.Q2_CI_LOW, M.Q2_CI_HIGH, M.COVERAGE_CI_LOW, M.COVERAGE_CI_HIGH):
            self._add_total(m.framework_key, Q2FigureMetric(s, m.key))
        self._add_total("q2_errors", SumMetric(s.n_errors))
        if not pending.signature_logged:
            pending.signature_logged = True
            from parlai.utils import logging

            logging.info(f"q2 signature: {result.signature}")


def _episode_history(teacher: Any, action: Any) -> list[str]:
    """The episode before this response: earlier teacher turns and their gold responses, then this turn."""
    past: list[str] = getattr(teacher, "_q2_episode", [])
    text = action.get("text")
    history = past + ([text] if text else [])
    labels = action.get("labels", action.get("eval_labels")) or [""]
    teacher._q2_episode = [] if action.get("episode_done", False) else history + [labels[0]]
    return history


def _wrap_observe(original: Any) -> Any:
    @functools.wraps(original)
    def observe(self: Any, observation: Any) -> Any:
        metrics = getattr(self, "metrics", None)
        if (getattr(metrics, "q2", None) is not None and observation is not None
                and getattr(self, "lastY", None) is not None):
            metrics.add_q2_example(self, self.last_act, observation)
        return original(self, observation)

    observe.__q2_plugins__ = True  # type: ignore[attr-defined]
    return observe


def _with_signature(original: Any) -> Any:
    @functools.wraps(original)
    def _save_eval_stats(opt: Any, report: Any) -> Any:
        close_per_example_files()  # called once at the end of every eval_model run
        if wants_q2(opt.get("metrics")) and isinstance(report, dict):
            try:
                signature = str(scorer_for(config_from_opt(opt), load=False).signature)
            except Exception as e:  # the report is written in any case
                signature = f"unknown ({type(e).__name__}: {e})"
            report = {**report, "q2_signature": signature}
        return original(opt, report)

    _save_eval_stats.__q2_plugins__ = True  # type: ignore[attr-defined]
    return _save_eval_stats


def patch_report_file() -> None:
    """Make ``eval_model``'s report file (``-rf``) carry ``q2_signature`` (and close per-example files there).
    Patched when the teacher reports, the latest moment that still precedes the file: ``python -m
    parlai.scripts.eval_model`` runs that module as ``__main__``, which no import hook sees."""
    for module in (sys.modules.get("parlai.scripts.eval_model"), sys.modules.get("__main__")):
        spec = getattr(module, "__spec__", None)
        original = getattr(module, "_save_eval_stats", None)
        if (getattr(spec, "name", None) == "parlai.scripts.eval_model" and callable(original)
                and not getattr(original, "__q2_plugins__", False)):
            module._save_eval_stats = _with_signature(original)  # type: ignore[union-attr]


def patch_teachers(teachers: Any) -> None:
    """Patch the module ``parlai.core.teachers`` (idempotent)."""
    teachers.TeacherMetrics = Q2TeacherMetrics
    fixed = teachers.FixedDialogTeacher
    if not getattr(fixed.observe, "__q2_plugins__", False):
        fixed.observe = _wrap_observe(fixed.observe)
