"""Training-data recipes (``q2 perturb --recipe begin|conv-fever``): labels and counts on a fixed input with the real
spaCy model, reproducibility, the generator path on a tiny LM, and the command line."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Optional

import pytest

from q2_plugins.backends.hf.generator import HFResponseGenerator
from q2_plugins.cli import main
from q2_plugins.datasets.grounded import SourceRow
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.training.edits import Skip
from q2_plugins.training.examples import label_table
from q2_plugins.training.perturb import PerturbOptions
from q2_plugins.training.recipes import make_training_set

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
    assert Counter(t.method for t in made) == {"original": 5, "neighbour_response": 2, "unrelated_response": 5,
                                              "generic_response": 5, "negation": 5}
    # no topics: a dialogue is its topic; only a and b share one (d1), the rest have no hallucination, never one of
    # another topic, and the shortfall is counted
    assert report.skipped["neighbour_response"] == Counter({"no other evidence of this topic": 3})
    assert report.shortfall == Counter({"hallucination": 3})
    assert ("c", "neighbour_response") not in by
    assert {t.method: t.label for t in made} == {"original": "entailment", "neighbour_response": "hallucination",
                                                 "unrelated_response": "off-topic", "generic_response": "generic",
                                                 "negation": "contradiction"}
    # the related evidence of "a" (Rome / Romulus) is "b"'s; its unrelated response is from another dialogue
    assert by[("a", "neighbour_response")].response == ROWS[1].response
    assert by[("a", "unrelated_response")].response in {r.response for r in ROWS[2:]}
    # no topics here: every off-topic response is the fallback (another topic), counted and said in the change
    assert report.fallbacks["unrelated_response"] == Counter({"no topic: a response of another topic": 5})
    assert "fallback" in by[("a", "unrelated_response")].change
    assert by[("a", "negation")].response == "rome was not built by romulus in rome ."
    assert by[("e", "negation")].change  # a negated copula or auxiliary
    a = by[("a", "original")]
    assert (a.evidence, a.previous_turn, a.label3) == (ROWS[0].knowledge, "who built rome?", "entailment")
    assert all(t.evidence == ROWS[ord(t.source_id) - ord("a")].knowledge for t in made)  # evidence never changes
    assert report.skipped["antonym"] == Counter({"no adjective with a WordNet antonym": 5})
    assert report.labels == Counter({"entailment": 5, "hallucination": 2, "off-topic": 5, "generic": 5,
                                     "contradiction": 5})


def test_begin_balances_to_the_rarest_label(nlp):
    rows = ROWS + [SourceRow("f", "tea is a drink , a hot drink .", "Tea is a drink.", None, "d5")]
    made, report = make_training_set(rows, recipe="begin", seed=3, nlp=nlp)
    assert report.candidates["contradiction"] == 6 and report.candidates["entailment"] == 6
    assert report.candidates["hallucination"] == 2  # only "a" and "b" have related evidence
    assert report.labels == Counter({label: 2 for label in ("entailment", "hallucination", "off-topic", "generic",
                                                            "contradiction")})
    again, _ = make_training_set(rows, recipe="begin", seed=3, nlp=nlp)
    assert [t.to_dict() for t in again] == [t.to_dict() for t in made]
    table = label_table(report)
    assert table[2] == "| entailment | 2 | 6 | original |"
    assert table[-1] == "| total | 10 | 26 | |"


def test_conv_fever_methods_and_labels(nlp):
    made, report = make_training_set(ROWS, recipe="conv-fever", seed=0, nlp=nlp)
    counts = Counter(t.method for t in made)
    # d's random response is b's, which b's random knowledge (d's) already pairs with: dropped as a repeat
    assert counts["original"] == 5 and counts["random_response"] == 4 and counts["random_knowledge"] == 5
    assert report.skipped["random_response"] == Counter({"repeats an earlier row's evidence, response and label": 1})
    assert counts["negated_response"] == 5 and counts["negated_knowledge"] == 3  # "founded", "originated": no aux
    assert report.skipped["negated_knowledge"] == Counter({"no auxiliary or copular verb to negate": 2})
    assert {t.label for t in made if t.method == "original"} == {"consistent"}
    # unrelated pairs are neutral in the three-way form (NLI's reading); the edits contradict
    assert {(t.label, t.label3) for t in made if t.method.startswith("random_")} == {("inconsistent", "neutral")}
    assert {(t.label, t.label3) for t in made if t.method not in ("original", "random_response",
                                                                   "random_knowledge")} == {("inconsistent",
                                                                                             "contradiction")}
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
    assert "| original | consistent | 5 |" in out and "| random_response | inconsistent | 4 |" in out
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
    from q2_plugins.datasets.grounded import read_sources

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
    assert report.skipped["original"] == Counter({"'knowledge' is empty": 1})  # the no_passages_used turn
    counts = Counter(t.method for t in made)
    assert (counts["original"], counts["random_response"], counts["random_knowledge"]) == (4, 4, 3)
    assert report.skipped["random_knowledge"] == Counter({"repeats an earlier row's evidence, response and label": 1})
    assert counts["negated_knowledge"] == 2  # "founded", "originated": no auxiliary
    begin, begin_report = make_training_set(rows, recipe="begin", seed=5, balance=False, nlp=nlp)
    assert begin_report.candidates["entailment"] == 4 and begin_report.candidates["generic"] == 4
    out1, out2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for out in (out1, out2):
        assert main(["perturb", "--recipe", "begin", "--input", str(path), "--output", str(out), "--seed", "5",
                     "--dataset", "wow-json"]) == 0
    assert out1.read_bytes() == out2.read_bytes() and out1.read_text()
    assert "| original | 4 | 2 | 1 | 'knowledge' is empty: 1 |" in capsys.readouterr().out
    path.write_text(json.dumps([{"chosen_topic": "Rome"}]))
    assert main(["perturb", "--recipe", "begin", "--input", str(path), "--output", str(out1)]) == 2
    assert "not a list of dialogues" in capsys.readouterr().err


# -- each rule on small fixed rows: the bad cases found reading the recipes' output on the Q² WoW folder ----------
def test_entailment_rows_pass_begins_filter(nlp):
    from q2_plugins.training.begin import begin_filter

    knowledge = "Gardening is considered by many people to be a relaxing activity."
    assert begin_filter("i love gardening as well .", knowledge) == "BEGIN's filter: a first-person pronoun"
    assert begin_filter("that sounds like fun , what else do they grow there ?", knowledge) == (
        "BEGIN's filter: under 25% of its words in the evidence")
    assert begin_filter("gardening is considered to be relaxing .", knowledge) is None
    rows = ROWS + [SourceRow("g", "i love gardening as well .", knowledge, None, "d6")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    assert ("g", "original") not in {(t.source_id, t.method) for t in made}
    assert report.skipped["original"] == Counter({"BEGIN's filter: a first-person pronoun": 1})


def test_negation_never_lands_on_the_speakers_hedge(nlp):
    from q2_plugins.training.edits import negate

    response = "i don ' t know any flavors , but i do know that tea is a drink made from leaves ."
    knowledge = "Tea is an aromatic drink made from the leaves of the tea plant."
    out = negate(nlp(response), {t.lower_ for t in nlp(knowledge)} | {t.lemma_ for t in nlp(knowledge)})
    assert out.text == "i don ' t know any flavors , but i do know that tea is not a drink made from leaves ."
    assert negate(nlp("i do know that , i think .")).reason == "the speaker's hedge or opinion (i / we / you)"


def test_negated_knowledge_only_where_the_response_draws_on_it(nlp):
    from q2_plugins.training.edits import content_forms, negate

    hedged = nlp("Halloween originated from Celtic harvest festivals. Such festivals may not have had pagan roots.")
    response = nlp("it originated from celtic harvest festivals .")
    out = negate(hedged, content_forms(response), best_sentence_only=True)
    assert out.reason == "no auxiliary or copular verb to negate"  # the first sentence has none; the hedge untouched
    titled = nlp('Their first single was "Love Me Do". It was released in 1962.')
    out = negate(titled, content_forms(nlp("love me do was their first single")), best_sentence_only=True)
    assert out.text == 'Their first single was not "Love Me Do". It was released in 1962.'
    quoted = nlp('The song "Love Me Do" was a hit.')
    assert negate(quoted, content_forms(nlp("love me do was a hit"))).text == 'The song "Love Me Do" was not a hit.'
    for title in ('Their hit single "Love Me Do" reached number 17.', "Love Me Do reached number 17 in 1962."):
        assert negate(nlp(title), content_forms(nlp("love me do reached number 17"))) == Skip(
            "inside a quotation or title")  # "Do" is the verb the tagger offers: never "Love Me Do not"


def test_antonyms_from_the_bundled_wordnet_pairs(nlp):

    from q2_plugins.training.edits import antonym, content_forms, wordnet_antonyms

    pairs = wordnet_antonyms()
    assert "cold" in pairs["hot"] and "hot" in pairs["cold"] and len(pairs) > 3000
    knowledge = content_forms(nlp("Tea is usually served as a hot drink."))
    out = antonym(nlp("tea is a hot drink ."), knowledge, pairs, random.Random(0))
    assert out.text.startswith("tea is a ") and out.text.split()[3] in pairs["hot"] and "WordNet" in out.change
    assert antonym(nlp("tea is a hot drink ."), content_forms(nlp("Tea is a drink.")), pairs,
                   random.Random(0)).reason == "no adjective with an antonym that the knowledge uses"
    made, report = make_training_set(ROWS + [SourceRow("t", "tea is a hot drink .", "Tea is served as a hot drink.",
                                                       None, "d7")], recipe="begin", balance=False, nlp=nlp, seed=1)
    contradiction = [t for t in made if t.source_id == "t" and t.label == "contradiction"]
    assert len(contradiction) == 1  # one contradiction per row, from negation or antonym
    assert report.made["antonym"] + report.made["negation"] == 6


def test_hallucinations_stay_on_topic(nlp):
    rows = [SourceRow("w", "you can lose weight by eating less sugar .", "Weight loss can be achieved by eating "
                      "less and exercising more.", None, "d1", topic="Weight loss"),
            SourceRow("r", "red hair only occurs in 1 - 2 percent of the population .", "Red hair occurs naturally "
                      "in 1-2% of the human population; weight is unrelated.", None, "d2", topic="Red hair"),
            SourceRow("x", "sugar makes you gain weight fast .", "Eating too much sugar makes weight go up, "
                      "studies say.", None, "d3", topic="Weight loss"),
            SourceRow("y", "diets help .", "A diet is a plan of eating.", None, "d4", topic="Weight loss")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    by = {(t.source_id, t.method): t for t in made}
    # w's topic holds x and y; x's response shares "sugar" / "weight" with w's evidence and adds to it; r's (another
    # topic) never comes in, though its evidence says "weight"
    assert by[("w", "neighbour_response")].response == rows[2].response
    assert ("r", "neighbour_response") not in by and report.shortfall["hallucination"] >= 1
    assert report.skipped["neighbour_response"]["no other evidence of this topic"] == 1  # r
    for t in made:
        if t.label == "hallucination":
            assert {w.lemma_ for w in nlp(t.response) if not w.is_stop and w.is_alpha} & {
                w.lemma_.lower() for w in nlp(t.evidence) if not w.is_stop and w.is_alpha}
            assert [r.topic for r in rows if r.response == t.response] == [next(r.topic for r in rows
                                                                                if r.id == t.source_id)]


def test_personal_statements_close_to_the_evidence_are_hallucinations(nlp):
    from q2_plugins.training.begin import personal_statement

    assert personal_statement(nlp("i love gardening as well . it is relaxing .")) == "i love"
    assert personal_statement(nlp("my brother skis every winter .")) == "brother"
    for hedge in ("i ' m not sure , but it is relaxing .", "i think it is relaxing .", "i know that it is old .",
                  "it is relaxing .", "i do not , but i do know that she was born in michigan .", "no i have not ."):
        assert personal_statement(nlp(hedge)) is None, hedge
    knowledge = "Gardening is considered by many people to be a relaxing activity."
    rows = [SourceRow("g", "i love gardening , it is considered relaxing .", knowledge, None, "d1"),
            SourceRow("h", "i think gardening is considered relaxing .", knowledge + " ", None, "d2"),
            SourceRow("f", "i love football .", knowledge + "  ", None, "d3")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    methods = {(t.source_id, t.method) for t in made}
    assert ("g", "personal_response") in methods  # close to the evidence, telling a taste
    assert not {("h", "personal_response"), ("f", "personal_response")} & methods  # a hedge; far from the evidence
    assert report.skipped["personal_response"]["the grounded response is not close to the evidence (under 25% of "
                                               "its words in it)"] == 1


def test_off_topic_from_the_same_topic_and_the_fallback_said(nlp):
    rows = [SourceRow("a", "yoga started in india long ago .", "Yoga originated in ancient India.", None, "e1",
                      topic="Yoga"),
            SourceRow("b", "yoga mats are made of rubber .", "Yoga mats are commonly made of PVC or rubber.", None,
                      "e2", topic="Yoga"),
            SourceRow("m", "meditation calms the mind .", "Meditation is a practice that calms the mind.", None,
                      "e4", topic="Yoga"),
            SourceRow("c", "pizza is from naples .", "Pizza comes from Naples.", None, "e3", topic="Pizza"),
            SourceRow("v", "yes they are .", "Violins have four strings.", None, "e5", topic="Violin")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    by = {(t.source_id, t.method): t for t in made}
    # b's response names the topic ("yoga"): not off-topic for a; m's (same topic, other evidence, no shared word) is
    assert by[("a", "unrelated_response")].response == rows[2].response
    assert by[("a", "unrelated_response")].change.endswith("of the same topic")
    assert by[("b", "unrelated_response")].response == rows[2].response
    # c has no other Pizza row: a response of another topic, never one naming pizza or saying nothing ("yes they are")
    assert "fallback" in by[("c", "unrelated_response")].change
    assert by[("c", "unrelated_response")].response not in (rows[3].response, rows[4].response)
    assert all(t.response != rows[4].response for t in made if t.label == "off-topic")
    assert report.fallbacks["unrelated_response"]["no response of the same topic unrelated to this evidence: a "
                                                  "response of another topic"] >= 1


def test_bad_fields_are_skipped_and_counted_never_coerced(nlp, tmp_path, capsys):
    table = tmp_path / "bad.jsonl"
    good = [{"response": r.response, "knowledge": r.knowledge, "topic": r.dialogue} for r in ROWS]
    bad = [{"response": 12345, "knowledge": "Paris is the capital of France.", "topic": "x1"},
           {"response": "paris is the capital .", "knowledge": ["Paris is the capital of France."], "topic": "x2"},
           {"response": "paris " * 60000, "knowledge": "Paris is the capital of France.", "topic": "x3"}]
    table.write_text("".join(json.dumps(r) + "\n" for r in good + bad))
    out = tmp_path / "o.jsonl"
    assert main(["perturb", "--recipe", "begin", "--input", str(table), "--output", str(out), "--no-balance"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert not any("12345" in r["response"] or "[" in r["evidence"] or len(r["response"]) > 2000 for r in rows)
    meta = json.loads((tmp_path / "o.jsonl.meta.json").read_text())
    assert meta["summary"]["methods"]["original"]["reasons"] == {
        "'response' is a number": 1, "'knowledge' is a list": 1,
        "'response' is over its budget max_response_chars=2000": 1}
    assert meta["settings"]["recipe"] == "begin"
    assert "'response' is a number: 1" in capsys.readouterr().out


def test_invisible_text_skips_its_row_with_a_reason(nlp, tmp_path, capsys):
    table = tmp_path / "hostile.jsonl"
    good = [{"response": r.response, "knowledge": r.knowledge, "topic": r.dialogue} for r in ROWS]
    bad = [{"response": "\u0000", "knowledge": "Paris is the capital of France."},
           {"response": "paris is the capital .", "knowledge": "Paris is the\u200b capital of France."},
           {"response": "paris \ud800 is the capital .", "knowledge": "Paris is the capital of France."},
           {"response": "paris is the capital .", "knowledge": "Paris is the capital\u0007 of France."}]
    table.write_text("".join(json.dumps(r) + "\n" for r in good + bad), encoding="utf-8")
    out = tmp_path / "o.jsonl"
    for recipe in ("begin", "conv-fever"):
        assert main(["perturb", "--recipe", recipe, "--input", str(table), "--output", str(out)]) == 0
        reasons = json.loads((tmp_path / "o.jsonl.meta.json").read_text())["summary"]["methods"]["original"]["reasons"]
        assert reasons == {"'response' holds a NUL character": 1,
                           "'knowledge' holds an invisible format character U+200B (zero width space)": 1,
                           "'response' holds a lone surrogate U+D800": 1,
                           "'knowledge' holds a control character U+0007": 1}, recipe
        text = out.read_text(encoding="utf-8")
        assert "paris is the capital" not in text and "\\u0000" not in text


def test_preview_marks_the_change_and_names_the_rule(tmp_path, capsys):
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps({"response": r.response, "knowledge": r.knowledge}) + "\n" for r in ROWS))
    assert main(["perturb", "--recipe", "begin", "--input", str(table), "--output", str(tmp_path / "o.jsonl"),
                 "--preview", "1", "--no-balance"]) == 0
    out = capsys.readouterr().out
    assert "== negation: 1 of 5 written; label contradiction / contradiction: contradiction: a claim" in out
    assert "{+not+}" in out and out.count("\n- ") == 4  # one example of each of the four methods made
    # no topic and no dialogue: no hallucination can be kept on topic, and the shortfall is said
    assert "shortfall: 5 of 5 grounded rows gave no hallucination example" in out


def test_a_begin_files_knowledge_source_is_its_rows_topic(tmp_path):
    """BEGIN draws off-topic responses from the same topic; in a BEGIN file that is its knowledge source (v2 names it
    in the file name and folder; v1 is Wizard of Wikipedia throughout)."""
    from q2_plugins.datasets.grounded import _begin_source

    assert _begin_source(tmp_path / "cmu-dog" / "begin_dev_cmu.tsv").startswith("CMU-DoG")
    assert _begin_source(tmp_path / "topicalchat" / "begin_dev_tc.tsv").startswith("Topical-Chat")
    assert _begin_source(tmp_path / "dev_05_24_21.tsv").startswith("Wizard of Wikipedia")


def test_off_topic_names_what_it_speaks_of_and_comes_from_the_same_topic_as_begin_draws_it(nlp):
    rows = [SourceRow("a", "mcdonald ' s serves burgers .", "McDonald's serves burgers.", None, "e1",
                      topic="McDonald's"),
            SourceRow("b", "the golden arches logo was first used in 1953 .", "McDonald's first used the Golden "
                      "Arches logo in 1953.", None, "e2", topic="McDonald's"),
            SourceRow("p", "it originated in india .", "Yoga originated in India.", None, "e3", topic="Yoga"),
            SourceRow("w", "wine is made from grapes .", "Wine is made from grapes.", None, "e4", topic="Wine")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    off = {t.source_id: t.response for t in made if t.label == "off-topic"}
    # b is of a's topic, but grounded in evidence about McDonald's: on a's subject (a hallucination to BEGIN's
    # annotators, who ask first whether a response is about the document's topic), so dropped, counted
    assert off["a"] != rows[1].response and "fallback" in {t.source_id: t for t in made
                                                            if t.label == "off-topic"}["a"].change
    assert report.dropped["unrelated_response"] == {
        "a same-topic candidate about the evidence's subject: the response's own evidence is about the title entity "
        "(names it, or speaks of it as 'it', 'the ...')": 1,
        "a same-topic candidate about the evidence's subject: the response names the title entity": 1}
    assert rows[2].response not in off.values()  # "it originated in india" could be about anything


def _topic_rows(response_m: str, previous: Optional[str] = None) -> list:
    """Row a (Yoga) and m (Yoga, other evidence), with rows of three other topics that all use "people"."""
    rows = [SourceRow("a", "yoga is practised by many people in temples .",
                      "Yoga is practised by many people in temples.", previous, "e1", topic="Yoga"),
            SourceRow("m", response_m, "Meditation is a practice that calms the mind of people.", None, "e2",
                      topic="Yoga")]
    for n, (topic, thing) in enumerate((("Wine", "wine"), ("Tea", "tea"), ("Chess", "chess"))):
        rows.append(SourceRow(f"x{n}", f"{thing} is enjoyed by people .", f"{thing.title()} is enjoyed by people.",
                              None, f"x{n}", topic=topic))
    return rows


def test_a_same_topic_off_topic_response_may_share_a_common_word_but_not_the_subject(nlp):
    made, report = make_training_set(_topic_rows("meditation helps people calm the mind ."), recipe="begin",
                                     balance=False, nlp=nlp)
    off = {t.source_id: t for t in made if t.label == "off-topic"}
    # "people" is in the texts of four topics: a common word, shared alone, leaves m's response off-topic for a
    assert off["a"].response == "meditation helps people calm the mind ." and "same topic" in off["a"].change
    # a key word of the evidence ("temples", one topic's) makes it about the evidence's subject: dropped, counted
    made, report = make_training_set(_topic_rows("meditation is taught in temples ."), recipe="begin",
                                     balance=False, nlp=nlp)
    off = {t.source_id: t for t in made if t.label == "off-topic"}
    assert "a" not in off  # (and no other topic's response qualifies: each shares "people" with it)
    assert report.dropped["unrelated_response"][
        "a same-topic candidate about the evidence's subject: the response shares a key content word with the "
        "evidence or previous turn"] == 1
    # and so does a key word of the previous turn
    made, report = make_training_set(_topic_rows("meditation calms the mind .", "I tried meditation once."),
                                     recipe="begin", balance=False, nlp=nlp)
    assert "a" not in {t.source_id for t in made if t.label == "off-topic"}
    assert report.dropped["unrelated_response"][
        "a same-topic candidate about the evidence's subject: the response shares a key content word with the "
        "evidence or previous turn"] == 1


def test_a_topic_no_row_names_is_no_title_entity(nlp):
    # a BEGIN file's topic is its knowledge source: evidence speaking of "it" is not about "Wizard of Wikipedia"
    rows = [SourceRow("a", "skiing began in scandinavia .", "Skiing began in Scandinavia.", None, "e1", topic="WoW"),
            SourceRow("b", "he was a singer .", "He was an American singer and actor.", None, "e2", topic="WoW"),
            SourceRow("c", "archers hunted with bows .", "It was used by archers for hunting.", None, "e3",
                      topic="WoW")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    off = {t.source_id: t for t in made if t.label == "off-topic"}
    assert off["a"].response == rows[2].response and "same topic" in off["a"].change
    assert "unrelated_response" not in report.dropped


def test_contradictions_of_personal_responses_are_not_written(nlp, tmp_path, capsys):
    from q2_plugins.training.begin import personal_statement

    for personal in ("i ' ve never seen them live but i know they were formed in 1983 .",
                     "i did not read them but i do know that it was published in 1978 .",
                     "it took me a while to get used to it . it is popular at resorts .",
                     "me too ! it is a means of communication .", "i think you ' re right ! it is old .",
                     "i think it ' s interesting that it was promoted by monks ."):
        assert personal_statement(nlp(personal), nlp) is not None, personal
    knowledge = "The band was formed in 1983 in Los Angeles."
    rows = [SourceRow("p", "yes , i love their music , they were formed in 1983 .", knowledge, None, "d1"),
            SourceRow("h", "i ' m not sure , but they were formed in 1983 .", knowledge + " ", None, "d2")]
    made, report = make_training_set(rows, recipe="begin", balance=False, nlp=nlp)
    contradictions = {t.source_id: t.response for t in made if t.label == "contradiction"}
    assert list(contradictions) == ["h"] and "not formed" in contradictions["h"]  # a hedge tells nothing personal
    assert report.dropped["negation"] == {"the response tells a personal experience or taste: a hallucination by "
                                          "BEGIN's order of questions (personal before contradiction)": 1}
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps({"response": r.response, "knowledge": r.knowledge}) + "\n" for r in rows))
    assert main(["perturb", "--recipe", "begin", "--input", str(table), "--output", str(tmp_path / "o.jsonl"),
                 "--no-balance"]) == 0
    assert "dropped (negation): 1: the response tells a personal experience" in capsys.readouterr().out


def test_an_unreadable_record_or_a_missing_field_is_skipped_and_counted_not_fatal(nlp, tmp_path, capsys):
    """A malformed line, a record that is not an object and a row without the response field, among good rows:
    every recipe and the stress pairs write the good rows' examples and count the bad rows by reason."""
    table = tmp_path / "mixed.jsonl"
    good = [json.dumps({"response": r.response, "knowledge": r.knowledge, "topic": r.dialogue}) for r in ROWS]
    bad = ["not json at all", '"just a string"', json.dumps({"knowledge": "Paris is the capital of France."})]
    table.write_text("\n".join(good[:2] + bad + good[2:]) + "\n")
    out, meta = tmp_path / "o.jsonl", tmp_path / "o.jsonl.meta.json"
    for recipe in ("begin", "conv-fever"):
        assert main(["perturb", "--recipe", recipe, "--input", str(table), "--output", str(out), "--no-balance"]) == 0
        reasons = json.loads(meta.read_text())["summary"]["methods"]["original"]["reasons"]
        assert reasons == {"the record cannot be read": 2, "'response' is missing": 1}, recipe
        sources = {r["source_id"].split("/")[-1] for r in map(json.loads, out.read_text().splitlines())}
        assert sources and not sources & {"2", "3", "4"}
    capsys.readouterr()
    assert main(["perturb", "--input", str(table), "--output", str(out), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_read"] == len(ROWS) + 3
    for method in summary["methods"].values():
        assert method["reasons"]["the record cannot be read"] == 2 and method["reasons"]["'response' is missing"] == 1
