"""BEGIN's taxonomy from Q² evidence: the rules as a golden table (pure), the text signals on real spaCy parses, and
the labels the scorer attaches with scripted components."""

from __future__ import annotations

import pytest

from q2_plugins import Q2Scorer
from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.components import NLILabel
from q2_plugins.metric.results import Q2Result, QuestionResult, ResponseResult, ResponseStatus
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.metric.taxonomy import (
    COARSE,
    DEFAULT_THRESHOLDS,
    LABELS,
    SpacyTextSignals,
    TaxonomyThresholds,
    TextSignals,
    classify,
    classify_texts,
)
from tests.fakes import scripted_scorer


def q(kind="span", nli=None, f1=1.0, score=None):
    return QuestionResult("c", "q?", "c", None if kind == "no_answer" else "k", kind, f1, nli,
                          f1 if score is None else score)


def scored(*questions, score=None):
    qs = list(questions)
    s = score if score is not None else sum(x.score for x in qs) / len(qs)
    return ResponseResult(0, ResponseStatus.SCORED, score=s, score_no_nli=s, num_questions=len(qs), questions=qs)


def no_question(fallback=None):
    if fallback is None:
        return ResponseResult(0, ResponseStatus.NO_VALID_QUESTION, questions=[])
    return ResponseResult(0, ResponseStatus.FALLBACK, score=0.5, used_fallback=True, fallback_label=fallback,
                          questions=[])


GROUNDED = TextSignals(content_words=8, supported_words=7, first_person=False)  # support 0.875
VAGUE = TextSignals(content_words=3, supported_words=0, first_person=True)
VAGUE_SUPPORTED = TextSignals(content_words=4, supported_words=3, first_person=False)
UNRELATED = TextSignals(content_words=9, supported_words=0, first_person=False)
PARTLY = TextSignals(content_words=10, supported_words=5, first_person=False)  # support 0.5 < 0.6
PERSONAL = TextSignals(content_words=8, supported_words=7, first_person=True)


@pytest.mark.parametrize("result, signals, label, reason", [
    # generic: vague and unrelated, or vague with no valid question (whatever the evidence says otherwise)
    (None, VAGUE, "generic", "generic: vague (3 content words), 0 of 3 content words in the knowledge"),
    (scored(q()), VAGUE, "generic", "generic: vague"),
    (no_question(), VAGUE_SUPPORTED, "generic", "generic: vague (4 content words) and no valid question"),
    (no_question("entailment"), VAGUE_SUPPORTED, "generic", "and no valid question"),
    # off-topic: little relation to the knowledge
    (None, UNRELATED, "off-topic", "off-topic: 0 of 9 content words in the knowledge"),
    (scored(q(nli="contradiction", score=0.0)), UNRELATED, "off-topic", "off-topic"),
    # contradiction: NLI on answers, or the end-to-end fallback
    (scored(q(nli="contradiction", f1=0.2, score=0.0), q()), GROUNDED, "contradiction",
     "contradiction: NLI contradicts 1 of 2 answers"),
    (no_question("contradiction"), GROUNDED, "contradiction", "end-to-end NLI says contradiction"),
    # hallucination: unanswerable questions, a low Q², a neutral fallback, little support, personal
    (scored(q("no_answer", f1=0.0), q()), GROUNDED, "hallucination",
     "hallucination: 1 of 2 questions have no answer in the knowledge"),
    (scored(q(nli="neutral", f1=0.4)), GROUNDED, "hallucination", "hallucination: Q2 0.40 over 1 questions"),
    (no_question("neutral"), GROUNDED, "hallucination", "end-to-end NLI says neutral"),
    (None, PARTLY, "hallucination", "hallucination: only 5 of 10 content words in the knowledge (50%)"),
    (scored(q()), PERSONAL, "hallucination", "personal: the speaker is a subject"),
    # entailment: everything agrees
    (scored(q(), q(nli="entailment", f1=0.5, score=1.0)), GROUNDED, "entailment",
     "entailment: Q2 1.00 over 2 questions; 7 of 8 content words in the knowledge"),
    (None, GROUNDED, "entailment", "entailment: text signals only; 7 of 8"),
    (no_question("entailment"), GROUNDED, "entailment", "no valid question; end-to-end NLI says entailment"),
    (no_question(), GROUNDED, "entailment", "no valid question and no fallback"),
])
def test_rules_golden_table(result, signals, label, reason):
    verdict = classify(result, signals)
    assert (verdict.label, verdict.label3) == (label, COARSE[label])
    assert verdict.reason.startswith(reason) or reason in verdict.reason, verdict.reason


