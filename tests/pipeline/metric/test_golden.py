"""Golden values with scripted components: the paper's worked examples and the pipeline's rules."""

from __future__ import annotations

import json
import math

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.metric.components import Answer, AnswerKind, NLILabel
from q2_plugins.metric.normalize import normalize, token_f1
from q2_plugins.metric.scoring import needs_nli, question_score
from tests.fakes import FakeNLI, FakeQA, FakeQG, scripted_scorer

E, N, C = NLILabel.ENTAILMENT, NLILabel.NEUTRAL, NLILabel.CONTRADICTION


@pytest.mark.parametrize(
    "ref, pred, f1",
    [
        ("Los Angeles", "LA", 0.0),
        ("the united states", "United States", 1.0),
        ("our body", "the human body", 2 * (1 / 2) * (1 / 1) / (1 / 2 + 1)),  # 'our' is dropped by q2-original
        ("the ocean", "in the ocean", 1.0),  # 'in' too
        ("a team sport", "a sport in which two teams play", 2 * (1 / 5) * (1 / 2) / (1 / 5 + 1 / 2)),
        ("x", "", 0.0),
    ],
)
def test_token_f1_original_normalisation(ref, pred, f1):
    assert token_f1(ref, pred) == f1


def test_normalisations_differ_where_the_original_does():
    assert normalize("In our garden, the roses!") == "garden roses"
    assert normalize("In our garden, the roses!", "squad") == "in our garden roses"
    with pytest.raises(ValueError, match="Unknown normalization"):
        normalize("x", "nope")


@pytest.mark.parametrize(
    "f1, label, expected",
    [(0.0, E, 1.0), (0.4, C, 0.0), (0.4, N, 0.4), (0.4, None, 0.4), (1.0, None, 1.0)],
)
def test_question_score_table(f1, label, expected):
    assert question_score(f1, label) == expected


@pytest.mark.parametrize(
    "answer, f1, expected",
    [
        (Answer.span("los angeles"), 0.0, True),
        (Answer.span("los angeles"), 1.0, False),
        (Answer.none(), 0.0, False),
        (Answer(AnswerKind.EMPTY, ""), 0.0, False),
        (Answer(AnswerKind.SPAN_FROM_NULL, "[CLS] who? [SEP] x"), 0.1, False),
    ],
)
def test_needs_nli(answer, f1, expected):
    assert needs_nli(answer, f1) is expected


# -- the paper's worked examples -------------------------------------------------------------------------------
LA_RESP = "I was born in LA, it is a great city."
LA_KNOW = "Kobe Bryant was born in Los Angeles, California."
COFFEE_RESP = "Coffee is very acidic and can have a stimulating effect."
COFFEE_KNOW = "Coffee is a brewed drink prepared from roasted coffee beans."
PANDA_RESP = "The giant panda is a vulnerable species."
PANDA_KNOW = "The giant panda is a conservation-reliant species."


def paper_scorer(**cfg):
    return scripted_scorer(
        cands={LA_RESP: ["LA"], COFFEE_RESP: ["very acidic"], PANDA_RESP: ["vulnerable"]},
        qg={
            ("LA", LA_RESP): ["Where was I born?", "Where were you born?"],
            ("very acidic", COFFEE_RESP): ["What is coffee?"],
            ("vulnerable", PANDA_RESP): ["What kind of species is the giant panda?"],
        },
        qa={
            ("Where was I born?", LA_RESP): "LA",
            ("Where was I born?", LA_KNOW): "Los Angeles",
            ("What is coffee?", COFFEE_RESP): "very acidic",
            ("What is coffee?", COFFEE_KNOW): None,
            ("What kind of species is the giant panda?", PANDA_RESP): "vulnerable",
            ("What kind of species is the giant panda?", PANDA_KNOW): "conservation",
        },
        nli=FakeNLI({
            ("Where was I born? Los Angeles.", "Where was I born? LA."): E,
            ("What kind of species is the giant panda? conservation.",
             "What kind of species is the giant panda? vulnerable."): N,
        }),
        remove_personal=False,
        **cfg,
    )


