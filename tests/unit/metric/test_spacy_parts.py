"""The candidate rule and the personal filter with the real spaCy pipeline (en_core_web_sm 3.8.0)."""

from __future__ import annotations

import pytest

from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


def test_candidates_entities_first_then_new_noun_chunks(nlp):
    text = "Barack Obama was born in Hawaii and i think he loved the beaches of Hawaii."
    cands = SpacyCandidateExtractor(nlp).extract([text])[0]
    doc = nlp(text)
    ents = [e.text for e in doc.ents]
    assert cands[: len(ents)] == ents  # entities first, every mention
    assert cands.count("Hawaii") == ents.count("Hawaii") == 2  # repeated mentions stay, as in the original
    assert "i" not in [c.lower() for c in cands]
    lowered = [c.lower() for c in cands]
    chunks = [c.text for c in doc.noun_chunks if c.text.lower() not in [e.lower() for e in ents]]
    assert cands[len(ents):] == [c for c in chunks if c.lower() != "i"]
    assert "the beaches" in lowered


def test_candidates_batched_equals_one_by_one(nlp):
    texts = ["it aired in the us , canada and latin america", "Coffee is very acidic.", "", "🙂🙂", "Ich bin hier."]
    ex = SpacyCandidateExtractor(nlp)
    assert ex.extract(texts) == [ex.extract([t])[0] for t in texts]


@pytest.mark.parametrize(
    "question, personal",
    [
        ("What do you like to do?", True),
        ("What do I love?", True),
        ("What is your favourite colour?", True),
        ("Where is my house?", True),
        ("What country did the show air in?", False),
        ("Who wrote the book?", False),
    ],
)
def test_personal_filter(nlp, question, personal):
    assert SpacyPersonalFilter(nlp).is_personal([question]) == [personal]


def test_missing_pipeline_names_the_setting():
    from q2_plugins.metric.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="spacy_model"):
        load_spacy("xx_no_such_pipeline")


def test_personal_filter_parses_only_what_can_be_personal_and_decides_as_a_full_parse(nlp, monkeypatch):
    """The token pre-check changes no decision: every question of the bundled recorded run, every response sentence
    and hard cases (contractions, capitals, look-alikes), against the full parse of each; and questions without an
    I / you / my / your token are not parsed at all."""
    import csv
    from pathlib import Path

    data = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "original_run_slice"
    texts = set()
    for path in data.glob("*_out.steps.csv"):
        with path.open(encoding="utf-8") as f:
            for row in csv.DictReader(f):
                texts.update(t for t in (row["question"], row["response"]) if t and t != "NO_Q")
    with (data.parent / "begin_dev" / "dev_05_24_21.tsv").open(encoding="utf-8") as f:  # BEGIN's turns: many I / you
        for row in csv.DictReader(f, delimiter="\t"):
            texts.update(t for t in (row["response"], row["previous turn"]) if t)
    hard = ["You're right, what's your name?", "I'm here", "what is YOUR view?", "i.e. what is it?", "y'all ok?",
            "what did i-95 cross?", "Where's my_car?", "your", "I", "what did the youtube star buy?", "mine or yours?",
            "Do you?", "What do they think of you?", "thank-you notes: who sends them?"]
    questions = sorted(texts) + hard
    assert len(questions) > 1000
    pf = SpacyPersonalFilter(nlp)
    expected = [pf._personal(doc) for doc in nlp.pipe(questions)]
    assert pf.is_personal(questions) == expected
    assert 0 < sum(expected) < len(expected)
    parsed: list[str] = []
    real_pipe = nlp.pipe
    monkeypatch.setattr(nlp, "pipe", lambda texts, **kw: real_pipe(parsed.extend(texts) or texts, **kw))
    assert pf.is_personal(["Who wrote the book?", "What do you like?", "Where is the youtube office?"]) == [
        False, True, False]
    assert parsed == ["What do you like?"]
