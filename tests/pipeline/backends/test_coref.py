"""Coreference (--coref, the paper's appendix A): golden cases with a scripted coreference, the rewrite rules, bad
history cells, caching and batching, and the F-coref backend on a tiny random-weight model built here."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.coref_rules import join_dialogue, rewrite
from q2_plugins.metric.errors import ModelLoadError
from tests.fakes import FakeCandidates, FakeCoref, FakeNLI, FakePersonal, FakeQA, FakeQG

HISTORY = "Bob Ross was a painter"
RESPONSE = "he became famous on youtube"
RESOLVED = "Bob Ross became famous on youtube"
KNOWLEDGE = "Bob Ross became an Internet celebrity, popular with fans on YouTube."


def _scorer(coref_table, *, cache=None, **cfg):
    """A scorer whose parts know only the resolved response: a question about "he" would not be scripted."""
    coref = FakeCoref(coref_table)
    cands = FakeCandidates({RESOLVED: ["Bob Ross", "youtube"], RESPONSE: ["youtube"],
                            "it aired on pbs": ["pbs"]})
    qg = FakeQG({("Bob Ross", RESOLVED): ["Who became famous on youtube?"],
                 ("youtube", RESOLVED): ["Where did Bob Ross become famous?"],
                 ("youtube", RESPONSE): ["Where did he become famous?"],
                 ("pbs", "it aired on pbs"): ["Where did it air?"]})
    qa = FakeQA({("Who became famous on youtube?", RESOLVED): "Bob Ross",
                 ("Who became famous on youtube?", KNOWLEDGE): "Bob Ross",
                 ("Where did Bob Ross become famous?", RESOLVED): "youtube",
                 ("Where did Bob Ross become famous?", KNOWLEDGE): "YouTube",
                 ("Where did he become famous?", RESPONSE): "youtube",
                 ("Where did it air?", "it aired on pbs"): "pbs"})
    scorer = Q2Scorer(Q2Config(coref=True, **cfg), candidate_extractor=cands, question_generator=qg,
                      question_answerer=qa, nli=FakeNLI({}), personal_filter=FakePersonal(), coreference=coref,
                      cache=cache)
    return scorer, coref, cands


def test_bob_ross_golden():
    scorer, coref, cands = _scorer({(HISTORY, RESPONSE): [["Bob Ross", "he"]]})
    result = scorer.score(responses=[RESPONSE], knowledge=[KNOWLEDGE], history=[HISTORY], explain=True)
    row = result.responses[0]
    assert cands.calls == [[RESOLVED]]  # candidates are read from the resolved response
    assert row.candidates == ["Bob Ross", "youtube"]
    assert [q.question for q in row.questions] == ["Who became famous on youtube?",
                                                   "Where did Bob Ross become famous?"]
    assert [q.coref for q in row.questions] == ["he -> Bob Ross", None]
    assert row.score == 1.0 and row.num_questions == 2
    assert row.coref == {"original_response": RESPONSE, "response": RESOLVED,
                         "replacements": [{"start": 0, "end": 2, "pronoun": "he", "mention": "Bob Ross"}]}
    data = json.loads(json.dumps(row.to_dict()))
    assert data["coref"]["replacements"][0]["mention"] == "Bob Ross"
    assert data["questions"][0]["coref"] == "he -> Bob Ross" and "coref" not in data["questions"][1]
    assert "coref:fake-coref|coref-dec:pronouns-to-mention" in str(scorer.signature)
    assert "coref:fake-coref" in scorer.signature.short


def test_without_coref_nothing_changes():
    """Off (the default): the history is not read, the signature and rows carry no coreference."""
    scorer, coref, cands = _scorer({})
    scorer = Q2Scorer(Q2Config(), candidate_extractor=cands, question_generator=scorer._qg,
                      question_answerer=scorer._qa, nli=FakeNLI({}), personal_filter=FakePersonal(),
                      coreference=coref)
    result = scorer.score(responses=[RESPONSE], knowledge=[KNOWLEDGE], history=[12], explain=True)
    row = result.responses[0]
    assert coref.calls == [] and row.coref is None and "coref" not in row.to_dict()
    assert [q.question for q in row.questions] == ["Where did he become famous?"]
    assert "coref" not in str(scorer.signature)


@pytest.mark.parametrize("history", [None, "", "   ", []])
def test_missing_or_empty_history_resolves_the_response_alone(history):
    scorer, coref, _ = _scorer({("", "it aired on pbs"): []})
    result = scorer.score(responses=["it aired on pbs"], knowledge=["PBS aired it."], history=[history],
                          explain=True)
    assert coref.calls == [[("", "it aired on pbs")]]
    assert result.responses[0].status == "scored"
    assert result.responses[0].coref["replacements"] == []


def test_bad_history_cell_is_its_rows_error():
    scorer, coref, _ = _scorer({(HISTORY, RESPONSE): [["Bob Ross", "he"]]})
    result = scorer.score(responses=[RESPONSE, RESPONSE], knowledge=[KNOWLEDGE] * 2, history=[HISTORY, 42],
                          explain=True)
    ok, bad = result.responses
    assert ok.status == "scored" and ok.coref["response"] == RESOLVED
    assert bad.status == "error" and bad.error == "history must be a string, got int"


def test_coreference_failure_is_per_row():
    class Failing(FakeCoref):
        def resolve(self, pairs):
            if any(r == "boom" for _, r in pairs):
                raise RuntimeError("scripted failure")
            return super().resolve(pairs)

    scorer, _, _ = _scorer({})
    scorer._coref = scorer._custom["coref"] = Failing({(HISTORY, RESPONSE): [["Bob Ross", "he"]]})
    result = scorer.score(responses=[RESPONSE, "boom"], knowledge=[KNOWLEDGE] * 2, history=[HISTORY] * 2,
                          explain=True)
    assert result.responses[0].coref["response"] == RESOLVED
    assert result.responses[1].error == "coreference failed: RuntimeError: scripted failure"


def test_progress_shows_the_coref_stage():
    from q2_plugins.metric.progress import Progress

    scorer, _, _ = _scorer({(HISTORY, RESPONSE): [["Bob Ross", "he"]]})
    buf = io.StringIO()
    with Progress(rows=False, file=buf) as progress:
        scorer.score(responses=[RESPONSE], knowledge=[KNOWLEDGE], history=[HISTORY], progress=progress)
    assert "coref" in buf.getvalue()


def test_one_call_and_cached(tmp_path):
    table = {(HISTORY, RESPONSE): [["Bob Ross", "he"]], ("", "it aired on pbs"): []}
    scorer, coref, _ = _scorer(table, cache=Q2Cache(str(tmp_path)))
    args = dict(responses=[RESPONSE, "it aired on pbs", RESPONSE], knowledge=[KNOWLEDGE, "PBS", KNOWLEDGE],
                history=[HISTORY, "", HISTORY], explain=True)
    first = scorer.score(**args)
    assert coref.calls == [[(HISTORY, RESPONSE), ("", "it aired on pbs")]]  # one call, each pair once
    again, coref2, _ = _scorer(table, cache=Q2Cache(str(tmp_path)))
    second = again.score(**args)
    assert coref2.calls == [] and second.to_dict() == first.to_dict()


@pytest.mark.parametrize(
    "history, response, clusters, expected",
    [
        (HISTORY, RESPONSE, [["Bob Ross", "he"]], RESOLVED),
        ("The Joy of Painting was a show", "its host painted", [["The Joy of Painting", "its"]],
         "The Joy of Painting's host painted"),
        ("I met Bob", "you told me he paints", [["Bob", "he"], ["I", "me"]], "you told me Bob paints"),
        ("He paints", "he is good", [["He", "he"]], "he is good"),  # no informative mention: unchanged
        ("Bob Ross and he", "painted", [["Bob Ross", "he"]], "painted"),  # the pronoun is not in the response
        ("", "Bob Ross said he paints", [["Bob Ross", "he"]], "Bob Ross said Bob Ross paints"),
    ],
)
def test_rewrite_rules(history, response, clusters, expected):
    assert FakeCoref({(history, response): clusters}).resolve([(history, response)])[0].response == expected


def test_rewrite_picks_the_longest_mention():
    text, offset = join_dialogue("Bob Ross was a painter. Ross taught", "he painted")
    spans = [(text.index("Ross "), text.index("Ross ") + 4), (0, 8), (offset, offset + 2)]
    assert rewrite("Bob Ross was a painter. Ross taught", "he painted", [spans]).response == "Bob Ross painted"


# -- the F-coref backend on a tiny random-weight model -------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_coref(tmp_path_factory):
    from q2_plugins.backends.hf.tiny import build_fcoref

    return build_fcoref(tmp_path_factory.mktemp("coref") / "coref")


DIALOGUES = [(HISTORY, RESPONSE), ("", "My cat likes its food and it sleeps."),
             ("The Joy of Painting aired on PBS. " * 20, "it ran for years and he painted happy trees."),
             ("We talked about Ross.", "Yes, his paintings are nice; I like them.")]


def test_fcoref_loads_and_batches_as_per_item(tiny_coref):
    from q2_plugins.backends.hf.coref import FCoref, load_fcoref

    tok, model = load_fcoref(str(tiny_coref))
    batched = FCoref(tok, model, batch_size=3).resolve(DIALOGUES)
    per_item = [FCoref(tok, model, batch_size=1, sort_by_length=False).resolve([d])[0] for d in DIALOGUES]
    assert batched == per_item
    assert all(r.response for r in batched)


def test_fcoref_keeps_the_end_of_a_long_history(tiny_coref):
    from q2_plugins.backends.hf.coref import FCoref, load_fcoref

    fc = FCoref(*load_fcoref(str(tiny_coref)))
    long_history = "Bob Ross painted a tree. " * 400
    assert fc.unfit([(long_history, RESPONSE), ("", "word " * 600)]) == [
        None, "the response alone is longer than the coreference model's window of 512 tokens"]
    assert fc.resolve([(long_history, RESPONSE)])[0].response


def test_fcoref_in_the_scorer_batched_equals_per_item(tiny_coref, tiny_config):
    cfg = tiny_config.replace(coref=True, coref_model=str(tiny_coref))
    responses = [r for _, r in DIALOGUES]
    args = dict(responses=responses, knowledge=["Bob Ross painted on PBS."] * len(responses),
                history=[h for h, _ in DIALOGUES], explain=True)
    batched = Q2Scorer(cfg).score(**args)
    per_item = Q2Scorer(cfg.replace(per_item=True)).score(**args)
    assert batched.to_dict() == per_item.to_dict()
    assert all(r.coref is not None for r in batched.responses)
    assert "coref:fcoref-head-v1:local:sha256:" in str(batched.signature)


def test_not_an_fcoref_model_says_so(tiny_models):
    from q2_plugins.backends.hf.coref import load_fcoref

    with pytest.raises(ModelLoadError, match=r"COREF model .*coref_model.*no 'coref_head'"):
        load_fcoref(str(tiny_models["nli"]))


def test_cli_missing_coref_model_exits_2_with_one_line(tiny_config, tmp_path):
    """The coreference model loads first, so a missing one stops the run before the other models load."""
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"response": RESPONSE, "knowledge": KNOWLEDGE, "history": HISTORY}) + "\n")
    out = subprocess.run([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(data), "--output",
                          str(tmp_path / "out.jsonl"), "--qg-model", tiny_config.qg_model, "--qa-model",
                          tiny_config.qa_model, "--nli-model", tiny_config.nli_model, "--coref",
                          "--coref-model", str(tmp_path / "nowhere"), "--history-column", "history"],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("q2 score")]  # besides "q2: loading models"
    assert len(lines) == 1 and "--coref-model" in lines[0] and "nowhere" in lines[0]


def test_the_coreference_model_loads_before_the_others(tmp_path):
    """A missing coreference model fails before any other model is even looked at (the QG model is missing too)."""
    scorer = Q2Scorer(Q2Config(coref=True, coref_model=str(tmp_path / "nowhere"), qg_model=str(tmp_path / "no-qg")),
                      candidate_extractor=FakeCandidates({}))
    with pytest.raises(ModelLoadError, match="COREF model"):
        scorer.load()
