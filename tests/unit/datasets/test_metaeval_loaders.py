"""Meta-evaluation data loaders and score sources: the shipped data, small fixtures, and wrong formats."""

from __future__ import annotations

import json
import shutil

import pytest

from q2_plugins.datasets.begin import load_begin
from q2_plugins.datasets.common import DataFormatError
from q2_plugins.datasets.dialfact import load_dialfact
from q2_plugins.datasets.dnli import load_dnli
from q2_plugins.datasets.registry import load_dataset
from q2_plugins.datasets.table import TableColumns, load_table
from q2_plugins.datasets.wow import load_wow
from q2_plugins.metaeval.scores import export_inputs, read_scores_file, replay_scores


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- the paper's WoW annotations ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wow(shared_data):
    return load_wow(shared_data / "q2_wow")


def test_wow_sets_and_cross_annotation(wow):
    s = wow.summary()
    assert (s["n"], s["n_consistent"], s["n_inconsistent"]) == (600, 300, 300)
    assert s["subsets"] == {"dodeca_consistent": 150, "dodeca_inconsistent": 150, "memnet_consistent": 150,
                            "memnet_inconsistent": 150}
    assert (s["n_contexts"], s["n_contexts_one_inconsistent"], s["n_extra_responses"]) == (544, 244, 488)
    ex = wow.by_id()["dodeca_consistent:1"]
    assert ex.response == "it aired in the us , canada and latin america" and ex.consistent
    # every one of the 600 responses is one of the cross annotation's 1,088, with the same label
    by_id = wow.by_id()
    shared = [(i, c.consistent[sys]) for c in wow.contexts for sys, i in c.example_ids.items()
              if not i.startswith("cross_annotation:")]
    assert len(shared) == 600 and all(by_id[i].consistent == label for i, label in shared)
    both = [c for c in wow.contexts if c.one_inconsistent
            and not any(i.startswith("cross_annotation:") for i in c.example_ids.values())]
    assert len(both) == 23  # the one-inconsistent contexts whose two responses are both in the 600-set


