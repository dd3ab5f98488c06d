"""The one row pipeline of ``q2 score``, used by the local and the Ray engine alike: a record (one dict per input
row, or ``{"__error__": message}`` for one that could not be read) becomes the scorer's columns; a record that could
not be read or lacks a field is scored as missing and gets its problem as its error; every record gets one
:class:`~q2_plugins.metric.results.ResponseResult`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from q2_plugins.io.columns import TextColumns, recorded_columns
from q2_plugins.io.inputs import as_value, missing_fields

__all__ = ["RowSpec", "problems_of", "score_records"]


@dataclass(frozen=True, kw_only=True)
class RowSpec(TextColumns):
    """Which fields of a record are scored (the response and knowledge columns of :class:`TextColumns`, and the
    history for coreference), and what each result carries."""

    history_column: Optional[str] = None
    explain: bool = False
    labels: bool = False

    @property
    def settings(self) -> tuple[str, ...]:
        """The settings that name the fields every record needs: response, knowledge (and history when named)."""
        return ("response_column", "knowledge_column") + (("history_column",) if self.history_column else ())

    @property
    def required(self) -> tuple[str, ...]:
        """The fields every record needs, in the order of :attr:`settings`."""
        return tuple(getattr(self, setting) for setting in self.settings)

    def columns(self) -> dict[str, Optional[str]]:
        """The column names used, as the sidecar records them."""
        return recorded_columns(self, self.history_column)


def problems_of(records: Sequence[dict[str, Any]], spec: RowSpec) -> list[Optional[str]]:
    """Per record: why it cannot be scored (it could not be read, or lacks a field), or None."""

    return [r["__error__"] if "__error__" in r else missing_fields(r, spec.required) for r in records]


def score_records(scorer: Any, records: Sequence[dict[str, Any]], spec: RowSpec, *, progress: Any = False,
                  labeller: Any = None) -> Any:
    """The scorer's :class:`~q2_plugins.metric.results.Q2Result` for ``records``, one response per record in order; a
    record that cannot be scored is scored as missing and its problem is its row's error. With ``labeller`` (a trained
    five-way model, :class:`~q2_plugins.backends.hf.labeller.TaxonomyModel`) the rows are labelled by it, not by the
    text rules."""

    problems = problems_of(records, spec)
    # (a JSON file's NaN / Infinity is the number it stands for: refused as any number is, never scored as text)
    values = [[None if p else as_value(r.get(c)) for r, p in zip(records, problems)] for c in spec.required]
    history = values[2] if spec.history_column else None
    result = scorer.score(responses=values[0], knowledge=values[1], history=history, explain=spec.explain,
                          progress=progress, label=spec.labels and labeller is None)
    if labeller is not None:
        labeller.label(result, responses=values[0], knowledge=values[1], history=history)
    for res, problem in zip(result.responses, problems):
        if problem:
            res.error = problem
    return result
