"""The candidate rule and the personal filter with the real spaCy pipeline (en_core_web_sm 3.8.0)."""

from __future__ import annotations

import pytest

from q2_plugins.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy


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
    from q2_plugins.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="spacy_model"):
        load_spacy("xx_no_such_pipeline")
