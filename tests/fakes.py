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