def test_shares_and_thresholds():
    one_of_three = scored(q(nli="contradiction", f1=0.2, score=0.0), q(), q())
    assert classify(one_of_three, GROUNDED).label == "entailment"  # 1/3 < 0.5: Q² 0.67 and support agree
    strict = TaxonomyThresholds(contradiction_min_share=0.3)
    assert classify(one_of_three, GROUNDED, strict).label == "contradiction"
    assert classify(None, PERSONAL, TaxonomyThresholds(first_person_is_personal=False)).label == "entailment"
    with pytest.raises(ValueError, match="entailment_min_support must be in"):
        TaxonomyThresholds(entailment_min_support=1.5)


def test_result_without_questions_uses_status_and_score():
    # a result read back from a file written without --explain: no question shares, the score still counts
    lean = ResponseResult(0, ResponseStatus.SCORED, score=0.2, score_no_nli=0.2, num_questions=3)
    assert classify(lean, GROUNDED).label == "hallucination"
    lean.score = 0.9
    assert classify(lean, GROUNDED).label == "entailment"


def test_not_labelled():
    err = ResponseResult(0, ResponseStatus.ERROR, error="boom")
    assert classify(err, GROUNDED).label is None and "could not be scored" in classify(err, GROUNDED).reason
    assert classify(scored(q()), None).label is None


def test_coarse_mapping_and_label_set():
    assert set(COARSE) == set(LABELS)
    assert {COARSE[lab] for lab in LABELS} == {"entailment", "neutral", "contradiction"}
    assert DEFAULT_THRESHOLDS == TaxonomyThresholds()


# -- text signals on real parses ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


def test_text_signals(nlp):
    know = "Elvis Aaron Presley was an American singer, musician, and actor."
    got = SpacyTextSignals(nlp).compute([
        ("He was an American singer and actor.", know),
        ("I love his songs!", know),
        ("yeah, it can be scary", know),
        ("Singers sing songs.", know),  # "singers" matches through its lemma "singer"
    ])
    assert got[0] == TextSignals(content_words=3, supported_words=3, first_person=False)
    assert got[1].first_person and got[1].supported_words == 0
    assert got[2].content_words <= 2 and got[2].support == 0.0
    assert got[3].supported_words == 1
    assert [v.label for v in classify_texts(["He was an American singer and actor.", "yeah, it can be scary"],
                                            [know, know], nlp=nlp)] == ["entailment", "generic"]


# -- attached by the scorer -----------------------------------------------------------------------------------------
R_OK = "Elvis Presley was an American singer."
R_VAGUE = "yeah, it can be scary"
R_NO_ANSWER = "Elvis Presley was born in Tupelo in 1935."
R_CONTRA = "Elvis Presley was a British singer."
KNOW = "Elvis Aaron Presley was an American singer, musician, and actor."


