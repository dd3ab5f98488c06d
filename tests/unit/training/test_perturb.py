"""Stress pairs: each perturbation on hand-written sentences with the real spaCy model, the data-set driver, and
``q2 perturb`` end to end."""

from __future__ import annotations

import csv
import json
import random
from typing import Any

import pytest

from q2_plugins.cli import main
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.training.edits import Edit, Skip, content_forms, invert, negate
from q2_plugins.training.entities import entity_pool, swap_entity
from q2_plugins.training.perturb import PerturbOptions, make_stress_pairs


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


def words(nlp, text):
    from q2_plugins.training.edits import content_forms

    return content_forms(nlp(text))


# -- negation -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("response, expected", [
    ("He is an American singer and he has been very popular.",
     "He is not an American singer and he has been very popular."),  # the main clause's verb
    ("Rome was built in 753 BC.", "Rome was not built in 753 BC."),
    ("yeah, it can be scary", "yeah, it cannot be scary"),
    ("They should stay home.", "They should not stay home."),
    ("It isn't a city.", "It is a city."),  # an existing negation is removed
    ("It is n't a city .", "It is a city ."),  # (tokenised text, as in BEGIN)
    ("Broccoli cannot be eaten raw.", "Broccoli can be eaten raw."),
    ("They don't like it.", "They do like it."),
])
def test_negation(nlp, response, expected):
    out = negate(nlp(response))
    assert isinstance(out, Edit) and out.text == expected


@pytest.mark.parametrize("response, reason", [
    ("I have a dog.", "no auxiliary or copular verb to negate"),  # "have" as a main verb
    ("He did it well.", "no auxiliary or copular verb to negate"),
    ("It's great.", "no auxiliary or copular verb to negate"),  # contracted forms are not in the list
    ("Is it scary?", "only a question's inverted verb"),
    ("I have never been there.", "negated by another word (never, no, ...)"),
    ("There is no way.", "negated by another word (never, no, ...)"),
])
def test_negation_skips_rather_than_mangles(nlp, response, reason):
    assert negate(nlp(response)) == Skip(reason)


def test_negation_picks_the_sentence_drawn_from_the_knowledge(nlp):
    response = "I would love to go. Rome was built in 753 BC."
    out = negate(nlp(response), words(nlp, "Rome was founded in 753 BC by Romulus."))
    assert out == Edit("I would love to go. Rome was not built in 753 BC.", "'was' -> 'was not'")
    # without knowledge the first sentence comes first, but "I would love" is the speaker's stance, not a claim
    assert negate(nlp(response)).text == "I would love to go. Rome was not built in 753 BC."


# -- entity swap ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(nlp):
    # each text twice: a place or a nationality is a replacement once seen twice with its type
    return entity_pool([nlp(t) for t in ("Kobe Bryant was born in Los Angeles.", "Paris is in France.",
                                         "Michael Jordan played in Chicago in 1984.") * 2])


def test_entity_pool(pool):
    assert pool["PERSON"] == ["Kobe Bryant", "Michael Jordan"]
    assert pool["GPE"] == ["Los Angeles", "Paris", "France", "Chicago"]


def test_entity_swap_replaces_a_shared_entity_by_one_of_its_type(nlp, pool):
    response = "Kobe Bryant was born in Los Angeles."
    knowledge = "Kobe Bryant (born 1978) was born in Los Angeles, California."
    out = swap_entity(nlp(response), knowledge, pool, random.Random(0))
    assert isinstance(out, Edit)
    before, after = out.change.split(" (")[0].split(" -> ")
    label = out.change.rsplit("(", 1)[1].rstrip(")")
    assert label in ("PERSON", "GPE") and after.strip("'") in pool[label]
    assert before.strip("'") in ("Kobe Bryant", "Los Angeles") and out.text == response.replace(
        before.strip("'"), after.strip("'"))
    assert out == swap_entity(nlp(response), knowledge, pool, random.Random(0))  # seeded


