"""Meta-evaluation experiments and baselines on small synthetic data, with scripted components."""

from __future__ import annotations

import numpy as np
import pytest
import sacrebleu

from q2_plugins import Q2Scorer
from q2_plugins.datasets.types import Example, MetaEvalData, PairedContext
from q2_plugins.metaeval.baselines import (
    BERTScoreBaseline,
    NLIBaseline,
    SentenceBLEU,
    TokenOverlap,
    build_baselines,
    response_length,
    score_baselines,
)
from q2_plugins.metaeval.experiments import (
    MetaEvalOptions,
    control_variants,
    length_control,
    random_knowledge,
    response_level,
    run_meta_eval,
    subset_table,
    system_level,
)
from q2_plugins.metaeval.scores import MetricScores, QuestionStats, compute_q2
from q2_plugins.metric.components import NLILabel
from tests.fakes import FakeBERTScorer, FakeNLI, scripted_scorer


def paired_data(n_contexts: int = 40) -> MetaEvalData:
    """Two systems answering ``n_contexts`` dialogues (dialogue d<i>); in even contexts system A is inconsistent, in
    odd ones B; every fifth context has both consistent. All A responses are response-level examples."""
    examples, extra, contexts = [], [], []
    for i in range(n_contexts):
        both_ok = i % 5 == 4
        ok = {"A": both_ok or i % 2 == 1, "B": both_ok or i % 2 == 0}
        ids = {}
        for system in ("A", "B"):
            ex = Example(id=f"{system}:{i}", response=f"response {system} {i} " + "word " * (i % 7),
                         knowledge=f"knowledge of turn {i}", consistent=ok[system],
                         label="consistent" if ok[system] else "inconsistent", subset=system, dialogue=f"d{i // 2}")
            (examples if system == "A" else extra).append(ex)
            ids[system] = ex.id
        contexts.append(PairedContext(f"ctx:{i}", ids, ok))
    pool = {}
    for ex in examples + extra:
        pool.setdefault(ex.dialogue, []).append(ex.knowledge)
    return MetaEvalData(name="toy", source="memory", examples=examples, extra=extra, contexts=contexts,
                        label_scheme="toy", dialogue_knowledge={k: list(dict.fromkeys(v)) for k, v in pool.items()})


def oracle(data: MetaEvalData, name: str = "oracle", noise: float = 0.0, skip=()) -> MetricScores:
    rng = np.random.default_rng(0)
    values = {ex.id: (0.8 if ex.consistent else 0.2) + noise * rng.standard_normal()
              for ex in data.all_examples() if ex.id not in skip}
    return MetricScores(name, values, "test")


OPTS = MetaEvalOptions(reps=200)


def test_response_level_on_an_oracle_and_a_partial_metric():
    data = paired_data()
    partial = oracle(data, "partial", noise=0.3, skip={"A:0", "A:1"})
    block = response_level(data, [oracle(data), partial], OPTS)
    perfect = block["metrics"]["oracle"]
    assert (perfect["n"], perfect["n_missing"], perfect["accuracy"], perfect["roc_auc"]) == (40, 0, 1.0, 1.0)
    assert perfect["distribution"]["consistent"]["mean"] == pytest.approx(0.8)
    assert block["metrics"]["partial"]["n"] == 38 and block["metrics"]["partial"]["n_missing"] == 2
    assert block["metrics"]["partial"]["roc_auc"] < 1.0


def test_response_level_tuned_threshold_uses_the_split_column():
    data = paired_data()
    examples = [Example(**{**vars(ex), "split": "dev" if i < 20 else "test"}) for i, ex in enumerate(data.examples)]
    split_data = MetaEvalData(name="toy", source="memory", examples=examples, label_scheme="toy")
    block = response_level(split_data, [oracle(split_data)], MetaEvalOptions(tune_threshold=True))
    assert block["split"]["how"] == "the data's dev / test split"
    tuned = block["metrics"]["oracle"]["tuned"]
    assert tuned["dev_accuracy"] == 1.0 and tuned["test"]["accuracy"] == 1.0 and tuned["threshold"] == 0.2
    bad = MetaEvalData(name="toy", source="memory", label_scheme="toy",
                       examples=[Example(**{**vars(ex), "split": "train"}) for ex in data.examples])
    with pytest.raises(ValueError, match="^split_column: .*the values 'dev' and 'test'"):
        response_level(bad, [oracle(bad)], MetaEvalOptions(tune_threshold=True))
    random_split = response_level(data, [oracle(data)], MetaEvalOptions(tune_threshold=True, seed=3))
    assert random_split["split"]["n_dev"] == 20 and "stratified" in random_split["split"]["how"]


def test_unbounded_metric_is_normalised_for_thresholds():
    data = paired_data()
    raw = MetricScores("raw", {ex.id: (10.0 if ex.consistent else -5.0) for ex in data.examples}, "t", bounded=False)
    row = response_level(data, [raw], OPTS)["metrics"]["raw"]
    assert row["normalised"] and row["accuracy"] == 1.0
    assert row["distribution"]["consistent"]["mean"] == 1.0


