"""Reranking with early stop (q2_plugins.metric.contest): over random score tables on scripted components, the best
candidate is the one full scoring picks, the candidates left in play score as in full scoring, and work is saved;
the filter asks one batched QA per round across every candidate of the call."""

from __future__ import annotations

import random
from typing import Sequence

import pytest

from q2_plugins.integrations.rerank import rerank_batch
from q2_plugins.metric.components import Answer, NLILabel
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.contest import Contest, score_bounds
from q2_plugins.metric.runner import Row
from tests.fakes import FakeQA, scripted_scorer

WORDS = ["red", "blue", "green", "tall", "old", "paris", "music", "river"]


class HashedNLI:
    """An NLI label per pair drawn from the pair and a seed (so any pair the scorer makes has a scripted label)."""

    signature = "fake-nli-hashed"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.calls: list[list[tuple[str, str]]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]:
        self.calls.append(list(pairs))
        labels = list(NLILabel)
        return [labels[random.Random(f"{self.seed}|{p}|{h}").randrange(3)] for p, h in pairs]


def _table(rng: random.Random, groups: int):
    """Scripted tables for ``groups`` inputs of 2-5 candidate responses: answer candidates, beams of questions,
    answers on the response (valid, mismatch or none) and on the knowledge (full, partial, other or none)."""
    cands, qg, qa, personal = {}, {}, {}, set()
    candidates, knowledge = [], []
    for g in range(groups):
        know = f"knowledge {g} " + " ".join(rng.sample(WORDS, 4))
        knowledge.append(know)
        group = []
        for j in range(rng.randint(2, 5)):
            resp = f"response {g} {j}"
            group.append(resp)
            answers = [" ".join(rng.sample(WORDS, rng.randint(1, 2))) + f" {g}{j}{k}" for k in range(rng.randint(0, 3))]
            cands[resp] = answers
            for k, a in enumerate(answers):
                beams = [f"q {g} {j} {k} {b}?" for b in range(rng.randint(1, 4))]
                qg[(a, resp)] = beams
                for q in beams:
                    if rng.random() < 0.1:
                        personal.add(q)
                    roll = rng.random()
                    qa[(q, resp)] = a if roll < 0.55 else (None if roll < 0.8 else "something else")
                    roll = rng.random()
                    words = a.split()
                    qa[(q, know)] = (None if roll < 0.2 else a if roll < 0.45 else
                                     " ".join(words[: max(1, len(words) - 1)]) + " extra" if roll < 0.8
                                     else "unrelated words")
        candidates.append(group)
    return cands, qg, qa, sorted(personal), candidates, knowledge


def _config(rng: random.Random) -> dict:
    budget = rng.choice([0, 0, 1, 2])
    return {"question_mode": rng.choice(["single", "single", "all"]), "use_nli": rng.random() < 0.7,
            "fallback": rng.random() < 0.7, "discard_unanswerable": rng.random() < 0.3, "max_questions": budget,
            "over_budget": rng.choice(["truncate", "error"]), "remove_personal": rng.random() < 0.5}


def _run(seed: int, early_stop: bool, weight: float, tables, cfg):
    cands, qg, qa_table, personal, candidates, knowledge = tables
    qa = FakeQA(qa_table)
    scorer = scripted_scorer(cands, qg, qa, HashedNLI(seed), personal, **cfg)
    rng = random.Random(seed)
    seq = [[rng.uniform(-3, 0) for _ in group] for group in candidates]
    ranked = rerank_batch(candidates, knowledge, sequence_scores=seq, weight=weight, scorer=scorer,
                          early_stop=early_stop)
    return ranked, sum(len(c) for c in qa.calls)


@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_the_best_candidate_is_the_one_full_scoring_picks_over_random_tables(weight):
    asked = {True: 0, False: 0}
    stopped = 0
    for seed in range(250):
        rng = random.Random(seed)
        tables, cfg = _table(rng, rng.randint(1, 3)), _config(rng)
        full, asked_full = _run(seed, False, weight, tables, cfg)
        early, asked_early = _run(seed, True, weight, tables, cfg)
        asked[False] += asked_full
        asked[True] += asked_early
        for f, e in zip(full, early):
            assert e.best == f.best, (seed, cfg, f.keys, e.keys)
            for j, was_stopped in enumerate(e.stopped):
                stopped += was_stopped
                if not was_stopped:  # a candidate left in play scores as in full scoring
                    assert (e.q2[j], e.keys[j]) == (f.q2[j], f.keys[j]), (seed, j)
                    assert e.results[j].to_dict() == f.results[j].to_dict()
                else:
                    assert e.results[j].status == "stopped" and e.q2[j] is None and j != e.best
            assert not any(f.stopped)
            assert e.order[: len(e.order) - sum(e.stopped)] == [j for j in f.order if not e.stopped[j]]
        assert asked_early <= asked_full
    assert stopped > 0 and asked[True] < asked[False]  # (the loop would pass vacuously without any stop)


