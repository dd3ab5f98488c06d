"""Per-row budgets (q2_plugins.metric.budgets) on scripted components: a row over a budget gets its own error naming the
budget, its size and the flag, before the components see it; ``over_budget="truncate"`` scores what fits with a
warning; 0 means no limit; the budgets are in the signature."""

from __future__ import annotations

import pytest

from q2_plugins import Q2Config
from q2_plugins.cli import build_parser
from q2_plugins.metric.budgets import truncate_text
from tests.fakes import FakeCandidates, FakeQA, FakeQG, scripted_scorer

RESP, KNOW = "paris is in france .", "Paris is the capital of France."


def _scorer(cands: dict, **cfg):
    """Every candidate gets one question per rank 'q<k> <cand>', answered on the response by the candidate itself."""
    qg = {(c, r): [f"q{k} {c}" for k in range(2)] for r, cs in cands.items() for c in cs}
    qa = {(f"q{k} {c}", r): c for r, cs in cands.items() for c in cs for k in range(2)}
    qa.update({(f"q{k} {c}", KNOW): c for cs in cands.values() for c in cs for k in range(2)})
    return scripted_scorer(FakeCandidates(cands), FakeQG(qg), FakeQA(qa), **cfg)


def test_lengths_are_refused_before_any_component():
    long_resp, long_know = "word " * 1000, "K" * 30_000
    scorer = _scorer({RESP: ["paris"], long_resp.strip(): ["word"]}, max_response_chars=100,
                     max_knowledge_chars=1000)
    res = scorer.score(responses=[RESP, long_resp, RESP], knowledge=[KNOW, KNOW, long_know])
    assert [r.status for r in res.responses] == ["scored", "error", "error"]
    assert res.responses[1].error == ("response is 5000 characters, over the budget max_response_chars=100 (raise "
                                      "max_response_chars; 0 = no limit; or set over_budget to truncate)")
    assert res.responses[2].error.startswith("knowledge is 30000 characters, over the budget max_knowledge_chars=1000")
    # neither over-budget text reached a component
    seen = [t for call in scorer.candidate_extractor.calls for t in call]
    assert seen == [RESP]
    assert all(c != long_know for call in scorer.question_answerer.calls for _, c in call)


def test_zero_is_no_limit():
    long_resp = "paris " * 500
    scorer = _scorer({long_resp: ["paris"]}, max_response_chars=0)
    res = scorer.score(responses=[long_resp], knowledge=[KNOW])
    assert res.responses[0].status == "scored"


def test_candidates_and_questions():
    cands = {RESP: [f"c{i}" for i in range(5)]}
    res = _scorer(cands, max_candidates=4).score(responses=[RESP], knowledge=[KNOW])
    assert res.responses[0].error == ("response is 5 answer candidates, over the budget max_candidates=4 (raise "
                                      "max_candidates; 0 = no limit; or set over_budget to truncate)")
    res = _scorer(cands, max_questions=3).score(responses=[RESP], knowledge=[KNOW])
    assert res.responses[0].error.startswith("response has over 3 valid questions, over the budget max_questions=3")
    assert _scorer(cands, max_candidates=5, max_questions=5).score(
        responses=[RESP], knowledge=[KNOW]).responses[0].status == "scored"


def test_truncate_scores_what_fits_with_a_warning():
    cands = {RESP: [f"c{i}" for i in range(5)]}
    res = _scorer(cands, max_candidates=4, over_budget="truncate").score(responses=[RESP], knowledge=[KNOW],
                                                                         explain=True)
    r = res.responses[0]
    assert r.status == "scored" and r.candidates == ["c0", "c1", "c2", "c3"] and r.num_questions == 4
    assert r.warning == ("candidates truncated to its first 4 of 5 answer candidates (max_candidates=4; "
                         "max_candidates 0 = no limit)")
    assert r.to_dict()["warning"] == r.warning
    r = _scorer(cands, max_questions=2, over_budget="truncate", question_mode="all").score(
        responses=[RESP], knowledge=[KNOW], explain=True).responses[0]
    assert r.num_questions == 2 and [q.question for q in r.questions] == ["q0 c0", "q1 c0"]
    assert r.warning.startswith("valid questions truncated to the first 2 found (max_questions=2")
    long_know = KNOW + " more" * 100
    r = _scorer({RESP: ["paris"]}, max_knowledge_chars=40, over_budget="truncate").score(
        responses=[RESP], knowledge=[long_know]).responses[0]
    assert r.warning == ("knowledge truncated to its first 36 of 531 characters (max_knowledge_chars=40; "
                         "max_knowledge_chars 0 = no limit)")
    # a row within every budget has no warning, and its output row no such key
    ok = _scorer({RESP: ["paris"]}, over_budget="truncate").score(responses=[RESP], knowledge=[KNOW]).responses[0]
    assert ok.warning is None and "warning" not in ok.to_dict()


def test_truncate_text_cuts_between_words():
    assert truncate_text("abc def ghi", 6) == "abc"
    assert truncate_text("abc def ghi", 7) == "abc def"
    assert truncate_text("x" * 10, 4) == "xxxx"
    assert truncate_text("short", 10) == "short"


def test_budgets_are_settings_in_the_signature_and_flags():
    default = _scorer({}).signature
    assert "|budget:resp2000-know20000-cand100-q100-error" in default
    assert _scorer({}, max_candidates=0).signature != default
    assert "max_response_chars" in Q2Config.names("score") and Q2Config().max_response_chars == 2000
    args = build_parser().parse_args(["score", "--input", "x.jsonl", "--max-knowledge-chars", "0",
                                      "--over-budget", "truncate"])
    assert (args.max_knowledge_chars, args.over_budget) == (0, "truncate")
    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="max_candidates: must be a non-negative integer"):
            Q2Config(max_candidates=bad)


def test_every_front_end_gets_the_budgets():
    """The adapters build their config from config_options() / Q2Config.from_dict: the budgets are among them."""
    from q2_plugins.integrations.adapters import config_from_options
    from q2_plugins.metric.config import config_options

    names = {o.name for o in config_options()}
    assert {"max_response_chars", "max_knowledge_chars", "max_candidates", "max_questions", "over_budget"} <= names
    cfg = config_from_options({"max_candidates": 5, "over_budget": "truncate"})
    assert (cfg.max_candidates, cfg.over_budget) == (5, "truncate")
