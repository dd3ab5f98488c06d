"""The test doubles of the suite, in one place: scripted Q² components (every output looked up in a table the test
writes), a Q2Scorer built on them, a scripted stand-in for the whole scorer, a stand-in for bert_score's scorer and
a component that fails the test if it is used, and an lm-eval model that answers with the recorded responses."""

from __future__ import annotations

import re
from typing import Any, Callable, Optional, Sequence

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.metric.components import Answer, NLILabel
from q2_plugins.metric.results import Q2Result, ResponseResult, ResponseStatus


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


class FakeCoref:
    """Scripted coreference: ``table[(history, response)]`` lists clusters as mention strings, each found in the
    joined dialogue (as whole words) after the previous mention of its cluster; the rewrite is
    :func:`q2_plugins.backends.hf.coref.rewrite`'s. Unscripted pairs get no clusters."""

    signature = "fake-coref"

    def __init__(self, table: dict[tuple[str, str], list[list[str]]]) -> None:
        self.table = table
        self.calls: list[list[tuple[str, str]]] = []

    def resolve(self, pairs: Sequence[tuple[str, str]]) -> list[Any]:
        from q2_plugins.metric.coref_rules import join_dialogue, rewrite

        self.calls.append(list(pairs))
        out = []
        for history, response in pairs:
            text, _ = join_dialogue(history, response)
            clusters = []
            for mentions in self.table.get((history, response), []):
                spans, at = [], 0
                for m in mentions:  # the next occurrence as whole words
                    found = re.compile(rf"\b{re.escape(m)}\b").search(text, at)
                    if found is None:
                        raise ValueError(f"scripted mention {m!r} not in {text!r}")
                    spans.append(found.span())
                    at = found.end()
                clusters.append(spans)
            out.append(rewrite(history, response, clusters))
        return out


def scripted_scorer(cands, qg, qa, nli=None, personal=(), **cfg) -> Q2Scorer:
    """A ``Q2Scorer`` on scripted components; ``cfg`` goes to ``Q2Config``. Each part is a table as its Fake class
    takes it (``nli`` None: every pair neutral; ``personal``: the personal questions), or a component used as given,
    which a test keeps to look at its calls or change its script."""
    return Q2Scorer(
        Q2Config(**cfg),
        candidate_extractor=_scripted(cands, FakeCandidates),
        question_generator=_scripted(qg, FakeQG),
        question_answerer=_scripted(qa, FakeQA),
        nli=_scripted({} if nli is None else nli, FakeNLI),
        personal_filter=_scripted(personal, FakePersonal),
    )


def _scripted(part: Any, fake: type) -> Any:
    return fake(part) if isinstance(part, (dict, list, tuple, set, frozenset)) else part


class ScriptedScorer:
    """Duck-typed ``Q2Scorer`` for the adapters and selection rules. A response's result comes from ``rule(index,
    response)`` if given, else from ``table[response]``: the score (None: no valid question; a response missing from
    the table is an error row). Records every call."""

    signature = "scripted"

    def __init__(self, table: Optional[dict] = None, *, rule: Optional[Callable[[int, str], ResponseResult]] = None,
                 config: Optional[Q2Config] = None) -> None:
        self.table = {} if table is None else table
        self.rule = rule
        self.config = Q2Config() if config is None else config
        self.calls: list[dict] = []

    def result_for(self, i: int, response: str) -> ResponseResult:
        if self.rule is not None:
            return self.rule(i, response)
        if response not in self.table:
            return ResponseResult(i, ResponseStatus.ERROR, error="unscripted")
        s = self.table[response]
        if s is None:
            return ResponseResult(i, ResponseStatus.NO_VALID_QUESTION)
        return ResponseResult(i, ResponseStatus.SCORED, score=s, score_no_nli=s, num_questions=1)

    def score(self, *, responses, knowledge, history=None, explain=False) -> Q2Result:
        self.calls.append({"responses": list(responses), "knowledge": list(knowledge), "history": history})
        return Q2Result([self.result_for(i, r) for i, r in enumerate(responses)], self.signature)


class FakeBERTScorer:
    """Stands in for bert_score's ``BERTScorer``: F1 is the candidate's length / 100."""

    hash = "fake-bert_L2_no-idf"

    def score(self, cands, refs):
        import torch

        return None, None, torch.tensor([len(c) / 100 for c in cands])


class NeverCalled:
    """A component that fails the test if any of it is used. ``signature`` is the identity it claims: a real model's
    identity makes a scorer read that model's cache entries."""

    def __init__(self, signature: str, why: str) -> None:
        self.signature = signature
        self.why = why

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{self.why} (used: {name})")


def record_padding(runner: Any) -> tuple[list[int], list[int]]:
    """Wraps ``runner.stats.padded`` (a model runner's padded batches): the lists it returns get, per batch, its
    padded width and its longest input, as the runner runs."""
    widths: list[int] = []
    longest: list[int] = []
    real = runner.stats.padded

    def padded(tokenizer: Any, features: Sequence[dict], device: Any, length: Optional[int] = None) -> dict:
        out = real(tokenizer, features, device, length)
        widths.append(out["input_ids"].shape[1])
        longest.append(max(len(f["input_ids"]) for f in features))
        return out

    runner.stats.padded = padded
    return widths, longest


def recorded_lm() -> Any:
    """An lm-eval model (made when called, with lm-eval imported then) that answers each generation request with its
    document's recorded ``response``."""
    from lm_eval.api.model import LM

    class Recorded(LM):
        def generate_until(self, requests: list) -> list[str]:
            return [req.doc["response"] for req in requests]

        def loglikelihood(self, requests: list) -> list:
            raise NotImplementedError

        def loglikelihood_rolling(self, requests: list) -> list:
            raise NotImplementedError

    return Recorded()