def test_paper_examples():
    scorer = paper_scorer()
    res = scorer.score(responses=[LA_RESP, COFFEE_RESP, PANDA_RESP], knowledge=[LA_KNOW, COFFEE_KNOW, PANDA_KNOW],
                       explain=True)
    la, coffee, panda = res.responses
    assert (la.score, la.score_no_nli, la.questions[0].nli_label) == (1.0, 0.0, "entailment")
    assert la.questions[0].knowledge_answer == "Los Angeles"
    assert (coffee.score, coffee.questions[0].knowledge_answer, coffee.questions[0].knowledge_answer_kind) == (
        0.0, None, "no_answer")
    assert coffee.questions[0].nli_label is None  # no answer in the knowledge: no NLI
    assert (panda.score, panda.questions[0].nli_label) == (0.0, "neutral")
    assert res.score == pytest.approx(1 / 3)
    assert res.coverage == 1.0 and res.fallback_rate == 0.0
    # NLI ran once, on the two answer pairs that needed it
    assert len(scorer.nli.calls) == 1 and len(scorer.nli.calls[0]) == 2


def test_without_nli_is_the_f1_score():
    scorer = paper_scorer(use_nli=False)
    res = scorer.score(responses=[LA_RESP, COFFEE_RESP, PANDA_RESP], knowledge=[LA_KNOW, COFFEE_KNOW, PANDA_KNOW])
    assert res.scores == [0.0, 0.0, 0.0]
    assert scorer.nli.calls == []
    assert "cmp:f1|" in res.signature


# -- filters, modes, fallback ------------------------------------------------------------------------------------
R = "Paris is the capital of France and I love it."
K = "Paris is the capital and most populous city of France."


def filter_scorer(**cfg):
    return scripted_scorer(
        cands={R: ["Paris", "France"]},
        qg={
            ("Paris", R): ["What do I love?", "Which city do you love?", "What is the capital of France?",
                           "What city is the capital?"],
            ("France", R): ["Paris is the capital of what?", "Where is Paris?"],
        },
        qa={
            ("What do I love?", R): "Paris",
            ("What is the capital of France?", R): "Paris",
            ("What is the capital of France?", K): "Paris",
            ("What city is the capital?", R): "paris.",
            ("What city is the capital?", K): "Paris",
            ("Paris is the capital of what?", R): "France and I",  # mismatch
            ("Where is Paris?", R): "France",
            ("Where is Paris?", K): "city of France",
        },
        personal=["What do I love?", "Which city do you love?"],
        **cfg,
    )


def test_single_mode_takes_first_passing_question_and_explains_drops():
    scorer = filter_scorer()
    res = scorer.score(responses=[R], knowledge=[K], explain=True)
    r = res.responses[0]
    assert [q.question for q in r.questions] == ["What is the capital of France?", "Where is Paris?"]
    assert [(d.question, d.reason) for d in r.dropped] == [
        ("What do I love?", "personal"),
        ("Which city do you love?", "personal"),
        ("Paris is the capital of what?", "answer_mismatch"),
    ]
    assert r.dropped[2].response_answer == "France and I"
    f1_france = token_f1("France", "city of France")
    assert r.questions[1].f1 == f1_france
    assert r.score == (1.0 + f1_france) / 2  # the neutral default keeps the F1
    # rounds: the first QA batch holds the first non-personal question of every candidate
    qa_calls = scorer.question_answerer.calls
    assert qa_calls[0] == [("What is the capital of France?", R), ("Paris is the capital of what?", R)]
    # the second round's batch also carries the knowledge's answer to the question the first round validated, and
    # the last call answers the second round's valid question from the knowledge
    assert qa_calls[1] == [("Where is Paris?", R), ("What is the capital of France?", K)]
    assert qa_calls[2:] == [[("Where is Paris?", K)]]


def test_answer_nli_and_fallback_nli_share_one_call():
    r2, k2 = "Hmm, sounds nice.", "Bananas are yellow."
    scorer = filter_scorer()
    scorer.candidate_extractor.table[r2] = []
    scorer.nli.table[("bananas are yellow.", r2.lower())] = C
    res = scorer.score(responses=[R, r2], knowledge=[K, k2], explain=True)
    assert [r.status for r in res.responses] == ["scored", "fallback"]
    assert res.responses[1].fallback_label == "contradiction"
    assert len(scorer.nli.calls) == 1
    assert ("bananas are yellow.", r2.lower()) in scorer.nli.calls[0] and len(scorer.nli.calls[0]) == 2


