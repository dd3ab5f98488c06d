"""Stress pairs as ``q2 perturb`` writes them (``--dataset stress``)."""

from __future__ import annotations

from pathlib import Path

from q2_plugins.datasets.begin import BEGIN_LABELS
from q2_plugins.datasets.common import DataFormatError, json_objects, text_of
from q2_plugins.datasets.types import Example, MetaEvalData, PerturbedPair

_STRESS_FIELDS = ("method", "original_response", "original_knowledge", "perturbed_response", "perturbed_knowledge")


def load_stress(path: str | Path) -> MetaEvalData:
    """Stress pairs as ``q2 perturb`` writes them: JSONL with ``method``, ``original_response``,
    ``original_knowledge``, ``perturbed_response``, ``perturbed_knowledge`` and optionally ``id``, ``source_id`` and
    ``expected_label`` (a BEGIN label).

    Each original becomes one consistent example (``original:<source_id>``, subset ``original``), shared by its
    pairs; each perturbation an inconsistent example (the pair id, subset = the method, label = the expected label).
    """
    path = Path(path)
    examples: list[Example] = []
    pairs: list[PerturbedPair] = []
    originals: dict[str, tuple[str, str]] = {}
    for n, obj in json_objects(path, "stress pairs"):
        where = f"{path} line {n}"
        missing = [f for f in _STRESS_FIELDS if f not in obj]
        if missing:
            raise DataFormatError(f"{where}: no field(s) {missing}; a stress-pair file (from `q2 perturb`) has "
                                  f"{list(_STRESS_FIELDS)}; its fields are {sorted(obj)}")
        expected = obj.get("expected_label")
        if expected is not None and expected not in BEGIN_LABELS:
            raise DataFormatError(f"{where}: expected_label {expected!r} is not one of {list(BEGIN_LABELS)}")
        method = str(obj["method"])
        source = str(obj.get("source_id", f"line{n}"))
        texts = tuple(text_of(obj[f], f"{where} {f}") for f in _STRESS_FIELDS[1:])
        oid = f"original:{source}"
        if oid not in originals:
            originals[oid] = texts[:2]
            examples.append(Example(id=oid, response=texts[0], knowledge=texts[1], consistent=True, label="original",
                                    subset="original"))
        elif originals[oid] != texts[:2]:
            raise DataFormatError(f"{where}: source_id {source!r} names two different originals")
        pid = str(obj.get("id", f"{source}:{method}"))
        examples.append(Example(id=pid, response=texts[2], knowledge=texts[3], consistent=False,
                                label=expected or "perturbed", subset=method))
        pairs.append(PerturbedPair(pid, method, oid, pid, expected))
    if not pairs:
        raise DataFormatError(f"{path} holds no stress pairs")
    try:
        return MetaEvalData(name="stress", source=str(path), examples=examples, pairs=pairs,
                            label_scheme="originals consistent, perturbations inconsistent (subset = method)")
    except ValueError as e:  # duplicate ids
        raise DataFormatError(f"{path}: {e}") from None