def test_wow_errors(tmp_path, shared_data):
    with pytest.raises(DataFormatError, match="not a folder"):
        load_wow(tmp_path / "nope")
    with pytest.raises(DataFormatError, match="not the Q² WoW annotation folder"):
        load_wow(tmp_path)
    for name in ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent"):
        shutil.copy(shared_data / "q2_wow" / f"{name}.csv", tmp_path)
    assert load_wow(tmp_path).contexts == []  # the cross annotation is optional
    (tmp_path / "memnet_consistent.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFormatError, match=r"no column\(s\) \['episode_idx', 'round', 'response', 'knowledge'\]"):
        load_wow(tmp_path)


# -- BEGIN ----------------------------------------------------------------------------------------------------------
def test_begin_binary_and_five_way(shared_data):
    data = load_begin(shared_data / "begin_dev" / "dev_05_24_21.tsv")
    s = data.summary()
    assert (s["n"], s["n_consistent"]) == (836, 282)
    assert s["labels"] == {"entailment": 282, "hallucination": 267, "generic": 231, "off-topic": 51,
                           "contradiction": 5}
    assert all(ex.consistent == (ex.label == "entailment") and ex.subset == ex.label for ex in data.examples)


def test_begin_errors(tmp_path):
    bad = tmp_path / "b.tsv"
    bad.write_text("knowledge\tresponse\tlabel\nk\tr\tentailment\n")
    with pytest.raises(DataFormatError, match="not a BEGIN"):
        load_begin(bad)
    bad.write_text("evidence\tresponse\tgold label\nk\tr\tmaybe\n")
    with pytest.raises(DataFormatError, match=r"holds no usable row: all 1 left out \{'unknown label': 1\} "
                                              r"\(e.g. line 2: unknown label 'maybe'\); the known labels are "
                                              r"\['entailment'"):
        load_begin(bad)


# -- DialFact / Dialogue NLI ---------------------------------------------------------------------------------------
def test_dialfact(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [
        {"id": "a", "context": ["hi", "do you like jazz?"], "response": "Jazz began in New Orleans.",
         "evidence_list": [["Jazz", "https://en.wikipedia.org/wiki/Jazz_music_of_the_United_States_history",
                            "Jazz originated in New Orleans.", 3]], "response_label": "SUPPORTS",
         "context_id": 17},
        {"response": "It began in Paris.", "evidence_list": ["Jazz originated in New Orleans."], "label": "refutes"},
        {"response": "I like it.", "evidence_list": [], "response_label": "NOT ENOUGH INFO"},
    ])
    data = load_dialfact(path)
    a, b, c = data.examples
    assert (a.id, a.knowledge, a.history, a.consistent) == ("a", "Jazz originated in New Orleans.",
                                                            "hi do you like jazz?", True)
    # the sentence of [title, url, sentence, index], although the URL is the longest string
    assert (a.dialogue, data.dialogue_knowledge) == ("17", {"17": ["Jazz originated in New Orleans."]})
    assert (b.id, b.label, b.consistent, b.dialogue) == ("dialfact:2", "REFUTES", False, None)
    assert c.knowledge == "" and data.notes == ["1 examples have no evidence text"]


@pytest.mark.parametrize("line, message", [
    ({"response": "r", "evidence_list": ["k"], "response_label": "MAYBE"}, "line 1: unknown label 'MAYBE'"),
    ({"response": "r", "response_label": "SUPPORTS"}, "no field 'evidence_list' / 'evidence'"),
    ({"evidence_list": ["k"], "response_label": "SUPPORTS"}, "no field 'response'"),
    ({"response": "r", "evidence_list": [{"x": 1}], "response_label": "SUPPORTS"}, "evidence item"),
    ({"response": "r", "evidence_list": [["t", "u", 3, 4]], "response_label": "SUPPORTS"}, r"\[title, url, sentence"),
])
def test_dialfact_errors(tmp_path, line, message):
    with pytest.raises(DataFormatError, match=message):
        load_dialfact(write_jsonl(tmp_path / "d.jsonl", [line]))


def test_dialfact_rejects_non_jsonl(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("response,label\nr,SUPPORTS\n")
    with pytest.raises(DataFormatError, match=r"all 2 left out \{'invalid JSON': 2\} \(e.g. line 1: invalid JSON "
                                              r"'Expecting value; the DialFact loader reads JSONL, one object per"):
        load_dialfact(path)
    # one bad line among good ones is left out and listed; the others are read
    good = {"response": "r", "evidence_list": ["k"], "response_label": "SUPPORTS"}
    path.write_text(json.dumps(good) + "\n{not json\n" + json.dumps({"response": "r"}) + "\n" + json.dumps(good) + "\n")
    data = load_dialfact(path)
    assert len(data.examples) == 2
    assert [(r.where, r.reason) for r in data.skipped] == [("line 2", "invalid JSON"), ("line 3", "malformed row")]
    assert "no field 'response_label' / 'label'" in data.skipped[1].detail


def test_dnli_jsonl_and_json_list(tmp_path):
    rows = [{"sentence1": "i have two dogs .", "sentence2": "i have pets .", "label": "positive", "id": "x"},
            {"premise": "i have two dogs .", "hypothesis": "i like cats .", "gold_label": "neutral"},
            {"premise": "i have two dogs .", "hypothesis": "i have no pets .", "label": "contradiction"}]
    data = load_dnli(write_jsonl(tmp_path / "n.jsonl", rows))
    assert [(e.id, e.label, e.consistent) for e in data.examples] == [
        ("x", "entailment", True), ("dnli:2", "neutral", False), ("dnli:3", "contradiction", False)]
    assert data.examples[0].knowledge == "i have two dogs ." and data.examples[0].response == "i have pets ."
    listed = tmp_path / "n.json"
    listed.write_text(json.dumps(rows))
    assert [e.label for e in load_dnli(listed).examples] == ["entailment", "neutral", "contradiction"]
    listed.with_suffix(".list.jsonl").write_text(json.dumps(rows))  # one JSON list, whatever the extension
    assert len(load_dnli(listed.with_suffix(".list.jsonl")).examples) == 3
    write_jsonl(listed.with_suffix(".jsonl"), [{"premise": "p", "hypothesis": "h", "label": "yes"}])
    with pytest.raises(DataFormatError, match="record 1: unknown label 'yes'"):
        load_dnli(listed.with_suffix(".jsonl"))


# -- any table -----------------------------------------------------------------------------------------------------
def test_table_csv_with_named_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("uid,reply,doc,human,part,m\n"
                    "u1,r1,k1,yes,dev,0.9\nu2,r2,k2,no,test,\nu3,r3,k3,Yes,test,0.2\n")
    data = load_table(path, table=TableColumns(consistent_labels=("yes",), response_column="reply",
                                               knowledge_column="doc", label_column="human", id_column="uid",
                                               split_column="part", score_columns=("m",)))
    assert [(e.id, e.response, e.knowledge, e.consistent, e.split) for e in data.examples] == [
        ("u1", "r1", "k1", True, "dev"), ("u2", "r2", "k2", False, "test"), ("u3", "r3", "k3", True, "test")]
    assert [dict(e.extra_scores) for e in data.examples] == [{"m": 0.9}, {}, {"m": 0.2}]
    # without an id column the ids are row numbers, as q2 score's "row"
    plain = load_dataset("table", path, table=TableColumns(consistent_labels=("yes",), response_column="reply",
                                                           knowledge_column="doc", label_column="human"))
    assert [e.id for e in plain.examples] == ["0", "1", "2"]


def test_table_errors(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("response,knowledge,label\nr,k,1\nr2,k2,0\n")
    with pytest.raises(DataFormatError, match="^consistent_labels: name the label values that mean consistent"):
        load_table(path, table=TableColumns(consistent_labels=()))
    with pytest.raises(DataFormatError, match=r"^label_column: .*row 0: no field\(s\) \['human'\]"):
        load_table(path, table=TableColumns(consistent_labels=("1",), label_column="human"))
    with pytest.raises(DataFormatError, match="^consistent_labels: .*every row is in one class"):
        load_table(path, table=TableColumns(consistent_labels=("consistent",)))
    jl = write_jsonl(tmp_path / "t.jsonl", [{"response": "r", "label": 1}])
    with pytest.raises(DataFormatError, match=r"row 0: no field\(s\) \['knowledge'\]"):
        load_table(jl, table=TableColumns(consistent_labels=("1",)))
    with pytest.raises(ValueError, match="Unknown data set kind"):
        load_dataset("squad", path)


# -- score sources ---------------------------------------------------------------------------------------------------
def test_scores_file_q2_format_and_generic(tmp_path, wow):
    known = wow.by_id()
    q2 = write_jsonl(tmp_path / "s.jsonl", [
        {"row": 0, "id": "dodeca_consistent:0", "index": 0, "status": "scored", "score": 0.8, "score_no_nli": 0.6,
         "num_questions": 2, "num_candidates": 3, "used_fallback": False, "fallback_label": None, "error": None},
        {"row": 1, "id": "dodeca_consistent:1", "index": 1, "status": "error", "score": None, "score_no_nli": None,
         "num_questions": 0, "num_candidates": 0, "used_fallback": False, "fallback_label": None, "error": "boom"},
        {"row": 2, "id": "not-an-example", "index": 2, "status": "fallback", "score": 1.0, "score_no_nli": 1.0,
         "num_questions": 0, "num_candidates": 1, "used_fallback": True, "fallback_label": "entailment",
         "error": None},
    ])
    full, no_nli = read_scores_file(q2, known)
    assert (full.name, no_nli.name) == ("Q2", "Q2 w/o NLI")
    assert full.values == {"dodeca_consistent:0": 0.8} and no_nli.values == {"dodeca_consistent:0": 0.6}
    assert full.missing == {"dodeca_consistent:1": "boom"}
    assert full.questions["dodeca_consistent:0"].num_no_answer is None  # written without --explain
    assert "1 ids in scores file" in full.notes[0]
    generic = tmp_path / "g.csv"
    generic.write_text("id,score\ndodeca_consistent:0,0.25\ndodeca_consistent:1,\n")
    (metric,) = read_scores_file(generic, known, name="mine")
    assert metric.name == "mine" and metric.values == {"dodeca_consistent:0": 0.25}
    assert list(metric.missing) == ["dodeca_consistent:1"]


@pytest.mark.parametrize("rows, message", [
    ([{"score": 0.5}], "neither 'id' nor 'row'"),
    ([{"id": "dodeca_consistent:0"}], "no 'status' or 'score' field"),
    ([{"id": "x", "score": 0.5}], "None of the 1 ids"),
    ([{"id": "dodeca_consistent:0", "score": 0.5}, {"id": "dodeca_consistent:0", "score": 0.4}],
     r"comes twice \(first at s\.jsonl line 1\)"),
    ([{"id": "dodeca_consistent:0", "score": "high"}], "not a number"),
])
def test_scores_file_errors(tmp_path, wow, rows, message):
    from q2_plugins.io.inputs import InputFormatError  # the readers' one verdict on a file that holds no result rows

    with pytest.raises((DataFormatError, InputFormatError), match=message):
        read_scores_file(write_jsonl(tmp_path / "s.jsonl", rows), wow.by_id())


def test_replay_source_checks_the_data(tmp_path, shared_data, wow):
    full, no_nli = replay_scores(shared_data / "q2_original_run", wow.by_id())
    assert len(full.values) == len(no_nli.values) == 600
    assert sum(q.used_fallback for q in full.questions.values()) == 34
    with pytest.raises(DataFormatError, match="not a recorded run"):
        replay_scores(tmp_path, wow.by_id())
    # a recorded run of other data: the response texts do not match
    other = {i: ex.__class__(**{**vars(ex), "response": "something else"}) for i, ex in wow.by_id().items()}
    with pytest.raises(DataFormatError, match="is not the response of example"):
        replay_scores(shared_data / "q2_original_run", other)


def test_export_inputs_round_trip(tmp_path, wow):
    path = tmp_path / "inputs.jsonl"
    n = export_inputs(path, list(wow.all_examples()))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert n == len(rows) == 1088
    assert {"id", "response", "knowledge", "history", "label", "subset"} <= set(rows[0])
    assert len({r["id"] for r in rows}) == n


def test_recorded_scores_reader(tmp_path, shared_data):
    from q2_plugins.jobs.replay import load_recorded_scores

    name = "memnet_inconsistent"
    recorded = load_recorded_scores(shared_data / "q2_original_run" / name / f"{name}_scores.csv")
    assert len(recorded) == 150
    assert sum(r.q2 for r in recorded.values()) / 150 == pytest.approx(0.12405903568919839, abs=1e-15)
    bad = tmp_path / "s.csv"
    bad.write_text("id,response,Q2\n0,r,0.5\n")
    with pytest.raises(ValueError, match=r"missing \['Q2_no_nli'\]"):
        load_recorded_scores(bad)
    bad.write_text("id,response,Q2_no_nli,Q2\n0,r,0.5,high\n")
    with pytest.raises(ValueError, match="must be numbers"):
        load_recorded_scores(bad)


# -- BEGIN v2 and FaithDial's data audit (the shipped dev slices) ------------------------------------------------
def test_begin_v2_tsv(shared_data, tmp_path):
    data = load_dataset("begin", shared_data / "begin_v2_dev" / "wow" / "begin_dev_wow.tsv")
    s = data.summary()
    assert (data.name, s["n"], s["n_consistent"]) == ("begin-v2", 430, 180)
    assert s["labels"] == {"Fully attributable": 180, "Not fully attributable": 250}
    ex = data.examples[0]
    assert ex.knowledge.startswith("originally an industrial pigment supply company") and ex.history
    cmu = load_begin(shared_data / "begin_v2_dev" / "cmu-dog" / "begin_dev_cmu.tsv")
    assert cmu.summary()["labels"]["Generic"] == 79 and not any(e.consistent for e in cmu.examples
                                                                  if e.label == "Generic")
    bad = tmp_path / "b.tsv"
    bad.write_text("model_name\tdata_source\tknowledge\tmessage\tresponse\tbegin_label\nt5\twow\tk\tm\tr\tMaybe\n")
    with pytest.raises(DataFormatError, match="line 2: unknown label 'Maybe'.*'Fully attributable'"):
        load_begin(bad)


def test_faithdial_audit_csv(shared_data, tmp_path):
    data = load_dataset("faithdial", shared_data / "faithdial_audit_ctrl_wow" / "ctrl_processed_wow.csv")
    s = data.summary()
    # entailment (40) and entailment,uncooperative (83) are consistent; entailment,hallucination (10) is not
    assert (data.name, s["n"], s["n_consistent"]) == ("faithdial-ctrl", 200, 123)
    assert s["labels"] == {"entailment": 123, "hallucination": 72, "generic": 5}
    assert s["subsets"]["entailment,uncooperative"] == 83 and s["subsets"]["entailment,hallucination"] == 10
    assert data.examples[0].response.startswith("Hi ! Are you familiar with the color blue ?")
    bad = tmp_path / "f.csv"
    bad.write_text("knowledge,history,ctrl,begin_label,vrm_label\nk,h,r,\"entailment,sarcasm\",ack.\n")
    with pytest.raises(DataFormatError, match="line 2: unknown label 'entailment,sarcasm'"):
        load_dataset("faithdial", bad)
    bad.write_text("knowledge,history,ctrl,gpt2,begin_label,vrm_label\nk,h,r,r2,entailment,ack.\n")
    with pytest.raises(DataFormatError, match="cannot tell the response column"):
        load_dataset("faithdial", bad)