def test_subset_table_means_and_question_columns():
    data = paired_data()
    m = oracle(data)
    for ex in data.examples:
        m.questions[ex.id] = QuestionStats(num_questions=2 if ex.consistent else 0,
                                           num_no_answer=1 if ex.consistent else None, used_fallback=not ex.consistent)
    table = subset_table(data, [m])
    rows = {r["subset"]: r for r in table["rows"]}
    assert set(rows) == {"A", "all consistent", "all inconsistent"}
    assert rows["all consistent"]["mean"]["oracle"] == pytest.approx(0.8)
    q = rows["all consistent"]["questions"]["oracle"]
    assert (q["questions"], q["questions_per_response"], q["no_answer_rate"], q["fallback_rate"]) == (
        2 * 24, 2.0, 0.5, 0.0)
    assert rows["all inconsistent"]["questions"]["oracle"]["no_answer_rate"] is None  # no questions recorded


def test_system_level_reports_coverage_and_common_contexts():
    data = paired_data()
    eligible = [c for c in data.contexts if c.one_inconsistent]
    assert len(eligible) == 32
    partial = oracle(data, "partial", noise=0.2, skip={"B:0", "B:1", "B:2"})
    block = system_level(data, [oracle(data), partial], OPTS)
    assert (block["n_contexts"], block["n_one_inconsistent"]) == (40, 32)
    assert block["per_metric"]["oracle"]["n_contexts"] == 32
    assert block["per_metric"]["partial"]["n_contexts"] == 29
    assert block["per_metric"]["oracle"]["spearman_mean"] == 1.0
    assert block["common"]["n_contexts"] == 29 and set(block["common"]["metrics"]) == {"oracle", "partial"}
    means = block["per_metric"]["oracle"]["system_score_mean"]
    assert means[0] > means[-1]
    assert system_level(data, [oracle(data), partial], OPTS) == block  # same seed, same numbers
    other = system_level(data, [oracle(data), partial], MetaEvalOptions(reps=200, seed=1))
    assert other["per_metric"]["partial"] != block["per_metric"]["partial"]
    too_few = system_level(data, [oracle(data, skip={f"B:{i}" for i in range(40)})], OPTS)
    assert too_few["per_metric"]["oracle"] == {"n_contexts": 0}


def test_control_variants_are_seeded_and_well_formed():
    data = paired_data()
    variants = control_variants(data, seed=0)
    assert variants == control_variants(data, seed=0)
    assert variants != control_variants(data, seed=1)
    by_id = data.by_id()
    same, other = variants["same_dialogue"], variants["other_dialogue"]
    assert len(other) == 40 and len(same) == 40  # each dialogue has two turns, so another knowledge text
    for eid, v in same.items():
        assert v.knowledge != by_id[eid].knowledge and v.knowledge in data.dialogue_knowledge[by_id[eid].dialogue]
        assert v.response == by_id[eid].response and v.id.startswith(f"random-knowledge/same_dialogue:{eid}#")
    for eid, v in other.items():
        assert v.knowledge not in data.dialogue_knowledge[by_id[eid].dialogue]


def test_random_knowledge_compares_on_the_same_examples():
    data = paired_data()
    variants = control_variants(data, seed=0)
    m = oracle(data)
    for v in variants["other_dialogue"].values():
        m.values[v.id] = 0.1
    block = random_knowledge(data, [m], variants)
    cell = block["other_dialogue"]["subsets"]["all"]["oracle"]
    assert cell["n"] == 40 and cell["substituted"] == pytest.approx(0.1)
    assert cell["original"] == pytest.approx(np.mean([m.values[ex.id] for ex in data.examples]))
    assert block["same_dialogue"]["subsets"]["all"]["oracle"] == {"n": 0, "original": None, "substituted": None}


def test_length_control():
    data = paired_data()
    block = length_control(data, [oracle(data)])
    assert response_length("it aired in the us , canada") == 6
    lengths = [response_length(ex.response) for ex in data.examples]
    assert block["mean_by_subset"]["A"] == pytest.approx(np.mean(lengths))
    assert block["spearman_with_length"]["oracle"]["n"] == 40


def test_run_checks_metric_names_and_skips_what_the_data_lacks():
    data = paired_data()
    flat = MetaEvalData(name="flat", source="memory", examples=data.examples, label_scheme="toy")
    run = run_meta_eval(flat, [oracle(flat)], MetaEvalOptions(reps=20))
    assert "system" in run.report["skipped"] and "random-knowledge" in run.report["skipped"]
    assert run.report["metrics"][0]["coverage"] == {"examples": 40, "of": 40}
    with pytest.raises(ValueError, match="share a name"):
        run_meta_eval(flat, [oracle(flat), oracle(flat)], OPTS)
    with pytest.raises(ValueError, match="No metric"):
        run_meta_eval(flat, [], OPTS)
    with pytest.raises(ValueError, match="Unknown experiment"):
        MetaEvalOptions(experiments=("response", "vibes"))


