"""Span-level output: each question's candidate offsets in the response as given, and the ``spans`` of a response
(:mod:`q2_plugins.metric.spans`), on scripted parts, the recorded original run, the bundled sample with tiny models, and
the rows of ``q2 score --explain``."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.jobs.replay import load_original_steps, replay
from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.components import Replacement
from q2_plugins.metric.results import ResponseResult, Span
from q2_plugins.metric.spans import (
    Mention,
    candidate_offsets,
    locate,
    mentions_from_json,
    mentions_to_json,
    response_spans,
    to_original,
)
from tests.fakes import FakeCandidates, FakeCoref, FakeNLI, FakePersonal, FakeQA, FakeQG, scripted_scorer

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


def _q(start, end, score, kind="span"):
    return {"start": start, "end": end, "score": score, "knowledge_answer_kind": kind}


# -- the rules -------------------------------------------------------------------------------------------------------
def test_spans_merge_where_candidates_overlap_and_take_the_weakest():
    text = "Bob Ross was a painter in New York City."
    got = response_spans(text, [
        _q(0, 8, 1.0),                        # Bob Ross, supported
        _q(0, 8, 0.2),                        # a second question on the same mention: the lowest score
        _q(26, 39, 0.9),                      # New York City
        _q(26, 34, 0.0, "no_answer"),         # New York, inside it: unanswerable
        _q(13, 22, 0.6),                      # a painter
        _q(22, 26, 1.0),                      # " in " touches "a painter" and "New York City": stays apart
        {"start": None, "end": None, "score": 0.0, "knowledge_answer_kind": "span"},  # no offsets: left out
    ])
    assert [(s.start, s.end, s.text, s.score, s.label) for s in got] == [
        (0, 8, "Bob Ross", 0.2, "unsupported"),
        (13, 22, "a painter", 0.6, "supported"),
        (22, 26, " in ", 1.0, "supported"),
        (26, 39, "New York City", 0.0, "unanswerable"),
    ]


def test_labels_and_the_threshold():
    assert [s.label for s in response_spans("abcdef", [_q(0, 1, 0.5), _q(2, 3, 0.51), _q(4, 5, 1.0, "no_answer")])
            ] == ["unsupported", "supported", "unanswerable"]
    # unsupported and unanswerable merged: unsupported
    assert response_spans("abcdef", [_q(0, 3, 0.1), _q(1, 2, 0.0, "no_answer")])[0].label == "unsupported"


def test_located_candidates_take_successive_occurrences_as_whole_words():
    text = "The ship left the port; the ship-yard built the ship."
    # "he" is in no whole word: its first occurrence inside one
    assert locate(text, ["the ship", "the ship", "ship-yard", "port", "he", "absent", "the ship"]) == [
        (24, 32), (44, 52), (28, 37), (18, 22), (1, 3), None, (44, 52)]
    assert locate("Paris and paris", ["PARIS"]) == [(0, 5)]  # case ignored only when there is no exact match


def test_offsets_through_a_coreference_rewrite():
    original = "he said she knew his dog well"
    reps = [Replacement(0, 2, "he", "Bob Ross"), Replacement(8, 11, "she", "Ann Lee"),
            Replacement(17, 20, "his", "Bob Ross's")]
    resolved = "Bob Ross said Ann Lee knew Bob Ross's dog well"
    cands = ["Bob Ross", "Ann Lee", "Bob Ross's dog", "well", "said"]
    assert [resolved[s:e] for s, e in locate(resolved, cands)] == cands
    mapped = candidate_offsets(resolved, cands, reps)
    assert [original[s:e] for s, e in mapped] == ["he", "she", "his dog", "well", "said"]
    assert to_original(0, 2, []) == (0, 2)


def test_mentions_keep_their_offsets_through_json_and_pickle():
    m = Mention("New York", 3, 11)
    assert m == "New York" and hash(m) == hash("New York") and json.dumps(m) == '"New York"'
    back = pickle.loads(pickle.dumps(m))
    assert (type(back), back.start, back.end) == (Mention, 3, 11)
    data = json.loads(json.dumps(mentions_to_json([m, "plain"])))
    got = mentions_from_json(data)
    assert got == ["New York", "plain"] and got[0].start == 3 and not isinstance(got[1], Mention)
    assert mentions_from_json(["New York"]) is None  # a candidates entry cached before offsets: a miss


# -- the live pipeline on scripted parts ----------------------------------------------------------------------------
R = "Paris is in France, and Paris is old."
K = "Paris is the capital of France."


def _paris(cands):
    return scripted_scorer(
        cands={R: cands},
        qg={("Paris", R): ["What is in France?"], ("France", R): ["Where is Paris?"],
            ("old", R): ["What is Paris?"]},
        qa={("What is in France?", R): "Paris", ("What is in France?", K): "Paris",
            ("Where is Paris?", R): "France", ("Where is Paris?", K): "France",
            ("What is Paris?", R): "old", ("What is Paris?", K): None},
        question_mode="single", use_nli=False)


def test_extractor_offsets_are_used_as_given():
    # the second "Paris" is the mention: a later string search would find the first
    res = _paris([Mention("Paris", 24, 29), Mention("France", 12, 18), Mention("old", 33, 36)]).score(
        responses=[R], knowledge=[K], explain=True).responses[0]
    assert [(q.candidate, q.start, q.end) for q in res.questions] == [("Paris", 24, 29), ("France", 12, 18),
                                                                     ("old", 33, 36)]
    assert type(res.candidates[0]) is str and type(res.questions[0].candidate) is str
    assert [(s.text, s.label) for s in res.spans] == [("France", "supported"), ("Paris", "supported"),
                                                      ("old", "unanswerable")]
    d = res.to_dict()
    assert d["spans"][0] == {"start": 12, "end": 18, "text": "France", "score": 1.0, "label": "supported"}
    assert ResponseResult.from_dict(json.loads(json.dumps(d))).to_dict() == d


def test_plain_candidates_are_located_and_explanations_off_carry_no_spans():
    scorer = _paris(["Paris", "France"])
    res = scorer.score(responses=[R], knowledge=[K], explain=True).responses[0]
    assert [(q.start, q.end) for q in res.questions] == [(0, 5), (12, 18)]
    bare = scorer.score(responses=[R], knowledge=[K]).responses[0]
    assert bare.spans is None and "spans" not in bare.to_dict()


def test_a_fallback_row_has_no_spans_and_an_error_row_none():
    scorer = _paris([])
    res = scorer.score(responses=[R, ""], knowledge=[K, K], explain=True).responses
    assert res[0].status == "fallback" and res[0].spans == [] and res[0].to_dict()["spans"] == []
    assert res[1].status == "error" and res[1].spans is None


def test_spans_change_no_score_and_no_signature():
    with_offsets = _paris([Mention("Paris", 24, 29), Mention("France", 12, 18)])
    plain = _paris(["Paris", "France"])
    a = with_offsets.score(responses=[R], knowledge=[K], explain=True)
    b = plain.score(responses=[R], knowledge=[K], explain=True)
    assert a.scores == b.scores and str(a.signature) == str(b.signature)


def test_cached_candidates_keep_their_offsets_and_old_entries_are_recomputed(tmp_path):
    cache = Q2Cache(tmp_path / "cache")
    cands = [Mention("Paris", 24, 29), Mention("France", 12, 18)]

    def scorer():
        s = _paris(cands)
        s.cache = cache
        return s

    first = scorer().score(responses=[R], knowledge=[K], explain=True).responses[0]
    second_scorer = scorer()
    second = second_scorer.score(responses=[R], knowledge=[K], explain=True).responses[0]
    assert second_scorer._candidates.calls == []  # from the cache, with the offsets
    assert second.to_dict() == first.to_dict() and second.questions[0].start == 24
    key = second_scorer.stage_keys(["candidates"])["candidates"]
    cache.put_many(key, [([R], ["Paris", "France"])])  # as written before offsets
    third_scorer = scorer()
    third = third_scorer.score(responses=[R], knowledge=[K], explain=True).responses[0]
    assert third_scorer._candidates.calls == [[R]] and third.to_dict() == first.to_dict()


def test_coref_offsets_are_the_replaced_pronoun():
    history, response = "Bob Ross was a painter", "he became famous on youtube"
    resolved = "Bob Ross became famous on youtube"
    knowledge = "Bob Ross became an Internet celebrity, popular with fans on YouTube."
    qg = FakeQG({("Bob Ross", resolved): ["Who became famous on youtube?"],
                 ("youtube", resolved): ["Where did Bob Ross become famous?"]})
    qa = FakeQA({("Who became famous on youtube?", resolved): "Bob Ross",
                 ("Who became famous on youtube?", knowledge): "Bob Ross",
                 ("Where did Bob Ross become famous?", resolved): "youtube",
                 ("Where did Bob Ross become famous?", knowledge): "YouTube"})
    scorer = Q2Scorer(Q2Config(coref=True, use_nli=False),
                      candidate_extractor=FakeCandidates({resolved: [Mention("Bob Ross", 0, 8),
                                                                     Mention("youtube", 26, 33)]}),
                      question_generator=qg, question_answerer=qa, nli=FakeNLI({}), personal_filter=FakePersonal(),
                      coreference=FakeCoref({(history, response): [["Bob Ross", "he"]]}))
    res = scorer.score(responses=[response], knowledge=[knowledge], history=[history], explain=True).responses[0]
    assert [response[q.start:q.end] for q in res.questions] == ["he", "youtube"]
    assert [s.text for s in res.spans] == ["he", "youtube"]


# -- the recorded original run: every recorded candidate located -------------------------------------------------------
@pytest.mark.slow
def test_every_recorded_candidate_is_located_in_its_response(shared_data):
    n = repeated = 0
    for folder in sorted((shared_data / "q2_original_run").iterdir()):
        if not folder.is_dir():
            continue
        records = load_original_steps(folder / f"{folder.name}_out.steps.csv")
        result = replay(records, explain=True)
        for rec, res in zip(records, result.responses):
            cands = [q.candidate for q in res.questions]
            for q in res.questions:
                assert q.start is not None and rec.response[q.start:q.end] == q.candidate, (rec.id, q.candidate)
                n += 1
            repeated += len(cands) - len(set(cands))
            # one question per candidate in the original run: a repeated mention takes its next occurrence
            assert len({(q.start, q.end) for q in res.questions}) == len(cands), rec.id
            for s in res.spans:
                assert rec.response[s.start:s.end] == s.text
    assert n == 1300 and repeated > 0


# -- the bundled sample on tiny models, and the rows of q2 score --explain -------------------------------------------
class _EchoQG:
    """A question per candidate that names it, so the echo answerer gives it back: every candidate gets a valid
    question (random tiny models rarely give one)."""

    signature = "echo-qg"

    def generate(self, pairs):
        return [[f"which is {cand}?"] for cand, _ in pairs]


class _EchoQA:
    signature = "echo-qa"

    def __init__(self, knowledge):
        self.knowledge = set(knowledge)

    def answer(self, pairs):
        from q2_plugins.metric.components import Answer

        out = []
        for question, context in pairs:
            cand = question[len("which is "):-1]
            out.append(Answer.none() if context in self.knowledge and cand.lower() not in context.lower()
                       else Answer.span(cand))
        return out


def test_sample_offsets_are_spacys_mentions(tiny_config):
    """Every candidate spaCy finds in the bundled sample gets a question; each question's offsets hold its candidate
    (repeated mentions, hyphens and all), and the spans hold their text."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    rows.append({"response": "A well-known chef from Winston-Salem met a well-known  chef in Winston-Salem.",
                 "knowledge": "The chef lives in Winston-Salem."})  # (hyphens, and a double space)
    knowledge = [r["knowledge"] for r in rows]
    scorer = Q2Scorer(tiny_config.replace(use_nli=False, remove_personal=False), question_generator=_EchoQG(),
                      question_answerer=_EchoQA(knowledge))
    result = scorer.score(responses=[r["response"] for r in rows], knowledge=knowledge, explain=True)
    n = repeated = hyphens = 0
    labels = set()
    for r, res in zip(rows, result.responses):
        assert len(res.questions) == len(res.candidates)
        for q in res.questions:
            assert r["response"][q.start:q.end] == q.candidate
            n += 1
            hyphens += "-" in q.candidate
        repeated += len(res.candidates) - len(set(res.candidates))
        for s in res.spans:
            assert r["response"][s.start:s.end] == s.text
            labels.add(s.label)
    assert n > 40 and repeated > 0 and hyphens > 0 and labels == {"supported", "unanswerable"}