def test_explain_scores_every_candidate_to_the_end():
    rng = random.Random(7)
    cands, qg, qa, personal, candidates, knowledge = _table(rng, 3)
    scorer = scripted_scorer(cands, qg, qa, HashedNLI(7), personal)
    ranked = rerank_batch(candidates, knowledge, scorer=scorer, explain=True)
    assert not any(s for r in ranked for s in r.stopped)
    assert all(res.status != "stopped" for r in ranked for res in r.results)


class FailingPair(FakeQA):
    """Fails on the pairs ``bad`` (a batch holding one fails, then each item alone)."""

    def __init__(self, table, bad) -> None:
        super().__init__(table)
        self.bad = set(bad)

    def answer(self, pairs):
        if self.bad & set(pairs):
            raise RuntimeError("scripted failure")
        return super().answer(pairs)


def test_a_candidate_in_play_that_fails_makes_its_input_scored_in_full():
    """The bounds do not foresee a component failing: "good" looks certain to win (the others stop), then its second
    knowledge answer fails; full scoring then picks "bad", and so must the early stop."""
    cands = {"good": ["paris", "music"], "weak": ["old"], "bad": ["river"]}
    qg = {("paris", "good"): ["q1?"], ("music", "good"): ["q4?"], ("old", "weak"): ["q3a?", "q3b?"],
          ("river", "bad"): ["q2?"]}
    qa = {("q1?", "good"): "paris", ("q1?", "K"): "paris", ("q4?", "good"): "music", ("q2?", "bad"): "river"}

    def best(early_stop: bool) -> tuple[int, list[bool], int]:
        scorer = scripted_scorer(cands, qg, FailingPair(qa, [("q4?", "K")]), use_nli=False, fallback=False)
        r = rerank_batch([["weak", "good", "bad"]], ["K"], scorer=scorer, early_stop=early_stop)[0]
        return r.best, r.stopped, len(scorer.question_answerer.calls)

    assert best(False)[0] == 2
    assert best(True)[0] == 2


def test_the_filter_asks_one_batched_qa_per_round_across_all_candidates():
    """single mode: every candidate of every input tries its next beam in the same QA call."""
    cands = {f"r{i}": [f"a{i}"] for i in range(4)}
    qg = {(f"a{i}", f"r{i}"): [f"q{i}-{b}?" for b in range(3)] for i in range(4)}
    qa_table = {(f"q{i}-2?", f"r{i}"): f"a{i}" for i in range(4)}  # the third beam is the first valid one
    qa = FakeQA(qa_table)
    scorer = scripted_scorer(cands, qg, qa, use_nli=False, fallback=False)
    rerank_batch([["r0", "r1"], ["r2", "r3"]], ["K0", "K1"], scorer=scorer, early_stop=False)
    rounds = [[p for p in call if p[1].startswith("r")] for call in qa.calls]
    assert [sorted(q for q, _ in r) for r in rounds[:3]] == [sorted(f"q{i}-{b}?" for i in range(4))
                                                             for b in range(3)]
    assert len(qa.calls) == 4  # three rounds, then the knowledge answers of the last round's valid questions


def test_bounds_of_a_row_with_known_scores_and_questions_to_come():
    c = Q2Config(use_nli=False, fallback=True)
    row = Row(0, "r", "K")
    assert score_bounds(c, row, [], [], lambda v: None) == score_bounds(c, row, [], [], lambda v: None)
    b = score_bounds(c, row, [], [], lambda v: None)  # no question, none to come: the fallback's 0 .. 1
    assert (b.low, b.high) == (0.0, 1.0)
    off = score_bounds(Q2Config(fallback=False), row, [], [], lambda v: None)
    assert off.low == off.high == float("-inf")
    row.error = "x"
    assert score_bounds(c, row, [], [], lambda v: None).high == float("-inf")


def test_contest_checks_its_groups():
    with pytest.raises(ValueError, match="each row in one group"):
        Contest([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="scale >= 0"):
        Contest([[0, 1]], scale=[1.0, -1.0])
    assert Answer.none().has_answer is False


def test_a_candidate_behind_stops_before_its_next_beams_are_asked():
    """After round 1 "good" scores 1 for sure and "behind" at most 0.5 (one question scoring 0, one candidate still
    open): "behind" stops there, and its open candidate's later beams are never asked."""
    cands = {"good": ["paris"], "behind": ["old", "river"]}
    qg = {("paris", "good"): ["g1?"], ("old", "behind"): ["b1?"],
          ("river", "behind"): ["r1?", "r2?", "r3?", "r4?"]}
    qa = {("g1?", "good"): "paris", ("g1?", "K"): "paris", ("b1?", "behind"): "old", ("r4?", "behind"): "river"}
    early = FakeQA(qa)
    r = rerank_batch([["behind", "good"]], ["K"], scorer=scripted_scorer(cands, qg, early))[0]
    asked = {q for call in early.calls for q, _ in call}
    assert r.best == 1 and r.stopped == [True, False]
    assert {"r2?", "r3?", "r4?"}.isdisjoint(asked) and "r1?" in asked
    full = FakeQA(qa)
    assert rerank_batch([["behind", "good"]], ["K"], scorer=scripted_scorer(cands, qg, full),
                        early_stop=False)[0].best == 1
    assert {"r2?", "r3?", "r4?"} <= {q for call in full.calls for q, _ in call}
