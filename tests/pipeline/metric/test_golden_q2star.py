"""Golden values of Q²* (``discard_unanswerable``) and of the fallback's lower-casing, with scripted components.

Every expected number is worked out by hand in the comments; live scoring and replay must agree on them.
"""

from __future__ import annotations

import pytest

from q2_plugins import Q2Config
from q2_plugins.jobs.replay import RecordedQuestion, RecordedResponse, replay
from q2_plugins.metric.components import Answer, NLILabel
from q2_plugins.metric.scoring import counted_questions
from tests.fakes import FakeNLI, scripted_scorer

E, N, C = NLILabel.ENTAILMENT, NLILabel.NEUTRAL, NLILabel.CONTRADICTION

# R1: three valid questions. "Which city?" is answered exactly (F1 1), "What fruit?" partly ("red apples" vs
# "green apples": F1 0.5), "Which year?" has no answer in the knowledge (F1 0).
R1 = "Paris has red apples since 1900."
K1 = "Paris sells green apples."
# R2: two valid questions, neither answerable from the knowledge.
R2 = "Rome was built in 753 BC."
K2 = "Bananas are yellow."
# R3: one valid question, answered exactly.
R3 = "Oslo is cold."
K3 = "Oslo is a cold city."

CANDS = {R1: ["Paris", "red apples", "1900"], R2: ["Rome", "753 BC"], R3: ["Oslo"]}
QG = {
    ("Paris", R1): ["Which city?"], ("red apples", R1): ["What fruit?"], ("1900", R1): ["Which year?"],
    ("Rome", R2): ["Which town?"], ("753 BC", R2): ["When was it built?"],
    ("Oslo", R3): ["Which place is cold?"],
}
QA = {
    ("Which city?", R1): "Paris", ("Which city?", K1): "Paris",
    ("What fruit?", R1): "red apples", ("What fruit?", K1): "green apples",
    ("Which year?", R1): "1900",  # no answer in K1
    ("Which town?", R2): "Rome", ("When was it built?", R2): "753 BC",  # none in K2
    ("Which place is cold?", R3): "Oslo", ("Which place is cold?", K3): "Oslo",
}
FRUIT_NLI = ("What fruit? green apples.", "What fruit? red apples.")


def scorer(nli_label=N, **cfg):
    return scripted_scorer(CANDS, QG, QA, nli=FakeNLI({FRUIT_NLI: nli_label}), **cfg)


@pytest.mark.parametrize("no_answer, expected", [
    ([False, False, True], [True, True, False]),
    ([True, True], [True, True]),      # nothing answerable: every question still counts
    ([False], [True]),
    ([], []),
])
def test_counted_questions_rule(no_answer, expected):
    assert counted_questions(no_answer, discard_unanswerable=True) == expected
    assert counted_questions(no_answer, discard_unanswerable=False) == [True] * len(no_answer)


@pytest.mark.parametrize("nli_label, q2, q2_star", [
    (N, (1 + 0.5 + 0) / 3, (1 + 0.5) / 2),   # neutral keeps the F1
    (E, (1 + 1 + 0) / 3, (1 + 1) / 2),      # entailment lifts "What fruit?" to 1
    (C, (1 + 0 + 0) / 3, (1 + 0) / 2),      # contradiction sets it to 0
])
def test_q2_star_hand_computed(nli_label, q2, q2_star):
    texts = dict(responses=[R1, R2, R3], knowledge=[K1, K2, K3], explain=True)
    plain = scorer(nli_label).score(**texts)
    star = scorer(nli_label, discard_unanswerable=True).score(**texts)
    assert plain.responses[0].score == pytest.approx(q2, abs=1e-15)
    assert star.responses[0].score == pytest.approx(q2_star, abs=1e-15)
    # without NLI the F1 means: (1 + 0.5 + 0) / 3 and (1 + 0.5) / 2
    assert plain.responses[0].score_no_nli == pytest.approx(0.5, abs=1e-15)
    assert star.responses[0].score_no_nli == pytest.approx(0.75, abs=1e-15)
    assert (plain.responses[0].num_questions, star.responses[0].num_questions) == (3, 2)
    # R2: no question answerable, all kept: 0 either way; R3: one answerable question: 1 either way
    assert [r.score for r in plain.responses[1:]] == [r.score for r in star.responses[1:]] == [0.0, 1.0]
    assert star.responses[1].num_questions == 2
    dropped = [(d.question, d.reason) for d in star.responses[0].dropped]
    assert dropped == [("Which year?", "no_answer_in_knowledge")]
    assert plain.responses[0].dropped == []


