"""Training-data recipes (``q2 perturb --recipe begin|conv-fever``): labels and counts on a fixed input with the real
spaCy model, reproducibility, the generator path on a tiny LM, and the command line."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from q2_plugins.cli import main
from q2_plugins.perturb import PerturbOptions
from q2_plugins.recipes import (
    GENERIC_RESPONSES,
    HFResponseGenerator,
    SourceRow,
    label_table,
    make_training_set,
)
from q2_plugins.spacy_parts import load_spacy

ROWS = [
    SourceRow("a", "rome was built by romulus in rome .", "Rome was built by Romulus in 753 BC.", "who built rome?",
              "d1"),
    SourceRow("b", "romulus is said to have founded the city of rome .", "Romulus founded the city of Rome.",
              "tell me about romulus", "d1"),
    SourceRow("c", "the pacific ocean is the largest ocean .", "The Pacific Ocean is the largest ocean on "
              "Earth and covers a third of its surface.", "i love the sea", "d2"),
    SourceRow("d", "pizza is a dish from naples in italy .", "Pizza is a dish that originated in Naples, Italy.",
              "do you like pizza?", "d3"),
    SourceRow("e", "yes , jazz music was born in new orleans .", "Jazz music originated in New Orleans in the 1910s.",
              "what about jazz?", "d4"),
]


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


def test_begin_labels_and_counts_on_fixed_rows(nlp):
    made, report = make_training_set(ROWS, recipe="begin", seed=0, balance=False, nlp=nlp)
    by = {(t.source_id, t.method): t for t in made}
    assert Counter(t.method for t in made) == {"original": 5, "neighbour_response": 4, "unrelated_response": 5,
                                              "generic_response": 5, "negation": 5}
    # the Pacific's evidence shares no content word with any other: no related evidence, counted
    assert report.skipped["neighbour_response"] == Counter({"no other evidence shares a content word with this "
                                                            "one": 1})
    assert ("c", "neighbour_response") not in by
    assert {t.method: t.label for t in made} == {"original": "entailment", "neighbour_response": "hallucination",
                                                 "unrelated_response": "off-topic", "generic_response": "generic",
                                                 "negation": "contradiction"}
    # the related evidence of "a" (Rome / Romulus) is "b"'s; its unrelated response is from another dialogue
    assert by[("a", "neighbour_response")].response == ROWS[1].response
    assert by[("a", "unrelated_response")].response in {r.response for r in ROWS[2:]}
    assert by[("a", "negation")].response == "rome was not built by romulus in rome ."
    assert by[("e", "negation")].change  # a negated copula or auxiliary
    assert by[("c", "generic_response")].response in GENERIC_RESPONSES
    a = by[("a", "original")]
    assert (a.evidence, a.previous_turn, a.label3) == (ROWS[0].knowledge, "who built rome?", "entailment")
    assert all(t.evidence == ROWS[ord(t.source_id) - ord("a")].knowledge for t in made)  # evidence never changes
    assert report.skipped["antonym"] == Counter({"WordNet is not installed: no PyPI package ships its data": 5})
    assert report.labels == Counter({"entailment": 5, "hallucination": 4, "off-topic": 5, "generic": 5,
                                     "contradiction": 5})


def test_begin_balances_to_the_rarest_label(nlp):
    rows = ROWS + [SourceRow("f", "good question , i love it", "Tea is a drink.", None, "d5")]  # no verb to negate
    made, report = make_training_set(rows, recipe="begin", seed=3, nlp=nlp)
    assert report.candidates["contradiction"] == 5 and report.candidates["entailment"] == 6
    assert report.candidates["hallucination"] == 4  # "c" and "f" have no related evidence
    assert report.labels == Counter({label: 4 for label in ("entailment", "hallucination", "off-topic", "generic",
                                                            "contradiction")})
    again, _ = make_training_set(rows, recipe="begin", seed=3, nlp=nlp)
    assert [t.to_dict() for t in again] == [t.to_dict() for t in made]
    table = label_table(report)
    assert table[2] == "| entailment | 4 | 6 | original |"
    assert table[-1] == "| total | 20 | 27 | |"


def test_conv_fever_methods_and_labels(nlp):
    made, report = make_training_set(ROWS, recipe="conv-fever", seed=0, nlp=nlp)
    counts = Counter(t.method for t in made)
    assert counts["original"] == 5 and counts["random_response"] == 5 and counts["random_knowledge"] == 5
    assert counts["negated_response"] == 5 and counts["negated_knowledge"] == 3  # "founded", "originated": no aux
    assert report.skipped["negated_knowledge"] == Counter({"no auxiliary or copular verb to negate": 2})
    assert {t.label for t in made if t.method == "original"} == {"consistent"}
    assert {(t.label, t.label3) for t in made if t.method != "original"} == {("inconsistent", "contradiction")}
    by = {(t.source_id, t.method): t for t in made}
    assert by[("a", "negated_knowledge")].evidence == "Rome was not built by Romulus in 753 BC."
    assert by[("a", "negated_knowledge")].response == ROWS[0].response
    # random pairs come from another dialogue: "a" and "b" share d1
    assert by[("a", "random_response")].response not in {ROWS[0].response, ROWS[1].response}
    swapped = [t for t in made if t.method == "entity_swap"]
    assert len(swapped) == report.made["entity_swap"] == 5 - sum(report.skipped.get("entity_swap", {}).values())
    assert label_table(report)[-1] == (f"| total | consistent 5 / inconsistent {len(made) - 5} | {len(made)} |")


def test_bad_recipe_input_fails_clearly(nlp):
    with pytest.raises(ValueError, match="Unknown recipe"):
        make_training_set(ROWS, recipe="fever", nlp=nlp)
    with pytest.raises(ValueError, match="unique"):
        make_training_set(ROWS + ROWS[:1], recipe="begin", nlp=nlp)
    with pytest.raises(ValueError, match="^generator: .*recipe begin"):
        PerturbOptions(inputs=("x",), output="y", recipe="conv-fever", generator="m")
    with pytest.raises(ValueError, match="several inputs"):
        PerturbOptions(inputs=("x", "z"), output="y")


def test_generator_writes_the_hallucinations_batched(nlp, tiny_models):
    generator = HFResponseGenerator(str(tiny_models["lm"]), batch_size=2, max_new_tokens=6)
    prompts = [(r.previous or "", r.knowledge) for r in ROWS]
    assert generator.generate(prompts) == HFResponseGenerator(str(tiny_models["lm"]), batch_size=5,
                                                              max_new_tokens=6).generate(prompts)
    made, report = make_training_set(ROWS, recipe="begin", balance=False, generator=generator, nlp=nlp)
    generated = [t for t in made if t.method == "generated"]
    assert len(generated) + sum(report.skipped.get("generated", {}).values()) == 5
    assert all(t.label == "hallucination" and t.evidence == ROWS[ord(t.source_id) - ord("a")].knowledge
               for t in generated)
    assert "neighbour_response" not in report.made


def test_cli_recipe_on_bundled_data_is_reproducible(shared_data, tmp_path, capsys):
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    begin = str(shared_data / "begin_dev" / "dev_05_24_21.tsv")
    for out in (out1, out2):
        assert main(["perturb", "--recipe", "begin", "--input", begin, "--output", str(out), "--seed", "7",
                     "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out.split("\n}\n")[0] + "\n}")
    assert out1.read_bytes() == out2.read_bytes()
    rows = [json.loads(line) for line in out1.read_text().splitlines()]
    assert summary["inputs"] == {begin: 282}  # BEGIN v1 dev's entailed rows
    assert Counter(r["label"] for r in rows) == Counter({k: summary["labels"][k] for k in summary["labels"]})
    assert len(set(Counter(r["label"] for r in rows).values())) == 1 and len(rows) == summary["n_examples"]
    assert {r["previous_turn"] != "" for r in rows} == {True}


def test_cli_recipe_table_input_and_missing_column(tmp_path, capsys):
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps({"response": r.response, "knowledge": r.knowledge, "topic": r.dialogue})
                             + "\n" for r in ROWS))
    assert main(["perturb", "--recipe", "conv-fever", "--input", str(table), "--output",
                 str(tmp_path / "o.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "| original | consistent | 5 |" in out and "| random_response | inconsistent | 5 |" in out
    assert main(["perturb", "--recipe", "begin", "--input", str(table), "--output", str(tmp_path / "o.jsonl"),
                 "--knowledge-column", "evidence"]) == 2
    assert "evidence" in capsys.readouterr().err


def _wow_turn(speaker: str, text: str, sentence: str | None = None) -> dict:
    turn = {"speaker": speaker, "text": text, "retrieved_topics": [], "retrieved_passages": []}
    if sentence is not None:
        key = "no_passages_used" if sentence == "no_passages_used" else "partner_Some_Title_0"
        turn["checked_sentence"] = {key: sentence}
        turn["checked_passage"] = {key: key}
    return turn


WOW_JSON = [  # ParlAI's wizard_of_wikipedia layout: a list of dialogues, each a "dialog" list of turns (ROWS' texts)
    {"chosen_topic": "Rome", "persona": "i like history.", "wizard_eval": 5, "dialog": [
        _wow_turn("0_Wizard", ROWS[0].response, ROWS[0].knowledge),
        _wow_turn("1_Apprentice", "tell me about romulus"),
        _wow_turn("0_Wizard", ROWS[1].response, ROWS[1].knowledge),
        _wow_turn("1_Apprentice", "cool, thanks"),
        _wow_turn("0_Wizard", "you are welcome, it was fun", "no_passages_used"),
    ]},
    {"chosen_topic": "Jazz", "persona": "i play the piano.", "wizard_eval": 4, "dialog": [
        _wow_turn("1_Apprentice", "what about jazz?"),
        _wow_turn("0_Wizard", ROWS[4].response, ROWS[4].knowledge),
        _wow_turn("1_Apprentice", "do you like pizza?"),
        _wow_turn("0_Wizard", ROWS[3].response, ROWS[3].knowledge),
    ]},
]


def test_wow_json_rows_and_recipes(nlp, tmp_path, capsys):
    from q2_plugins.recipes import read_sources

    path = tmp_path / "valid_random_split.json"
    path.write_text(json.dumps(WOW_JSON))
    rows = read_sources(str(path), PerturbOptions(inputs=(str(path),), output="-"))  # auto: a .json list
    assert rows == read_sources(str(path), PerturbOptions(inputs=(str(path),), output="-", dataset="wow-json"))
    assert [(r.id, r.previous, r.dialogue) for r in rows] == [
        ("valid_random_split.json/0:0", "Rome", "valid_random_split.json/0"),
        ("valid_random_split.json/0:2", "tell me about romulus", "valid_random_split.json/0"),
        ("valid_random_split.json/0:4", "cool, thanks", "valid_random_split.json/0"),
        ("valid_random_split.json/1:1", "what about jazz?", "valid_random_split.json/1"),
        ("valid_random_split.json/1:3", "do you like pizza?", "valid_random_split.json/1")]
    assert rows[1].response == WOW_JSON[0]["dialog"][2]["text"] and rows[1].knowledge == ROWS[1].knowledge
    assert rows[2].knowledge == "" and rows[0].source == "valid_random_split.json (wow-json)"
    made, report = make_training_set(rows, recipe="conv-fever", seed=0, nlp=nlp)
    assert report.skipped["original"] == Counter({"empty response or knowledge": 1})  # the no_passages_used turn
    counts = Counter(t.method for t in made)
    assert (counts["original"], counts["random_response"], counts["random_knowledge"]) == (4, 4, 4)
    assert counts["negated_knowledge"] == 2  # "founded", "originated": no auxiliary
    begin, begin_report = make_training_set(rows, recipe="begin", seed=5, balance=False, nlp=nlp)
    assert begin_report.candidates["entailment"] == 4 and begin_report.candidates["generic"] == 4
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (out1, out2):
        assert main(["perturb", "--recipe", "begin", "--input", str(path), "--output", str(out), "--seed", "5",
                     "--dataset", "wow-json"]) == 0
    assert out1.read_bytes() == out2.read_bytes() and out1.read_text()
    assert "| original | 4 | 4 | 1 | empty response or knowledge: 1 |" in capsys.readouterr().out
    path.write_text(json.dumps([{"chosen_topic": "Rome"}]))
    assert main(["perturb", "--recipe", "begin", "--input", str(path), "--output", str(out1)]) == 2
    assert "not a list of dialogues" in capsys.readouterr().err