def scripted(**cfg) -> Q2Scorer:
    return scripted_scorer(
        {R_OK: ["American"], R_VAGUE: [], R_NO_ANSWER: ["Tupelo"], R_CONTRA: ["British"]},
        {("American", R_OK): ["What nationality was Elvis?"], ("Tupelo", R_NO_ANSWER): ["Where was Elvis born?"],
         ("British", R_CONTRA): ["What nationality was Elvis?"]},
        {("What nationality was Elvis?", R_OK): "American", ("What nationality was Elvis?", KNOW): "American",
         ("Where was Elvis born?", R_NO_ANSWER): "Tupelo", ("What nationality was Elvis?", R_CONTRA): "British"},
        {("What nationality was Elvis? American.", "What nationality was Elvis? British."): NLILabel.CONTRADICTION},
        **cfg,
    )


RESPONSES = [R_OK, R_VAGUE, R_NO_ANSWER, R_CONTRA, ""]


def test_scorer_attaches_a_label_to_every_result_when_asked_with_or_without_explain(tmp_path):
    scorer = scripted()
    unlabelled = scorer.score(responses=RESPONSES, knowledge=[KNOW] * 5).responses
    assert all(r.label is None and r.label_reason is None for r in unlabelled)
    plain = scorer.score(responses=RESPONSES, knowledge=[KNOW] * 5, label=True)
    explained = scorer.score(responses=RESPONSES, knowledge=[KNOW] * 5, explain=True, label=True)
    labels = [(r.label, r.label3) for r in plain.responses]
    assert labels == [("entailment", "entailment"), ("generic", "neutral"), ("hallucination", "neutral"),
                      ("contradiction", "contradiction"), (None, None)]
    assert [(r.label, r.label_reason) for r in explained.responses] == \
        [(r.label, r.label_reason) for r in plain.responses]
    assert plain.responses[0].questions is None and explained.responses[0].questions is not None
    assert plain.responses[2].label_reason == "hallucination: 1 of 1 questions have no answer in the knowledge"
    assert plain.responses[4].label_reason == "not labelled: the response could not be scored"
    # JSON round trip keeps the labels
    data = explained.to_dict()
    assert data["responses"][3]["label"] == "contradiction" and "label_reason" in data["responses"][0]
    assert Q2Result.from_dict(data).to_dict() == data


def test_a_result_can_be_labelled_afterwards():
    scorer = scripted()
    asked = scorer.score(responses=RESPONSES, knowledge=[KNOW] * 5, explain=True, label=True)
    later = scorer.score(responses=RESPONSES, knowledge=[KNOW] * 5, explain=True)
    assert scorer.label(later, responses=RESPONSES, knowledge=[KNOW] * 5) is later
    assert later.to_dict() == asked.to_dict()
    with pytest.raises(ValueError, match="Expected the 5 responses"):
        scorer.label(later, responses=RESPONSES[:2], knowledge=[KNOW] * 2)


def test_signals_are_cached_with_the_other_stages(tmp_path, monkeypatch):
    cache = Q2Cache(tmp_path / "cache")
    first = scripted().score(responses=RESPONSES[:2], knowledge=[KNOW] * 2, label=True)
    scorer = scripted()
    scorer.cache = cache
    scorer.score(responses=RESPONSES[:2], knowledge=[KNOW] * 2, label=True)
    rerun = scripted()
    rerun.cache = cache

    def exploding(self, pairs):
        raise AssertionError("signals recomputed although cached")

    monkeypatch.setattr(SpacyTextSignals, "compute", exploding)
    again = rerun.score(responses=RESPONSES[:2], knowledge=[KNOW] * 2, label=True)
    assert [r.label for r in again.responses] == [r.label for r in first.responses]


def test_a_signals_failure_leaves_the_score_and_says_why(monkeypatch):
    def broken(self, pairs):
        raise RuntimeError("no parser")

    monkeypatch.setattr(SpacyTextSignals, "compute", broken)
    r = scripted().score(responses=[R_OK], knowledge=[KNOW], label=True).responses[0]
    assert (r.status, r.score, r.label) == ("scored", 1.0, None)
    assert r.label_reason == "not labelled: text signals failed: RuntimeError: no parser"