def test_score_rows_carry_spans(tiny_config, tmp_path):
    from q2_plugins.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(line + "\n" for line in SAMPLE.read_text().splitlines()[:3]))
    out = tmp_path / "out.jsonl"
    c = tiny_config
    assert main(["score", "--input", str(src), "--output", str(out), "--explain", "--qg-model", c.qg_model,
                 "--qa-model", c.qa_model, "--nli-model", c.nli_model, "--qg-max-length", "12"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(isinstance(row["spans"], list) for row in rows)
    for row in rows:
        for s in row["spans"]:
            assert row["response"][s["start"]:s["end"]] == s["text"]
    assert all(Span(**s) for row in rows for s in row["spans"])


# -- the example of docs/spans.md --------------------------------------------------------------------------------------
DOC_RESPONSE = "Bob Ross was an American painter who hosted The Joy of Painting on CNN."
DOC_KNOWLEDGE = ("Robert Norman Ross was an American painter and television host. He was the creator and host of "
                 "The Joy of Painting, which aired on PBS.")
_DOC_ANSWERS = {"Bob Ross": "Robert Norman Ross", "American": "American", "an American painter": "an American painter",
                "The Joy of Painting": "The Joy of Painting", "The Joy": "The Joy",
                "Painting": "Painting", "CNN": "PBS"}  # "who": no answer in the knowledge


class _DocQA:
    signature = "doc-qa"

    def answer(self, pairs):
        from q2_plugins.metric.components import Answer

        cand = [q[len("which is "):-1] for q, _ in pairs]
        return [Answer.span(c) if ctx == DOC_RESPONSE else Answer.span(_DOC_ANSWERS[c]) if c in _DOC_ANSWERS
                else Answer.none() for c, (_, ctx) in zip(cand, pairs)]


def doc_example():
    """docs/spans.md's response scored with spaCy's candidates and scripted questions, answers and NLI."""
    from q2_plugins.metric.components import NLILabel

    nli = FakeNLI({("which is Bob Ross? Robert Norman Ross.", "which is Bob Ross? Bob Ross."): NLILabel.ENTAILMENT,
                   ("which is CNN? PBS.", "which is CNN? CNN."): NLILabel.CONTRADICTION})
    scorer = Q2Scorer(Q2Config(remove_personal=False), question_generator=_EchoQG(), question_answerer=_DocQA(),
                      nli=nli)
    return scorer.score(responses=[DOC_RESPONSE], knowledge=[DOC_KNOWLEDGE], explain=True)


def test_the_docs_example_is_what_the_scorer_gives():
    import re

    res = doc_example().responses[0]
    doc = (Path(__file__).resolve().parents[3] / "docs" / "spans.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- spans: example -->\s*\n```json\n(.*?)\n```", doc, flags=re.S)
    assert block, "docs/spans.md lost its spans block"
    assert json.loads(block.group(1)) == res.to_dict()["spans"]
    assert {s.label for s in res.spans} == {"supported", "unsupported", "unanswerable"}