def test_q2_star_is_in_the_signature_and_off_by_default():
    assert Q2Config().discard_unanswerable is False
    plain = scorer().score(responses=[R3], knowledge=[K3])
    star = scorer(discard_unanswerable=True).score(responses=[R3], knowledge=[K3])
    assert "questions:single|" in plain.signature and "discard-unanswerable" not in plain.signature
    assert "questions:single+discard-unanswerable|" in star.signature
    with pytest.raises(ValueError, match="different signatures"):
        plain + star


def test_replay_applies_the_same_rule():
    # the recorded form of R1..R3 (what the original's steps file holds): candidate, question, knowledge answer
    records = [
        RecordedResponse("r1", R1, K1, [RecordedQuestion("Paris", "Which city?", Answer.span("Paris")),
                                        RecordedQuestion("red apples", "What fruit?", Answer.span("green apples")),
                                        RecordedQuestion("1900", "Which year?", Answer.none())]),
        RecordedResponse("r2", R2, K2, [RecordedQuestion("Rome", "Which town?", Answer.none()),
                                        RecordedQuestion("753 BC", "When was it built?", Answer.none())]),
        RecordedResponse("r3", R3, K3, [RecordedQuestion("Oslo", "Which place is cold?", Answer.span("Oslo"))]),
    ]
    for flag, expected in ((False, [0.5, 0.0, 1.0]), (True, [0.75, 0.0, 1.0])):
        replayed = replay(records, discard_unanswerable=flag, explain=True)
        live = scorer(use_nli=False, discard_unanswerable=flag).score(responses=[R1, R2, R3],
                                                                       knowledge=[K1, K2, K3])
        assert [r.score for r in replayed.responses] == [r.score for r in live.responses] == expected
    assert [d.reason for d in replayed.responses[0].dropped] == ["no_answer_in_knowledge"]
    # with NLI on the replayed answers, Q²* gives the hand-computed (1 + 1) / 2 for an entailed "What fruit?"
    star = replay(records, use_nli=True, nli=FakeNLI({FRUIT_NLI: E}), discard_unanswerable=True)
    assert star.responses[0].score == 1.0


# -- the end-to-end NLI fallback lower-cases the response as well as the knowledge (as the original did) ----------
def test_fallback_lower_cases_response_and_knowledge():
    resp, know = "Hmm, Sounds Nice.", "Bananas are Yellow."
    nli = FakeNLI({("bananas are yellow.", "hmm, sounds nice."): C,  # both lower-cased: the original's input
                   ("bananas are yellow.", resp): E})                 # only the knowledge lower-cased
    kw = dict(cands={resp: []}, qg={}, qa={}, nli=nli)
    res = scripted_scorer(**kw).score(responses=[resp], knowledge=[know])
    assert (res.responses[0].fallback_label, res.responses[0].score) == ("contradiction", 0.0)
    assert nli.calls[-1] == [("bananas are yellow.", "hmm, sounds nice.")]
    assert "fallback:e2e-nli-lowerknow-lowerresp|" in res.signature
    res = scripted_scorer(**kw, fallback_lowercase_response=False).score(responses=[resp], knowledge=[know])
    assert (res.responses[0].fallback_label, res.responses[0].score) == ("entailment", 1.0)
    assert "fallback:e2e-nli-lowerknow|" in res.signature
    res = scripted_scorer(**kw, fallback_lowercase_response=False, fallback_lowercase_knowledge=False).score(
        responses=[resp], knowledge=[know])
    assert res.responses[0].fallback_label == "neutral" and nli.calls[-1] == [(know, resp)]