def test_entity_swap_keeps_lower_case_data_lower_case(nlp, pool):
    out = swap_entity(nlp("kobe bryant was born in los angeles."), "kobe bryant was born in los angeles.",
                      {"PERSON": ["Michael Jordan"], "GPE": ["Chicago"]}, random.Random(1))
    assert out.text in ("michael jordan was born in los angeles.", "kobe bryant was born in chicago.")


def test_entity_swap_skips(nlp, pool):
    assert swap_entity(nlp("Kobe Bryant was great."), "Michael Jordan played in Chicago.", pool,
                       random.Random(0)) == Skip("no named entity shared by response and knowledge")
    assert swap_entity(nlp("Paris is nice."), "Paris is the capital.", {"GPE": ["Paris"]},
                       random.Random(0)) == Skip("no other entity of the shared entity's type and shape in the data")


# -- inversion -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("knowledge, response, expected", [
    ("Cobain founded Nirvana with Krist Novoselic in 1987.", "Cobain founded Nirvana.",
     "Nirvana founded Cobain with Krist Novoselic in 1987."),
    ("Rome was built by Romulus in 753 BC. The city is on the Tiber.", "Romulus built Rome.",
     "Romulus was built by Rome in 753 BC. The city is on the Tiber."),  # passive: subject <-> agent
    ("The Romans built Rome.", "the romans built rome", "Rome built the Romans."),  # sentence-initial case
    ("The big dog bit the small cat.", "A dog bit a cat.", "The small cat bit the big dog."),
])
def test_inversion(nlp, knowledge, response, expected):
    out = invert(nlp(knowledge), words(nlp, response))
    assert isinstance(out, Edit) and out.text == expected


@pytest.mark.parametrize("knowledge, response, reason", [
    ("Paris is the capital of France.", "Paris is the capital.",
     "no clause with a movable noun subject and object in the sentences the response draws on"),  # copula
    ("The Romans and the Greeks built Rome.", "The Romans built Rome.",
     "no clause with a movable noun subject and object in the sentences the response draws on"),  # coordination
    ("Cobain founded Nirvana in 1987.", "Cobain was born in 1967.",
     "the response names no invertible clause's subject and object"),
    ("Cobain founded Nirvana.", "I like cats.", "no knowledge sentence shares a content word with the response"),
])
def test_inversion_skips(nlp, knowledge, response, reason):
    assert invert(nlp(knowledge), words(nlp, response)) == Skip(reason)


# -- the driver ----------------------------------------------------------------------------------------------------
ROWS = [
    {"id": "a", "topic": "Rome", "response": "Rome was built by Romulus.",
     "knowledge": "Rome was built by Romulus in 753 BC."},
    {"id": "b", "topic": "Rome", "response": "The Romans spoke Latin.", "knowledge": "The Romans spoke Latin."},
    {"id": "c", "topic": "Elvis", "response": "Elvis Presley was born in Tupelo.",
     "knowledge": "Elvis Presley was born in Tupelo, Mississippi, in 1935."},
    {"id": "d", "topic": "Elvis", "response": "", "knowledge": "Elvis recorded songs."},
]


def test_make_stress_pairs(nlp):
    kw = dict(responses=[r["response"] for r in ROWS], knowledge=[r["knowledge"] for r in ROWS],
              ids=[r["id"] for r in ROWS], topics=[r["topic"] for r in ROWS], nlp=nlp)
    pairs, report = make_stress_pairs(**kw)
    by_id = {p.id: p for p in pairs}
    assert by_id["a:negation"].perturbed_response == "Rome was not built by Romulus."
    assert by_id["a:inversion"].perturbed_knowledge == "Romulus was built by Rome in 753 BC."
    assert by_id["a:random_pairing"].perturbed_knowledge == "The Romans spoke Latin."  # same topic
    assert (by_id["a:random_pairing"].expected_label, by_id["a:random_pairing"].expected_label3) == \
        ("hallucination", "neutral")
    assert by_id["c:entity_swap"].expected_label == "contradiction"
    assert by_id["c:entity_swap"].perturbed_knowledge == ROWS[2]["knowledge"]
    assert all(p.original_response == ROWS["abcd".index(p.source_id)]["response"] for p in pairs)
    assert "d:negation" not in by_id
    summary = report.to_dict()["methods"]
    assert summary["negation"]["reasons"]["'response' is empty"] == 1
    assert sum(m["pairs"] for m in summary.values()) == len(pairs)
    assert all(m["pairs"] + m["skipped"] == 4 for m in summary.values())
    again, _ = make_stress_pairs(**kw)
    assert [p.to_dict() for p in again] == [p.to_dict() for p in pairs]  # seeded: the same pairs
    # without topics, random pairing takes any other knowledge and expects off-topic
    pairs, _ = make_stress_pairs(**{**kw, "topics": None}, methods=["random_pairing"])
    assert {p.expected_label for p in pairs} == {"off-topic"}
    assert all(p.perturbed_knowledge != p.original_knowledge for p in pairs)