def test_all_mode_keeps_every_passing_question_in_beam_order():
    res = filter_scorer(question_mode="all").score(responses=[R], knowledge=[K], explain=True)
    assert [q.question for q in res.responses[0].questions] == [
        "What is the capital of France?", "What city is the capital?", "Where is Paris?"]


def test_personal_filter_switch():
    res = filter_scorer(remove_personal=False).score(responses=[R], knowledge=[K], explain=True)
    # "What do I love?" now passes the filter, is answered "Paris" from the response, and has no knowledge answer
    q = res.responses[0].questions[0]
    assert (q.question, q.knowledge_answer, q.score) == ("What do I love?", None, 0.0)
    assert "personal:keep" in res.signature


def test_fallback_and_no_valid_question():
    resp, know = "Hmm, sounds nice.", "Bananas are yellow."
    kw = dict(cands={resp: []}, qg={}, qa={},
              nli=FakeNLI({("bananas are yellow.", resp.lower()): C}))
    res = scripted_scorer(**kw).score(responses=[resp], knowledge=[know])
    r = res.responses[0]
    assert (r.status, r.score, r.used_fallback, r.fallback_label) == ("fallback", 0.0, True, "contradiction")
    assert res.coverage == 0.0 and res.fallback_rate == 1.0
    # knowledge is lower-cased for the fallback premise, as in the original; switchable
    res = scripted_scorer(**kw, fallback_lowercase_knowledge=False).score(responses=[resp], knowledge=[know])
    assert res.responses[0].fallback_label == "neutral" and res.responses[0].score == 0.5
    res = scripted_scorer(**kw, fallback=False).score(responses=[resp], knowledge=[know])
    r = res.responses[0]
    assert (r.status, r.score) == ("no_valid_question", None)
    assert math.isnan(res.score) and res.stats.n_no_valid_question == 1


def test_duplicate_entity_mentions_count_twice_like_the_original():
    resp, know = "Miami is the largest city of Miami.", "Miami is a city in Florida."
    qg = FakeQG({("Miami", resp): ["What city is largest?"]})
    qa = FakeQA({("What city is largest?", resp): "Miami", ("What city is largest?", know): None})
    scorer = scripted_scorer(cands={resp: ["Miami", "Miami"]}, qg=qg, qa=qa)
    res = scorer.score(responses=[resp, resp], knowledge=[know, know], explain=True)
    assert [r.num_questions for r in res.responses] == [2, 2]
    # deduplicated work: one QG input, one response QA, one knowledge QA
    assert sum(len(c) for c in qg.calls) == 1
    assert sum(len(c) for c in qa.calls) == 2


# -- bad input ----------------------------------------------------------------------------------------------------
def test_bad_rows_get_errors_and_never_stop_the_rest():
    scorer = filter_scorer()
    responses = [R, "", "   ", None, 42, R, R]
    knowledge = [K, K, K, K, K, None, ""]
    res = scorer.score(responses=responses, knowledge=knowledge)
    st = [r.status for r in res.responses]
    assert st == ["scored"] + ["error"] * 6
    errors = [r.error for r in res.responses[1:]]
    assert errors == ["response is empty", "response is empty", "response is missing (None)",
                      "response must be a string, got int", "knowledge is missing (None)", "knowledge is empty"]
    assert res.stats.n_errors == 6 and res.coverage == 1.0
    assert len(res) == 7  # nothing dropped


def test_a_failing_component_fails_only_its_rows():
    k_bad = "this knowledge makes QA crash"
    scorer = filter_scorer()
    scorer.question_answerer.fail_on = {k_bad}
    res = scorer.score(responses=[R, R], knowledge=[k_bad, K])
    assert res.responses[0].status == "error"
    assert "question answering on the knowledge failed: RuntimeError: scripted failure" in res.responses[0].error
    assert res.responses[1].status == "scored"


