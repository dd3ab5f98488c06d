"""The one row layout both engines write (``docs/usage.md``): ``row`` (the record's position in its input file), the
record's input fields (one named like a field of the layout kept as ``input_<name>``, see :func:`kept_name`), then
the result fields of :data:`~q2_plugins.results.RESULT_FIELDS` (with explanations, those of
:data:`~q2_plugins.results.EXPLANATION_FIELDS`)."""

from __future__ import annotations

from typing import Any, Iterable

from ..results import EXPLANATION_FIELDS, RESULT_FIELDS, ResponseResult

__all__ = ["ROW_FIELD", "INPUT_PREFIX", "RESERVED_FIELDS", "kept_name", "result_fields", "result_row"]

#: the first field of every result row: the record's position in its input file (0-based)
ROW_FIELD = "row"
#: an input field named like a field of the layout is kept under this prefix (``score`` -> ``input_score``)
INPUT_PREFIX = "input_"
#: the names of the layout an input field may not take
RESERVED_FIELDS = frozenset({ROW_FIELD, *RESULT_FIELDS, *EXPLANATION_FIELDS})


def kept_name(name: str, reserved: Iterable[str] = RESERVED_FIELDS) -> str:
    """The name an input field keeps in a result row: :data:`INPUT_PREFIX` before it when, without its leading
    prefixes, it is a field of the layout (``score`` -> ``input_score``, ``input_score`` -> ``input_input_score``),
    so no two fields get one name."""
    base = name
    while base.startswith(INPUT_PREFIX):
        base = base[len(INPUT_PREFIX):]
    return INPUT_PREFIX + name if base in reserved else name


def result_fields(res: ResponseResult, explain: bool = False) -> dict[str, Any]:
    """The result fields of one response, in the declared order (:data:`~q2_plugins.results.RESULT_FIELDS`; with
    ``explain`` also :data:`~q2_plugins.results.EXPLANATION_FIELDS`, None where the response has none)."""
    values = res.to_dict()
    names = [*RESULT_FIELDS, *(EXPLANATION_FIELDS if explain else ())]
    return {name: values.get(name) for name in names}


def result_row(index: int, record: dict[str, Any], res: ResponseResult, explain: bool = False) -> dict[str, Any]:
    """One row of a result file, as both engines write it: ``row`` (the record's position), the record's input
    fields (renamed by :func:`kept_name` where they clash), then :func:`result_fields`."""
    res.index = index
    inputs = {} if "__error__" in record else {kept_name(str(k)): v for k, v in record.items()}
    return {ROW_FIELD: index, **inputs, **result_fields(res, explain)}