def test_make_stress_pairs_checks_its_input(nlp):
    with pytest.raises(ValueError, match="Unknown perturbation method"):
        make_stress_pairs(responses=["a"], knowledge=["b"], methods=["shuffle"], nlp=nlp)
    with pytest.raises(ValueError, match="ids must be unique"):
        make_stress_pairs(responses=["a", "b"], knowledge=["b", "c"], ids=[1, 1], nlp=nlp)


# -- q2 perturb --------------------------------------------------------------------------------------------------
def test_cli_jsonl_and_csv(tmp_path, capsys):
    src = tmp_path / "dialogue.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "pairs.jsonl"
    assert main(["perturb", "--input", str(src), "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "4 rows read, seed 0, topics: topic" in text and "| negation | " in text
    first = out.read_bytes()
    pairs = [json.loads(line) for line in first.decode().splitlines()]
    assert set(pairs[0]) == {"id", "source_id", "method", "expected_label", "expected_label3", "change",
                             "original_response", "original_knowledge", "perturbed_response",
                             "perturbed_knowledge", "topic"}
    assert main(["perturb", "--input", str(src), "--output", str(out)]) == 0
    assert out.read_bytes() == first  # reproducible
    # CSV with other column names and a row filter, JSON summary
    table = tmp_path / "dialogue.csv"
    with table.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["reply", "evidence", "gold"])
        w.writeheader()
        for r in ROWS:
            w.writerow({"reply": r["response"], "evidence": r["knowledge"], "gold": "ok" if r["id"] != "b" else "no"})
    capsys.readouterr()
    assert main(["perturb", "--input", str(table), "--output", str(out), "--response-column", "reply",
                 "--knowledge-column", "evidence", "--keep", "gold=ok", "--methods", "negation,inversion",
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["n_read"], summary["n_rows"], summary["topic_column"]) == (4, 3, None)
    assert list(summary["methods"]) == ["negation", "inversion"]
    assert {json.loads(line)["source_id"] for line in out.read_text().splitlines()} <= {"0", "2"}


@pytest.mark.parametrize("argv, message", [
    (["--response-column", "reply"], "error: --response-column: "),
    (["--response-column", "reply"], "no field(s) ['reply']"),
    (["--keep", "gold"], "error: --keep: expects COLUMN=VALUE"),
    (["--input", "other.jsonl"], "error: --input: stress pairs read one input"),
    (["--methods", "negation,shuffle"], "Unknown perturbation method"),
])
def test_cli_errors(tmp_path, capsys, argv, message):
    src = tmp_path / "dialogue.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert main(["perturb", "--input", str(src), "--output", str(tmp_path / "o.jsonl"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_options_errors_name_the_setting():
    from q2_plugins.metric.errors import SettingError

    with pytest.raises(SettingError, match="^inputs: name at least one input$"):
        PerturbOptions(inputs=(), output="o.jsonl")
    with pytest.raises(SettingError, match="^generator: ") as e:
        PerturbOptions(inputs=("a.jsonl",), output="o.jsonl", recipe="conv-fever", generator="gpt2")
    assert "--" not in str(e.value)


# -- contradictions that contradict: the rules found reading the recipes' rows ------------------------------------
@pytest.mark.parametrize("response, knowledge, reason", [
    ("i remember watching it when it was first broadcast in 1960 .", "The show was first broadcast in 1960.",
     "in a temporal clause (when, while, after, ...)"),
    ("the show that was cancelled in 1990 had fans .", "The show was cancelled in 1990.", "in a relative clause"),
    ("it is also a city in france .", "Paris is a city in France.",
     "would read 'not also' (not also / only: no contradiction)"),
    ("it is only sold in the us .", "It is sold in the US.",
     "would read 'not only' (not also / only: no contradiction)"),
    ("it melts if it is warm .", "Ice melts; it is warm in spring.", "in a conditional clause (if, unless)"),
])
def test_negation_skips_clauses_that_claim_nothing(nlp, response, knowledge, reason):
    assert negate(nlp(response), content_forms(nlp(knowledge))) == Skip(reason)


def test_negated_knowledge_negates_the_clause_holding_the_responses_claim(nlp):
    knowledge = nlp("McDonald's is the world's largest restaurant chain by revenue, serving over 69 million "
                    "customers daily in over 100 countries.")
    # the response draws on the participial clause: negating "is" would leave "serving 69 million" true
    assert negate(knowledge, content_forms(nlp("they serve 69 million people daily .")), best_sentence_only=True) \
        == Skip("the negated claim shares no content word with the other text")
    out = negate(knowledge, content_forms(nlp("it is the largest restaurant chain .")), best_sentence_only=True)
    assert out.text.startswith("McDonald's is not the world's largest")
    estimated = nlp("The skateboarding market is estimated to be 4.8 billion dollars. It was founded by kids.")
    out = negate(estimated, content_forms(nlp("the market is worth 4.8 billion")), best_sentence_only=True)
    assert out.text.startswith("The skateboarding market is not estimated")  # the complement is the claim


@pytest.fixture(scope="module")
def cased_pool(nlp):
    return entity_pool([nlp(t) for t in (
        "The album sold over 80 million copies in the United States.",
        "The company had 120 million customers and 40 million users in 2010.",
        "In 1995 the band played with The Beatles in London.", "She toured with Metallica in Paris.",
        "The Americans and the Canadians met in Boston.", "Stratus is a low cloud, said Italian experts.") * 2])


def test_entity_pool_says_how_each_entity_was_seen(cased_pool):
    info = cased_pool.info
    assert cased_pool["CARDINAL"] == ["80 million", "120 million", "40 million"]  # "over" is not part of the number
    assert info["beatles"].the and not info["metallica"].the and info["americans"].plural
    assert info["london"].name and ("stratus" not in info or not info["stratus"].name)  # only as a first word


@pytest.mark.parametrize("response, knowledge, allowed", [
    # a bare number against the knowledge's bound moves the way that breaks it: "over 80 million" down, by a third
    ("it sold 80 million copies .", "The album sold over 80 million copies.", {"40 million"}),
    ("it sold 80 million copies .", "The album sold under 80 million copies.", {"120 million"}),
    ("it sold 80 million copies .", "The album sold 80 million copies.", {"120 million", "40 million"}),
])
def test_entity_swap_moves_numbers_to_break_the_claim(nlp, cased_pool, response, knowledge, allowed):
    kdoc = nlp(knowledge)
    seen = set()
    for seed in range(8):
        out = swap_entity(nlp(response), knowledge, cased_pool, random.Random(seed), knowledge_doc=kdoc)
        if isinstance(out, Edit):
            seen.add(out.change.split(" -> ")[1].split("'")[1].lower())
    assert seen and seen <= allowed, seen


def test_entity_swap_leaves_a_bound_stated_in_both_texts(nlp, cased_pool):
    """"over 70" in the knowledge does not rule out "over 120": unsupported, never a contradiction."""
    knowledge = "The album sold over 80 million copies."
    out = swap_entity(nlp("it sold over 80 million copies ."), knowledge, cased_pool, random.Random(0),
                      knowledge_doc=nlp(knowledge))
    assert out == Skip("a bound in both texts (over 70, over 70): no value surely breaks it")


def test_entity_swap_refuses_what_would_garble(nlp, cased_pool):
    def swap(response: str, knowledge: str) -> Any:
        return swap_entity(nlp(response), knowledge, cased_pool, random.Random(0), knowledge_doc=nlp(knowledge))

    # a name seen only as a sentence's first word is no name (the tagger's "Stratus" as an organisation)
    assert swap("stratus is a low cloud .", "Stratus is a low cloud.") in (
        Skip("the shared entity is not seen as a name (capitalised inside a sentence) in the data"),
        Skip("the knowledge does not tag the shared entity with its type"))
    assert swap("it is one of the best .", "It is one of the best three.").reason.startswith(
        ("a number stating no value", "no named entity", "the knowledge does not tag"))
    assert swap("it happened today .", "It happened today.").reason in (
        "a date without a number (today, the summer)", "no named entity shared by response and knowledge")
    out = swap("do you ever listen to the beatles ?", "In 1995 the band played with The Beatles in London.")
    assert isinstance(out, Skip) or "metallica" not in out.text  # "the metallica" never
    out = swap("americans met in boston .", "The Americans met in Boston.")  # no place's level is seen here
    assert out == Skip("a place whose level (city, state or country) the data does not show")


@pytest.fixture(scope="module")
def kinds_pool(nlp):
    return entity_pool([nlp(t) for t in (
        "The band was formed in Pasadena, California, in 1972.", "The team is based in Memphis, Tennessee.",
        "The shop opened in Seattle, Washington.", "Titanic was directed by James Cameron.",
        "In 1951 Alan Freed began playing the music.", "The title character is the cat Garfield, created in 1978.",
        "The show aired in Canada, Latin America, and Europe.", "It was written in Koine Greek.") * 3])


def test_entity_swap_keeps_kinds_and_relations(nlp, kinds_pool):
    """A person for a person seen as one, a place for a place of the same level, and a contradiction only where the
    knowledge states the original alone and in the same relation (issue 52's wrong swaps)."""
    info = kinds_pool.info
    assert info["james cameron"].person and info["alan freed"].person and not info["garfield"].person
    assert (info["pasadena"].level, info["california"].level, info["seattle"].level) == ("city", "region", "city")

    def swap(response: str, knowledge: str) -> Any:
        return swap_entity(nlp(response), knowledge, kinds_pool, random.Random(0), knowledge_doc=nlp(knowledge))

    out = swap("i know james cameron directed it .", "Titanic was directed by James Cameron.")
    assert out == Edit("i know alan freed directed it .", "'james cameron' -> 'alan freed' (PERSON)")
    out = swap("garfield was first published in 1978 .", "Published since 1978, it stars the cat Garfield.")
    assert isinstance(out, Skip) or "garfield was" in out.text  # the date may move, the cat is never a person
    assert swap("it aired in canada and latin america .", "It aired in Canada, Latin America, and Europe.") == Skip(
        "one of a list (another member could hold too): no contradiction")
    assert swap("they are based in memphis tennessee .", "The team is based in Memphis, Tennessee.") == Skip(
        "a place qualifying another (Pasadena, California)")
    out = swap("the band is from seattle .", "The band is from Seattle.")
    assert isinstance(out, Edit) and out.text in ("the band is from pasadena .", "the band is from memphis .")
    assert swap("it is one of the three largest companies .", "It is one of the three largest companies.") == Skip(
        "a number in 'one of the N ...': a rank, not a count")
    assert swap("he wrote poems in 1971 .", "He edited books in 1971.").reason == (
        "the knowledge states it in another relation: no contradiction")


def test_entity_swap_replacements_are_seen_enough_and_of_the_same_kind(nlp):
    from q2_plugins.training.entities import _norp_kind

    once = entity_pool([nlp("They met in Frappuccino and in Boston."), nlp("He lives in Boston and in Rome."),
                        nlp("He lives in Rome, like the US.")])
    assert "Boston" in once["GPE"] and "Frappuccino" not in once.get("GPE", [])  # a place seen once: the tagger's
    assert "US" not in once.get("GPE", [])  # "in us" would read as a pronoun
    assert (_norp_kind("Italian"), _norp_kind("Catholic"), _norp_kind("Republican"), _norp_kind("stevia")) == (
        "nationality", "religion", "party", None)
    pool = entity_pool([nlp(t) for t in ("An American and an Italian met a Catholic.",) * 2])
    knowledge = "Italian cuisine is known for its diversity."
    assert swap_entity(nlp("italian cuisine is diverse ."), knowledge, pool, random.Random(0),
                       knowledge_doc=nlp(knowledge)).reason.startswith("a nationality in the subject")
    knowledge = "Bob Ross was an American painter."
    out = swap_entity(nlp("bob ross was an american painter ."), knowledge, pool, random.Random(0),
                      knowledge_doc=nlp(knowledge))
    assert out.text == "bob ross was an italian painter ."  # never "a catholic painter": both could hold


# -- antonym ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("response, knowledge, reason", [
    ("heavy metal lyrics are associated with aggression .", "Heavy metal lyrics are associated with aggression.",
     "inside a fixed phrase (an adjective of a compound: heavy metal lyrics)"),
    ("ethical vegans avoid animal products .", "Ethical vegans avoid animal products.",
     "in the subject (the adjective names what the claim is about)"),
    ("it has fair skin color .", "It has fair skin color.",
     "inside a fixed phrase (an adjective of a compound: heavy metal lyrics)"),
    ("it lies between violet and green .", "It lies between violet and green.",
     "one of coordinated adjectives (hot and cold): the other may hold"),
    ("he won the presidential race .", "He won the presidential race.",
     "no antonym that is a real word of the same use (made-up prefixed forms, 'same')"),
    ("it is one of three co - equal branches .", "It is one of three co-equal branches.",
     "inside a hyphenated compound (co-equal)"),
    ("there are different categories .", "There are different categories.",
     "no antonym that is a real word of the same use (made-up prefixed forms, 'same')"),
    ("they serve hot and cold coffee .", "They serve hot and cold coffee.",
     "one of coordinated adjectives (hot and cold): the other may hold"),
    ("i ' m not sure when it became popular .", "It became popular in the 1930s.",
     "under the speaker's doubt or opinion (i'm not sure when ..., i think ...)"),
    ("i think the game is popular .", "The game is popular.",
     "under the speaker's doubt or opinion (i'm not sure when ..., i think ...)"),
])
def test_antonym_only_where_the_adjective_is_the_claim(nlp, response, knowledge, reason):
    from q2_plugins.training.edits import antonym, model_words, wordnet_antonyms

    out = antonym(nlp(response), content_forms(nlp(knowledge)), wordnet_antonyms(), random.Random(0),
                  model_words(nlp))
    assert out == Skip(reason)


