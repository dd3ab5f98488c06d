"""The input-column settings, declared once: where a table keeps the response and the knowledge it is scored
against. Every reader of such a table takes them through a subclass of :class:`TextColumns`: ``q2 score``'s
:class:`~q2_plugins.io.rows.pipeline.RowSpec` (both engines), the meta-evaluation table
(:class:`~q2_plugins.datasets.table.TableColumns`) and ``q2 perturb``'s options. The fields are keyword-only, so a
subclass adds its own fields, with or without defaults, in any order."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["TextColumns", "column_settings"]


@dataclass(frozen=True, kw_only=True)
class TextColumns:
    """``response_column``: the field holding the response; ``knowledge_column``: the field holding its knowledge."""

    response_column: str = "response"
    knowledge_column: str = "knowledge"


def column_settings(options: object) -> dict[str, object]:
    """``{setting: column}`` of every ``*_column`` field of ``options`` (a :class:`TextColumns` subclass)."""
    return {f.name: getattr(options, f.name) for f in fields(options) if f.name.endswith("_column")}  # type: ignore[arg-type]
