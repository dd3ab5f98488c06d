"""spaCy's work done ahead in a worker process (runs whose models are on a GPU): the next chunk's candidates, and a
round's personal decisions while its questions are answered. Results identical to the scorer's own, and the
foreground parses none of the texts done ahead; a worker that cannot start leaves the work to the foreground."""

from __future__ import annotations

import json
from pathlib import Path

from q2_plugins import Q2Config
from q2_plugins.jobs.local import _with_next
from q2_plugins.metric.spacy_worker import off_cpu
from q2_plugins.scorer import Q2Scorer

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


def test_candidates_done_ahead_give_identical_results(tiny_config):
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()][:6]
    first, second = rows[:3], rows[3:]
    config = tiny_config.replace(cpu_kernels="torch")
    plain = Q2Scorer(config)
    expected = [plain.score(responses=[r["response"] for r in part], knowledge=[r["knowledge"] for r in part],
                            explain=True).responses for part in (first, second)]
    scorer = Q2Scorer(config)
    scorer.ahead([r["response"] for r in second])
    foreground = []
    inner = scorer.candidate_extractor
    real = inner.extract
    inner.extract = lambda texts: foreground.extend(texts) or real(texts)
    got = [scorer.score(responses=[r["response"] for r in part], knowledge=[r["knowledge"] for r in part],
                        explain=True).responses for part in (first, second)]
    assert [[r.to_dict() for r in part] for part in got] == [[r.to_dict() for r in part] for part in expected]
    assert not set(foreground) & {r["response"] for r in second}  # the second chunk's were done ahead
    assert set(foreground) >= {r["response"] for r in first}


def test_chunks_hand_the_next_one_ahead():
    seen = []
    chunks = [[{"response": "a"}], [{"response": "b"}, {"response": "c"}], [{"response": "d"}]]
    out = []
    for chunk in _with_next(iter(chunks), seen.append, "response"):
        out.append(chunk)
        assert len(seen) == min(len(out), 2)  # handed over before the current chunk is scored
    assert out == chunks and seen == [["b", "c"], ["d"]]
    assert list(_with_next(iter(chunks), None, "response")) == chunks
    assert not off_cpu(Q2Config()) and off_cpu(Q2Config(qa_device="cuda"))


# -- the personal filter: only the questions a round reaches, and (models off the CPU) beside the answerer ----------
R = "Paris is the capital of France and I love it."
K = "Paris is the capital and most populous city of France."
QG = {("Paris", R): ["What do I love?", "Which city do you love?", "What is the capital of France?",
                     "What city is the capital?"],
      ("France", R): ["Paris is the capital of what?", "Where is Paris?"]}
QA = {("What do I love?", R): "Paris", ("What is the capital of France?", R): "Paris",
      ("What is the capital of France?", K): "Paris", ("What city is the capital?", R): "paris.",
      ("Paris is the capital of what?", R): "France and I", ("Where is Paris?", R): "France",
      ("Where is Paris?", K): "city of France"}


class _Asked:
    """A personal filter that records what it is asked (``personal``: the personal questions)."""

    signature = "asked"

    def __init__(self, personal):
        self.personal, self.asked = set(personal), []

    def is_personal(self, questions):
        self.asked.extend(questions)
        return [q in self.personal for q in questions]


def test_the_personal_filter_sees_only_the_questions_the_rounds_reach():
    from tests.fakes import scripted_scorer

    personal = _Asked(["What do I love?", "Which city do you love?"])
    res = scripted_scorer(cands={R: ["Paris", "France"]}, qg=QG, qa=QA, personal=personal).score(
        responses=[R], knowledge=[K], explain=True)
    assert [q.question for q in res.responses[0].questions] == ["What is the capital of France?", "Where is Paris?"]
    # Paris: two personal ranks, then a valid one (its fourth rank is never reached); France: a mismatch, then valid
    assert sorted(personal.asked) == sorted(["What do I love?", "Which city do you love?",
                                             "What is the capital of France?", "Paris is the capital of what?",
                                             "Where is Paris?"])
    personal = _Asked(["What do I love?", "Which city do you love?"])
    scripted_scorer(cands={R: ["Paris", "France"]}, qg=QG, qa=QA, personal=personal, question_mode="all").score(
        responses=[R], knowledge=[K])
    assert sorted(personal.asked) == sorted(q for qs in QG.values() for q in qs)  # all mode reaches every rank


def _spacy_filter_scorer(**cfg):
    """Scripted models with the project's own spaCy personal filter (the one that can work in a worker process)."""
    from tests.fakes import FakeCandidates, FakeNLI, FakeQA, FakeQG

    r2 = "I think you would like Rome, my favourite city."
    k2 = "Rome is the capital of Italy."
    qg = dict(QG)
    qg[("Rome", r2)] = ["Which city would you like?", "What is my favourite city?", "What city do I think of?",
                        "Which city is named?"]
    qg[("Italy", r2)] = ["What is the capital of Italy?"]
    qa = dict(QA)
    qa |= {("Which city is named?", r2): "Rome", ("Which city is named?", k2): "Rome",
           ("Which city would you like?", r2): "Rome", ("What is the capital of Italy?", r2): "Italy",
           ("What is the capital of Italy?", k2): "Italy"}
    cands = FakeCandidates({R: ["Paris", "France"], r2: ["Rome", "Italy"]})
    scorer = Q2Scorer(Q2Config(**cfg), candidate_extractor=cands,
                      question_generator=FakeQG(qg), question_answerer=FakeQA(qa), nli=FakeNLI({}))
    return scorer, [R, r2], [K, k2]


