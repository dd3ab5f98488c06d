"""Scripted components for golden tests: every output is looked up in a table the test writes."""

from __future__ import annotations

from typing import Optional, Sequence

from q2_plugins.components import Answer, NLILabel


class FakeCandidates:
    signature = "fake-cand"

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        self.calls.append(list(texts))
        return [list(self.table.get(t, [])) for t in texts]


class FakeQG:
    signature = "fake-qg"

    def __init__(self, table: dict[tuple[str, str], list[str]]) -> None:
        self.table = table
        self.calls: list[list[tuple[str, str]]] = []

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        self.calls.append(list(pairs))
        out = []
        for p in pairs:
            if p not in self.table:
                raise KeyError(f"no scripted questions for {p}")
            out.append(list(self.table[p]))
        return out


class FakeQA:
    """``table[(question, context)]`` is the answer text, or None for "no answer"; unknown pairs: no answer."""

    signature = "fake-qa"

    def __init__(self, table: dict[tuple[str, str], Optional[str]], fail_on: Sequence[str] = ()) -> None:
        self.table = table
        self.fail_on = set(fail_on)
        self.calls: list[list[tuple[str, str]]] = []

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]:
        self.calls.append(list(pairs))
        out = []
        for q, c in pairs:
            if c in self.fail_on:
                raise RuntimeError(f"scripted failure on context {c!r}")
            text = self.table.get((q, c))
            out.append(Answer.none() if text is None else Answer.span(text))
        return out


class FakeNLI:
    signature = "fake-nli"

    def __init__(self, table: dict[tuple[str, str], NLILabel], default: NLILabel = NLILabel.NEUTRAL) -> None:
        self.table = table
        self.default = default
        self.calls: list[list[tuple[str, str]]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]:
        self.calls.append(list(pairs))
        return [self.table.get(p, self.default) for p in pairs]


class FakePersonal:
    signature = "fake-personal"

    def __init__(self, personal: Sequence[str] = ()) -> None:
        self.personal = set(personal)

    def is_personal(self, questions: Sequence[str]) -> list[bool]:
        return [q in self.personal for q in questions]


class ScriptedScorer:
    """Duck-typed ``Q2Scorer`` for selection rules: ``table[response]`` is the score (None: no valid question);
    responses missing from the table are errors. Records every call."""

    signature = "scripted"

    def __init__(self, table: dict) -> None:
        self.table = table
        self.calls: list[dict] = []

    def score(self, *, responses, knowledge, history=None, explain=False):
        from q2_plugins.results import Q2Result, ResponseResult, ResponseStatus

        self.calls.append({"responses": list(responses), "knowledge": list(knowledge), "history": history})
        out = []
        for i, r in enumerate(responses):
            if r not in self.table:
                out.append(ResponseResult(i, ResponseStatus.ERROR, error="unscripted"))
            elif self.table[r] is None:
                out.append(ResponseResult(i, ResponseStatus.NO_VALID_QUESTION))
            else:
                s = self.table[r]
                out.append(ResponseResult(i, ResponseStatus.SCORED, score=s, score_no_nli=s, num_questions=1))
        return Q2Result(out, self.signature)
