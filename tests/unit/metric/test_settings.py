"""A score setting is declared once, in its field's metadata: the full signature, its short form and the cache keys
of the stages it names are derived from it. Adding a ``kind="score"`` field that does not reach all three fails
here."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from itertools import combinations
from typing import Any, Optional

import pytest

from q2_plugins.metric.config import STAGES, Q2Config
from q2_plugins.metric.signature import SCORER_PARTS, scorer_signature, settings_parts, stage_key

IDS = {"candidates": "spacy:en_core_web_sm-3.8.0", "personal": "spacy:en_core_web_sm-3.8.0",
       "qg": "hub:org/t5-qg@" + "a" * 40 + "[float32]", "qa": "local:sha256:0123456789abcdef[float32]",
       "nli": "hub:org/roberta-mnli@" + "b" * 40 + "[float32]", "signals": "spacy:en_core_web_sm-3.8.0",
       "coref": "fcoref-head-v1:hub:org/f-coref@" + "c" * 40 + "[float32]"}
SCORE = [name for name, _ in Q2Config.signed()]


def sign(config: Q2Config):
    return scorer_signature(config, IDS, "0.1.0")


def keys(config: Q2Config) -> dict[str, str]:
    return {stage: stage_key(config, stage, IDS[stage]) for stage in STAGES}


def _kind(annotation: Any) -> type:
    """The value type of a field's annotation: ``Optional[int]`` -> int."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def other_value(config: Any, name: str):
    """Another valid value of setting ``name`` under ``config`` (a frozen dataclass such as :class:`Q2Config`),
    whatever its type: a choice, a switch, a number, a text, or unset."""
    f = {f.name: f for f in dataclasses.fields(config)}[name]
    kind = _kind(typing.get_type_hints(type(config))[name])
    value = getattr(config, name)
    if f.metadata.get("choices"):
        candidates = [c for c in f.metadata["choices"] if c != value]
    elif kind is bool:
        candidates = [not value]
    elif kind in (int, float):
        candidates = [kind(1), kind(2)] if value is None else [value + 1, value - 1, kind(value * 2), kind(value / 2)]
    elif kind is str:
        candidates = ["other"] if value is None else [value + " ."]
    else:
        raise AssertionError(f"{name}: no rule for a setting of type {kind}; add one here")
    for candidate in candidates:
        if candidate == value:
            continue
        try:
            return dataclasses.replace(config, **{name: candidate})
        except ValueError:
            continue
    raise AssertionError(f"no other valid value of {name} to try")


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Q2Config)])
def test_the_helper_finds_another_value_of_every_setting(name):
    assert getattr(other_value(Q2Config(), name), name) != getattr(Q2Config(), name)


def test_the_helper_changes_every_type_a_setting_can_have():
    @dataclasses.dataclass(frozen=True)
    class Settings:
        ratio: float = 0.5
        limit: Optional[float] = None
        count: Optional[int] = None
        mode: str = dataclasses.field(default="a", metadata={"choices": ("a", "b")})
        name: Optional[str] = None
        on: bool = False

    for f in dataclasses.fields(Settings):
        changed = getattr(other_value(Settings(), f.name), f.name)
        assert changed != getattr(Settings(), f.name) and changed is not None, f.name


def where_it_acts(name: str) -> Q2Config:
    """The paper's settings, changed where needed for ``name`` to act (its ``when``)."""
    how = dict(Q2Config.signed())[name]
    return Q2Config().replace(**dict(how.when))


@pytest.mark.parametrize("name", SCORE)
def test_every_score_setting_reaches_the_signature_and_the_keys_of_its_stages(name):
    base = where_it_acts(name)
    changed = other_value(base, name)
    assert sign(changed) != sign(base), f"{name} does not change the signature"
    assert sign(changed).short != sign(base).short
    stages = {f.name: f.metadata["stages"] for f in dataclasses.fields(Q2Config)}[name]
    before, after = keys(base), keys(changed)
    for stage in STAGES:
        if stage in stages:
            assert after[stage] != before[stage], f"{name} does not change the cache key of stage {stage}"
        else:  # a stage it does not name keeps its cached outputs
            assert after[stage] == before[stage], f"{name} changes the cache key of stage {stage}: name it"