def test_the_personal_filter_beside_the_answerer_decides_alike(monkeypatch):
    import threading

    import q2_plugins.metric.spacy_worker as ahead

    for cfg in ({}, {"max_questions": 1, "over_budget": "truncate"}, {"question_mode": "all"}):
        plain, responses, knowledge = _spacy_filter_scorer(**cfg)
        expected = plain.score(responses=responses, knowledge=knowledge, explain=True)
        assert not plain.parts().overlap
        monkeypatch.setattr(ahead, "off_cpu", lambda config: True)
        scorer, _, _ = _spacy_filter_scorer(**cfg)
        inner = scorer.personal_filter
        real, threads = inner.is_personal, []
        inner.is_personal = lambda qs, real=real, threads=threads: (
            threads.append(threading.current_thread().name) or real(qs))
        got = scorer.score(responses=responses, knowledge=knowledge, explain=True)
        monkeypatch.undo()
        assert scorer.parts().overlap is False  # (off_cpu is back)
        assert [r.to_dict() for r in got.responses] == [r.to_dict() for r in expected.responses]
        assert threads == []  # the foreground filter decided nothing: the worker's own pipeline did
        assert scorer._personal_background._worker is not None
        scorer._personal_background.close()
        dropped = {d.question for r in got.responses for d in (r.dropped or []) if d.reason == "personal"}
        assert {"What do I love?", "Which city would you like?", "What is my favourite city?"} <= dropped
        # the first round's answerer call held the personal questions too (answered while the filter parsed them)
        assert ("What do I love?", R) in scorer.question_answerer.calls[0]
        if cfg.get("max_questions") == 1:  # a candidate that tried its next ranks in the same round kept its place
            assert [q.question for q in got.responses[1].questions] == ["Which city is named?"]
        else:
            assert [q.question for q in got.responses[1].questions] == ["Which city is named?",
                                                                       "What is the capital of Italy?"]


def test_a_worker_that_cannot_start_leaves_the_work_to_the_foreground():
    from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy
    from q2_plugins.metric.spacy_worker import CandidatesAhead, PersonalAhead

    nlp = load_spacy("en_core_web_sm")
    texts = ["Paris is the capital of France.", "I love my dog Rex."]
    cands = CandidatesAhead(SpacyCandidateExtractor(nlp), "no_such_spacy_pipeline")
    cands.start(texts)
    assert cands.extract(texts) == SpacyCandidateExtractor(nlp).extract(texts)
    assert cands._broken and cands._worker is None  # the worker stopped at its load: not started again
    cands.start(texts)
    assert cands._worker is None and cands.extract(texts[:1]) == SpacyCandidateExtractor(nlp).extract(texts[:1])
    personal = PersonalAhead(SpacyPersonalFilter(nlp), "en_core_web_sm")
    questions = ["What do I love?", "Where is Paris?"]
    personal.start(questions)
    assert personal._pending == questions
    personal.wait()
    assert personal._done == {"What do I love?": (1, True), "Where is Paris?": (1, False)}  # done by the worker
    assert personal.is_personal(questions) == [True, False] and personal._done == {}
    personal.close()


def test_outputs_done_ahead_that_nobody_asks_for_are_not_kept_for_ever():
    from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, load_spacy
    from q2_plugins.metric.spacy_worker import CandidatesAhead

    cands = CandidatesAhead(SpacyCandidateExtractor(load_spacy("en_core_web_sm")), "en_core_web_sm")
    chunks = [[f"Paris is in France, said Anne number {i}."] for i in range(4)]
    cands.start(chunks[0])
    cands.start(chunks[1])  # chunk 0 is asked for after chunk 1 is started: kept
    assert set(cands._done) == set(chunks[0])
    cands.start(chunks[2])  # chunk 0 was never asked for: dropped; chunk 1 kept
    assert set(cands._done) == set(chunks[1])
    assert cands.extract(chunks[2]) == SpacyCandidateExtractor(load_spacy("en_core_web_sm")).extract(chunks[2])
    assert set(cands._done) == set(chunks[1])
    cands.close()


def test_a_long_call_is_scored_in_parts_each_parts_candidates_extracted_ahead(tiny_config, monkeypatch):
    import q2_plugins.metric.spacy_worker as ahead
    import q2_plugins.scorer as scorer_module

    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()][:5]
    responses, knowledge = [r["response"] for r in rows], [r["knowledge"] for r in rows]
    config = tiny_config.replace(cpu_kernels="torch")
    expected = Q2Scorer(config).score(responses=responses, knowledge=knowledge, explain=True)
    monkeypatch.setattr(ahead, "off_cpu", lambda config: True)
    monkeypatch.setattr(scorer_module, "AHEAD_ROWS", 2)
    scorer = Q2Scorer(config)
    foreground = []
    inner = scorer.candidate_extractor
    real = inner.extract
    inner.extract = lambda texts: foreground.extend(texts) or real(texts)
    got = scorer.score(responses=responses, knowledge=knowledge, explain=True, progress=True)
    assert [r.to_dict() for r in got.responses] == [r.to_dict() for r in expected.responses]
    assert [r.index for r in got.responses] == [0, 1, 2, 3, 4]
    assert got.stats == expected.stats and got.signature == expected.signature
    assert set(foreground) == set(responses[:2])  # parts 2 and 3 were extracted by the worker
    assert scorer.stage_items["candidates"] == len(set(responses))  # the parts' counts add up
    assert scorer.stage_items["qg"] == sum(1 for r in expected.responses for _ in (r.candidates or []))
    scorer._ahead.close()