def test_knowledge_may_be_a_list_of_sentences():
    res = filter_scorer().score(responses=[R], knowledge=[["Paris is the capital and most populous",
                                                            "city of France."]])
    assert res.responses[0].status == "scored"


@pytest.mark.parametrize(
    "kwargs, exc, msg",
    [
        (dict(responses="abc", knowledge=["x"]), TypeError, "Expected responses to be a list"),
        (dict(responses=["a"], knowledge=["x", "y"]), ValueError, "as many knowledge items"),
        (dict(responses=["a"], knowledge=["x"], history=[]), ValueError, "one history per response"),
    ],
)
def test_call_errors(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        filter_scorer().score(**kwargs)


def test_config_errors():
    with pytest.raises(ValueError, match="question_mode: must be one of"):
        Q2Config(question_mode="multi")
    with pytest.raises(ValueError, match="qg_num_return / qg_num_beams: .* cannot exceed"):
        Q2Config(qg_num_beams=2, qg_num_return=5)
    with pytest.raises(TypeError, match="Unknown Q2Config option"):
        Q2Config.from_dict({"qg_modle": "x"})
    with pytest.raises(TypeError, match="Expected a Q2Config"):
        Q2Scorer({"use_nli": False})


def test_results_are_json_and_add():
    scorer = paper_scorer()
    a = scorer.score(responses=[LA_RESP], knowledge=[LA_KNOW], explain=True)
    b = scorer.score(responses=[COFFEE_RESP, PANDA_RESP], knowledge=[COFFEE_KNOW, PANDA_KNOW], explain=True)
    whole = scorer.score(responses=[LA_RESP, COFFEE_RESP, PANDA_RESP], knowledge=[LA_KNOW, COFFEE_KNOW, PANDA_KNOW])
    assert (a + b).score == whole.score and (a.stats + b.stats).score == whole.score
    assert sum([a.stats, b.stats]).n == 3
    data = json.loads(a.to_json())
    assert data["q2"] == 1.0 and data["responses"][0]["questions"][0]["nli_label"] == "entailment"
    from q2_plugins.metric.results import Q2Result

    assert Q2Result.from_dict(data).to_dict() == data
    other = paper_scorer(use_nli=False).score(responses=[LA_RESP], knowledge=[LA_KNOW])
    with pytest.raises(ValueError, match="different signatures"):
        a + other


def test_highlight_template():
    from q2_plugins.backends.hf.transformers_models import highlight

    assert highlight("Paris", "I love Paris and Paris loves me") == "I love <hl> Paris <hl> and Paris loves me"
    assert highlight("Rome", "I love Paris") == "I love Paris"
    Q2Config(qg_input_template="generate question: {highlighted}")
    with pytest.raises(ValueError, match="qg_input_template"):
        Q2Config(qg_input_template="question for {answer}")


def test_an_input_asked_again_in_a_later_round_is_not_computed_again():
    # both candidates' beams hold "Which city?": round 1 asks it for "Paris" (it answers "Paris"), round 2 would ask
    # it again for "France" after "What country?" fails; its answer is reused, and the filter still judges it
    # against "France" (a mismatch)
    qa = FakeQA({("Which city?", R): "Paris", ("Which city?", K): "Paris"})
    scorer = scripted_scorer(
        cands={R: ["Paris", "France"]},
        qg={("Paris", R): ["Which city?"], ("France", R): ["What country?", "Which city?"]},
        qa=qa,
    )
    r = scorer.score(responses=[R], knowledge=[K], explain=True).responses[0]
    assert [q.question for q in r.questions] == ["Which city?"]
    assert [(d.candidate, d.question, d.reason) for d in r.dropped] == [
        ("France", "What country?", "no_answer_in_response"), ("France", "Which city?", "answer_mismatch")]
    asked = [p for call in qa.calls for p in call]
    assert asked.count(("Which city?", R)) == 1
    # a new score() call computes again (nothing is kept between calls without --cache-dir)
    scorer.score(responses=[R], knowledge=[K])
    assert [p for call in qa.calls for p in call].count(("Which city?", R)) == 2