# -- baselines ---------------------------------------------------------------------------------------------------
def test_token_overlap_is_spacy_token_f1_without_stop_words():
    overlap = TokenOverlap()
    # content tokens: response {paris, capital, france}; knowledge {paris, capital, city, france}
    (score,) = overlap.score([("Paris is the capital of France.", "PARIS is the capital city of France")])
    assert score == pytest.approx(2 * 1.0 * 0.75 / 1.75)
    assert overlap.score([("I like it.", "Paris is big.")]) == [0.0]
    assert "tok:spacy-" in overlap.signature and "-stop-punct" in overlap.signature


def test_bleu_is_sacrebleu_against_lowercased_knowledge():
    pairs = [("the cat sat on the mat", "The cat sat on the mat today"), ("hello there", "General Kenobi")]
    expected = [sacrebleu.corpus_bleu([r], [[k.lower()]]).score / 100 for r, k in pairs]
    assert SentenceBLEU().score(pairs) == pytest.approx(expected)
    assert "nrefs:1" in SentenceBLEU().signature


def test_nli_baseline_scores_labels_on_knowledge_to_response():
    fake = FakeNLI({("paris is in france.", "Paris is French."): NLILabel.ENTAILMENT,
                    ("paris is in france.", "Paris is German."): NLILabel.CONTRADICTION})
    nli = NLIBaseline(fake)
    assert nli.score([("Paris is French.", "Paris is in France."), ("Paris is German.", "Paris is in France."),
                      ("I like it.", "Paris is in France.")]) == [1.0, 0.0, 0.5]
    assert nli.signature.startswith("e2e-nli|fake-nli|lowerknow")
    keep_case = NLIBaseline(fake, lowercase_knowledge=False)
    keep_case.score([("x", "Paris")])
    assert fake.calls[-1] == [("Paris", "x")]


def test_bertscore_baseline_with_a_stub_scorer():
    b = BERTScoreBaseline(scorer=FakeBERTScorer())
    assert b.score([("abc", "K"), ("abcdef", "K")]) == pytest.approx([0.03, 0.06])
    assert not b.bounded and b.signature == "bertscore|fake-bert_L2_no-idf|F1|ref:knowledge.lower()"


def test_score_baselines_dedupes_and_skips_empty_inputs():
    class Counting:
        name, signature, bounded = "count", "count", True

        def __init__(self):
            self.seen = []

        def score(self, pairs):
            self.seen.append(list(pairs))
            return [0.5] * len(pairs)

    counting = Counting()
    examples = [Example("a", "r", "k", True, "c"), Example("b", "r", "k", False, "i"), Example("c", "", "k", True, "c")]
    (m,) = score_baselines([counting], examples)
    assert counting.seen == [[("r", "k")]]
    assert m.values == {"a": 0.5, "b": 0.5} and m.missing == {"c": "empty response or knowledge"}
    with pytest.raises(ValueError, match="Unknown baseline"):
        build_baselines(["rouge"])
    with pytest.raises(ValueError, match="needs an NLI model"):
        build_baselines(["nli"])


# -- Q² on the fly, with scripted components -----------------------------------------------------------------------
def scripted(**cfg) -> Q2Scorer:
    r1, k1 = "paris is in france .", "Paris is the capital of France."
    r2, k2 = "it is in spain .", "Paris is the capital of France."
    return scripted_scorer(
        {r1: ["paris", "france"], r2: ["spain"]},
        {("paris", r1): ["What is in France?"], ("france", r1): ["Where is Paris?"], ("spain", r2): ["Where is it?"]},
        {("What is in France?", r1): "paris", ("Where is Paris?", r1): "france", ("Where is it?", r2): "spain",
         ("What is in France?", k1): "Paris", ("Where is it?", k2): "France"},
        FakeNLI({}, default=NLILabel.CONTRADICTION), **cfg,
    )


def test_compute_q2_gives_both_variants_and_no_answer_counts():
    examples = [Example("x", "paris is in france .", "Paris is the capital of France.", True, "consistent"),
                Example("y", "it is in spain .", "Paris is the capital of France.", False, "inconsistent")]
    metrics, results = compute_q2(examples, scripted())
    full, no_nli = metrics
    # x: "paris" F1 1; "Where is Paris?" has no answer in the knowledge -> 0; y: spain vs France, NLI contradiction
    assert full.values == {"x": 0.5, "y": 0.0} and no_nli.values == {"x": 0.5, "y": 0.0}
    assert full.questions["x"] == QuestionStats(num_questions=2, num_no_answer=1, used_fallback=False)
    assert "qg:fake-qg" in full.signature and len(results) == 2
    (only,) = compute_q2(examples, scripted(use_nli=False))[0]
    assert only.name == "Q2 w/o NLI"