def test_antonym_writes_a_real_word_of_the_same_use(nlp):
    from q2_plugins.training.edits import antonym, model_words, wordnet_antonyms

    words, pairs = model_words(nlp), wordnet_antonyms()
    assert "unpopular" in words and "unpresidential" not in words
    out = antonym(nlp("it is very popular at resorts ."), content_forms(nlp("It is a popular activity at resorts.")),
                  pairs, random.Random(0), words)
    assert out == Edit("it is very unpopular at resorts .", "'popular' -> 'unpopular' (WordNet antonym)")
    out = antonym(nlp("they are common behavior in birds ."),  # "uncommon", never "individual"
                  content_forms(nlp("They are common behaviors in birds.")), pairs, random.Random(0), words)
    assert out.text == "they are uncommon behavior in birds ."


def test_antonym_never_of_another_sense(nlp):
    from q2_plugins.training.edits import antonym, model_words, wordnet_antonyms

    words, pairs = model_words(nlp), wordnet_antonyms()

    def edit(response: str, knowledge: str) -> Any:
        return antonym(nlp(response), content_forms(nlp(knowledge)), pairs, random.Random(0), words)

    assert edit("several minerals have a green color .", "Several minerals have a green color.") == Skip(
        "a colour word (its WordNet antonym is of another sense: green, ripe)")
    assert edit("it has a dominant wavelength .", "It has a dominant wavelength.") == Skip(
        "antonyms of several senses and none of the word's own (dominant: recessive, subordinate)")
