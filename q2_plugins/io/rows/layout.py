"""The one row layout every front end writes (``docs/usage.md``): ``row`` (the record's position in its input file),
the record's input fields (one named like a field of the layout kept as ``input_<name>``, see :func:`kept_name`),
then the result fields of :data:`~q2_plugins.metric.results.RESULT_FIELDS` (with explanations, those of
:data:`~q2_plugins.metric.results.EXPLANATION_FIELDS`), then ``random_weights`` where the models were random-weight
test models and ``signature`` where a front end writes it on each row (the front ends without a sidecar)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from q2_plugins.metric.results import EXPLANATION_FIELDS, RESULT_FIELDS, ResponseResult

__all__ = ["ROW_FIELD", "SIGNATURE_FIELD", "RANDOM_WEIGHTS_FIELD", "INPUT_PREFIX", "RESERVED_FIELDS", "kept_name",
           "result_fields", "result_row"]

#: the first field of every result row: the record's position in its input file (0-based)
ROW_FIELD = "row"
#: the last field of a row whose front end writes the signature on each row (``q2 replay``, ParlAI, lm-eval)
SIGNATURE_FIELD = "signature"
#: the model settings that named random-weight test models, on the rows of the front ends that write no sidecar
#: (evaluate, ParlAI, lm-eval): the report says their scores mean nothing
RANDOM_WEIGHTS_FIELD = "random_weights"
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
    """The result fields of one response, in the declared order (:data:`~q2_plugins.metric.results.RESULT_FIELDS`; with
    ``explain`` also :data:`~q2_plugins.metric.results.EXPLANATION_FIELDS`, None where the response has none)."""
    values = res.to_dict()
    names = [*RESULT_FIELDS, *(EXPLANATION_FIELDS if explain else ())]
    return {name: values.get(name) for name in names}


def result_row(position: Optional[int], fields: Mapping[str, Any], res: ResponseResult, explain: bool = False, *,
               signature: Any = None, random_weights: Iterable[str] = ()) -> dict[str, Any]:
    """One result row, as every front end writes it: ``row`` (the position: in the input file, the inputs of the
    call, the per-example file; None where there is none), the input fields (a ``q2 score`` record's, or a front
    end's ids and texts; renamed by :func:`kept_name` where they clash), :func:`result_fields`, then
    ``random_weights`` when some (:attr:`~q2_plugins.metric.results.Q2Result.random_weights`) and ``signature`` when
    given (an input field of either name is then kept as ``input_<name>``)."""
    if position is not None:
        res.index = position
    random_weights = list(random_weights)
    reserved = RESERVED_FIELDS | {SIGNATURE_FIELD} if signature is not None else RESERVED_FIELDS
    reserved = reserved | {RANDOM_WEIGHTS_FIELD} if random_weights else reserved
    inputs = {} if "__error__" in fields else {kept_name(str(k), reserved): v for k, v in fields.items()}
    row = {ROW_FIELD: position, **inputs, **result_fields(res, explain)}
    if random_weights:
        row[RANDOM_WEIGHTS_FIELD] = random_weights
    if signature is not None:
        row[SIGNATURE_FIELD] = str(signature)
    return row