@pytest.mark.parametrize("name", SCORE)
def test_the_short_form_says_paper_exactly_when_the_full_form_is_the_papers(name):
    paper = sign(Q2Config())
    for config in (where_it_acts(name), other_value(where_it_acts(name), name), other_value(Q2Config(), name)):
        sig = sign(config)
        assert ("|cfg:paper|" in sig.short) == (sig == paper), (name, str(sig), sig.short)


def test_the_short_form_is_a_function_of_the_full_one():
    configs = [Q2Config()] + [other_value(where_it_acts(n), n) for n in SCORE] + [other_value(Q2Config(), n)
                                                                                  for n in SCORE]
    for a, b in combinations([sign(c) for c in configs], 2):
        assert (a == b) == (a.short == b.short), (str(a), str(b))


def test_a_stage_settings_part_is_that_stages_cache_key():
    """qg-dec, qa-dec and nli-dec hold the settings of their stage's component and no other: the settings a
    signature writes there are those the stage's cache key holds, whatever the config."""
    configs = [Q2Config()] + [other_value(where_it_acts(n), n) for n in SCORE]
    for config in configs:
        full = dict(sign(config).parts)
        for part in (p for p in SCORER_PARTS if p.stage is not None and p.key in full):
            assert keys(config)[part.stage] == f"{part.stage}|{IDS[part.stage]}|{full[part.key]}", part.key


def test_a_setting_that_does_not_act_changes_nothing():
    """qa_max_answer_tokens acts with qa_decoding=squad2 only: elsewhere it leaves both forms and the keys alone."""
    plain, other = Q2Config(), Q2Config(qa_max_answer_tokens=20)
    assert sign(other) == sign(plain) and sign(other).short == sign(plain).short and "|cfg:paper|" in sign(other).short
    assert keys(other) == keys(plain)
    squad = Q2Config(qa_decoding="squad2")
    assert sign(squad.replace(qa_max_answer_tokens=20)) != sign(squad)


def test_declarations_fit_the_layout_and_the_components():
    from q2_plugins.backends.hf.transformers_models import HFNLI, HFQuestionAnswerer, HFQuestionGenerator

    settings_keys = {p.key for p in SCORER_PARTS if p.component is None}
    wrappers = {"qg": HFQuestionGenerator, "qa": HFQuestionAnswerer, "nli": HFNLI}
    for f in dataclasses.fields(Q2Config):
        how, stages = f.metadata["sig"], f.metadata["stages"]
        assert (how is not None) == (f.metadata["kind"] == "score"), f.name
        if how is None:
            assert not stages, f"{f.name}: only a score setting changes a stage's outputs"
            continue
        assert how.part in settings_keys, f"{f.name}: no signature part {how.part!r} in SCORER_PARTS"
        for stage in stages:
            assert f.name == stage or f.name.startswith(f"{stage}_"), f"{f.name} changes stage {stage}: name it " \
                                                                       f"{stage}_..."
            if stage in wrappers:  # it reaches the component as a keyword argument
                assert f.name[len(stage) + 1:] in inspect.signature(wrappers[stage]).parameters, f.name


def test_the_papers_signature_is_unchanged():
    """The derivation writes what the hand-written signature wrote (results and caches stay valid)."""
    assert dict(settings_parts(Q2Config())) == {
        "qg-dec": "beam5-ret5-nrng3-max128-in512-tpl:'answer: {answer}  context: {context} </s>'",
        "questions": "single", "qa-dec": "original-win512-stride128", "personal": "remove:{personal}",
        "norm": "q2-original", "cmp": "f1+nli", "fallback": "e2e-nli-lowerknow-lowerresp",
        "nli-dec": "win512-stride128", "budget": "resp2000-know20000-cand100-q100-error"}
    assert keys(Q2Config())["qa"] == f"qa|{IDS['qa']}|original-win512-stride128"
    assert keys(Q2Config())["candidates"] == f"candidates|{IDS['candidates']}|"
    assert sign(Q2Config(fallback=False, use_nli=False)).get("nli") is None
