"""The input-column settings, declared once: where a table keeps the response and the knowledge it is scored
against. Every reader of such a table takes them through a subclass of :class:`TextColumns`: ``q2 score``'s
:class:`~q2_plugins.io.rows.pipeline.RowSpec` (both engines), the meta-evaluation table
(:class:`~q2_plugins.datasets.table.TableColumns`), ``q2 perturb``'s and ``q2 train``'s options, and the readers of
result files that find no recorded columns (:func:`recorded_columns`). The fields are keyword-only, so a subclass
adds its own fields, with or without defaults, in any order. Each field's ``help`` (its metadata) is the text of the
command line's flag for it (``--response-column``), which ``q2_plugins.cli`` generates from these fields."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

__all__ = ["TextColumns", "column_settings", "recorded_columns"]


@dataclass(frozen=True, kw_only=True)
class TextColumns:
    """``response_column``: the field holding the response; ``knowledge_column``: the field holding its knowledge."""

    response_column: str = field(default="response", metadata={"help": "column of the responses"})
    knowledge_column: str = field(default="knowledge", metadata={"help": "column of the knowledge"})


def recorded_columns(columns: TextColumns = TextColumns(), history: Optional[str] = None) -> dict[str, Optional[str]]:
    """``{"response": ..., "knowledge": ..., "history": ...}``: the input columns as a result file's sidecar records
    them (the defaults, for a file without a sidecar)."""
    return {"response": columns.response_column, "knowledge": columns.knowledge_column, "history": history}


def column_settings(options: object) -> dict[str, object]:
    """``{setting: column}`` of every ``*_column`` field of ``options`` (a :class:`TextColumns` subclass)."""
    return {f.name: getattr(options, f.name) for f in fields(options) if f.name.endswith("_column")}  # type: ignore[arg-type]
