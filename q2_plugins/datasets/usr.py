"""USR's Topical-Chat annotations (``--dataset usr``)."""

from __future__ import annotations

from pathlib import Path

from q2_plugins.datasets.common import DataFormatError, first_field, json_objects, text_of
from q2_plugins.datasets.types import Example, MetaEvalData

USR_NO_FACT = "_nofact"
USR_RATING = "Uses Knowledge"


def _usr_no_fact(fact: str) -> bool:
    """The Topical-Chat marker of a turn without knowledge (``_nofact``; spacing, case and underscores aside)."""
    return fact.strip().lower().replace("_", "").replace(" ", "") == "nofact"


def load_usr(path: str | Path) -> MetaEvalData:
    """USR's Topical-Chat annotations (Mehri & Eskenazi 2020, ``tc_usr_data.json``): a JSON list of contexts with
    ``context``, ``fact`` and ``responses`` (``response``, ``model`` and per-dimension lists of annotator ratings).

    As in the Q² paper, contexts whose fact is the no-fact marker (:data:`USR_NO_FACT`) are dropped (and counted in
    the notes); every other response is an example scored against its context's fact, with its mean
    ``"Uses Knowledge"`` rating as :attr:`Example.rating`. Ids are ``usr:<context index>:<response index>`` (indices in
    the file), the subset is the response's ``model``. The binary view some tables need is a majority of
    annotators (mean rating >= 0.5) saying the response uses the knowledge.
    """
    path = Path(path)
    examples: list[Example] = []
    dropped = dropped_responses = 0
    for ci, obj in json_objects(path, "USR Topical-Chat (tc_usr_data.json)"):
        where = f"{path} context {ci}"
        fact = text_of(first_field(obj, ("fact",), where), f"{where} fact")
        responses = first_field(obj, ("responses",), where)
        if not isinstance(responses, list):
            raise DataFormatError(f"{where}: 'responses' must be a list, got {type(responses).__name__}")
        if _usr_no_fact(fact):
            dropped += 1
            dropped_responses += len(responses)
            continue
        context = obj.get("context")
        for ri, resp in enumerate(responses):
            rwhere = f"{where} response {ri}"
            if not isinstance(resp, dict):
                raise DataFormatError(f"{rwhere} is a JSON {type(resp).__name__}, expected an object")
            ratings = first_field(resp, (USR_RATING,), rwhere)
            if not isinstance(ratings, list) or not ratings or \
                    not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ratings):
                raise DataFormatError(f"{rwhere}: {USR_RATING!r} must be a non-empty list of annotator ratings, "
                                      f"got {ratings!r:.80}")
            rating = sum(ratings) / len(ratings)
            model = str(resp.get("model", "?"))
            examples.append(Example(
                id=f"usr:{ci}:{ri}", response=text_of(first_field(resp, ("response",), rwhere), rwhere).strip(),
                knowledge=fact.strip(), consistent=rating >= 0.5,
                label="uses knowledge" if rating >= 0.5 else "does not use knowledge", subset=model,
                dialogue=f"usr:{ci}", history=text_of(context, where).strip() if context else None, rating=rating,
            ))
    if not examples:
        raise DataFormatError(f"{path} holds no response with a fact")
    notes = [f"dropped {dropped} contexts whose fact is the no-fact marker {USR_NO_FACT!r} ({dropped_responses} "
             f"responses); {len(examples)} responses remain"]
    pool: dict[str, list[str]] = {}
    for ex in examples:
        pool.setdefault(ex.dialogue, []).append(ex.knowledge)  # type: ignore[arg-type]
    return MetaEvalData(name="usr-topicalchat", source=str(path), examples=examples, notes=notes,
                        label_scheme=f"mean {USR_RATING!r} rating (for correlations); binary view: mean >= 0.5",
                        dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()},
                        experiments=("usr",))
