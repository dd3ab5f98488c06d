"""The full pipeline through tiny random-weight T5 / ALBERT / RoBERTa models loaded by the real loading code.

Random weights make the answers meaningless, so these tests check the machinery: loading, batching (batched ==
per-item), windows, the cache, errors, explanations. Golden values live in test_golden.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.backends.hf import transformers_models
from q2_plugins.backends.hf.tiny import build_bert_qa, build_roberta_nli, corpus_sentences
from q2_plugins.backends.hf.transformers_models import load_model
from q2_plugins.cli import main
from q2_plugins.metric.components import Answer, AnswerKind, NLILabel
from q2_plugins.metric.errors import ModelLoadError
from tests.fakes import NeverCalled

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="session")
def tiny(tiny_models) -> dict[str, Path]:
    return tiny_models


def tiny_config(tiny, **kw) -> Q2Config:
    return Q2Config(qg_model=str(tiny["qg"]), qa_model=str(tiny["qa"]), nli_model=str(tiny["nli"]),
                    qg_max_length=12, **kw)


@pytest.fixture(scope="session")
def sample_rows():
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


LONG_KNOWLEDGE = " ".join(corpus_sentences() * 60)  # thousands of tokens


def test_pipeline_runs_and_explains(tiny, sample_rows):
    scorer = Q2Scorer(tiny_config(tiny, question_mode="all", remove_personal=False))
    res = scorer.score(responses=[r["response"] for r in sample_rows], knowledge=[r["knowledge"] for r in sample_rows],
                       explain=True)
    assert len(res) == len(sample_rows)
    for r in res.responses:
        assert r.status in ("scored", "fallback"), r.error
        assert r.num_candidates == len(r.candidates) > 0
        assert 0.0 <= r.score <= 1.0
        # every generated question is either valid or dropped with a reason: nothing vanishes
        assert len(r.questions) + len(r.dropped) == r.num_candidates * 5
        assert {d.reason for d in r.dropped} <= {"no_answer_in_response", "answer_mismatch"}
    from q2_plugins.metric.signature import content_hashes, directory_digest

    qg_id = f"qg:local:sha256:{directory_digest(content_hashes(tiny['qg']))[:16]}[float32]"
    assert qg_id in res.signature and str(tiny["qg"]) not in res.signature  # content, not the path, names it
    assert "qg-dec:beam5-ret5-nrng3-max12" in res.signature and "questions:all" in res.signature
    json.loads(res.to_json())


def test_batched_equals_per_item(tiny, sample_rows):
    responses = [r["response"] for r in sample_rows] + ["Paris is the capital of France ."]
    knowledge = [r["knowledge"] for r in sample_rows] + [LONG_KNOWLEDGE]
    # (LONG_KNOWLEDGE is over the default knowledge budget: lifted, so its windows are read)
    batched = Q2Scorer(tiny_config(tiny, batch_size=8, question_mode="all", remove_personal=False,
                                   max_knowledge_chars=0))
    per_item = Q2Scorer(tiny_config(tiny, per_item=True, question_mode="all", remove_personal=False,
                                    max_knowledge_chars=0))
    a = batched.score(responses=responses, knowledge=knowledge, explain=True)
    b = per_item.score(responses=responses, knowledge=knowledge, explain=True)
    assert a.to_dict() == b.to_dict()
    assert a.signature == b.signature  # batching is not part of the signature: it cannot change results


def test_components_batched_equal_per_item(tiny, sample_rows):
    scorer = Q2Scorer(tiny_config(tiny, batch_size=16))
    one = Q2Scorer(tiny_config(tiny, per_item=True))
    pairs = [(c, r["response"]) for r in sample_rows for c in r["response"].split()[:3]]
    assert scorer.question_generator.generate(pairs) == one.question_generator.generate(pairs)
    qa_pairs = [(q, r["knowledge"]) for r in sample_rows for q in ("What is it?", "Who did what in which year?")]
    qa_pairs.append(("What is it?", LONG_KNOWLEDGE))
    assert scorer.question_answerer.answer(qa_pairs) == one.question_answerer.answer(qa_pairs)
    nli_pairs = [(r["knowledge"], r["response"]) for r in sample_rows] + [(LONG_KNOWLEDGE, "Paris is nice.")]
    assert scorer.nli.predict(nli_pairs) == one.nli.predict(nli_pairs)


def test_long_knowledge_is_read_in_windows(tiny):
    scorer = Q2Scorer(tiny_config(tiny, qa_max_length=64, qa_stride=16))
    qa = scorer.question_answerer
    question = "What is the capital?"
    enc = qa.tokenizer(question, LONG_KNOWLEDGE, truncation="only_second", max_length=64, stride=16,
                       return_overflowing_tokens=True)
    assert len(enc["input_ids"]) > 50  # many windows, none dropped
    ans = qa.answer([(question, LONG_KNOWLEDGE)])[0]
    assert isinstance(ans, Answer)
    # a context that fits in one window gives the same answer whatever the window size
    short = corpus_sentences()[0]
    big = Q2Scorer(tiny_config(tiny, qa_max_length=512)).question_answerer.answer([(question, short)])
    assert qa.answer([(question, short)]) == big


def test_original_decoding_matches_a_hand_decode(tiny):
    """Independent start/end argmax over the whole input, text rebuilt from tokens, as the original code did."""
    import torch

    scorer = Q2Scorer(tiny_config(tiny))
    qa = scorer.question_answerer
    pairs = [("Where was he born?", s) for s in corpus_sentences()[:20]]
    for (q, c), got in zip(pairs, qa.answer(pairs)):
        inputs = qa.tokenizer(q, c, return_tensors="pt")
        with torch.no_grad():
            out = qa.model(**inputs)
        s, e = int(out.start_logits[0].argmax()), int(out.end_logits[0].argmax()) + 1
        ids = inputs["input_ids"][0].tolist()
        text = qa.tokenizer.convert_tokens_to_string(qa.tokenizer.convert_ids_to_tokens(ids[s:e]))
        expected = "[CLS]" if text == "[CLS]" else text
        got_text = "[CLS]" if got.kind is AnswerKind.NO_ANSWER else got.text
        assert got_text == expected


def test_squad2_decoding_returns_context_spans_or_no_answer(tiny):
    qa = Q2Scorer(tiny_config(tiny, qa_decoding="squad2")).question_answerer
    contexts = corpus_sentences()[:10]
    for c, a in zip(contexts, qa.answer([("Who?", c) for c in contexts])):
        assert a.kind in (AnswerKind.SPAN, AnswerKind.NO_ANSWER)
        if a.kind is AnswerKind.SPAN:
            assert a.text in c


def test_bert_qa_works_too(tiny, tmp_path):
    bert = build_bert_qa(tmp_path / "bert")
    scorer = Q2Scorer(Q2Config(qg_model=str(tiny["qg"]), qa_model=str(bert), nli_model=str(tiny["nli"]),
                               qg_max_length=12))
    res = scorer.score(responses=["paris is the capital of france ."], knowledge=["Paris is in France."])
    assert res.responses[0].status in ("scored", "fallback")


def test_nli_labels_are_read_from_the_config(tmp_path, tiny):
    order = {0: "entailment", 1: "neutral", 2: "contradiction"}
    path = build_roberta_nli(tmp_path / "nli", id2label=order)
    scorer = Q2Scorer(Q2Config(nli_model=str(path)))
    assert scorer.nli.labels == {0: NLILabel.ENTAILMENT, 1: NLILabel.NEUTRAL, 2: NLILabel.CONTRADICTION}
    bad = build_roberta_nli(tmp_path / "bad", id2label={0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ModelLoadError, match="entailment / neutral / contradiction"):
        _ = Q2Scorer(Q2Config(nli_model=str(bad))).nli


def test_load_errors_name_role_setting_and_prefetch(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere"
    with pytest.raises(ModelLoadError) as e:
        _ = Q2Scorer(Q2Config(qa_model=str(missing))).question_answerer
    msg = str(e.value)
    assert e.value.setting == "qa_model" and "--" not in msg
    assert msg.startswith(f"Cannot load the QA model {str(missing)!r} (setting qa_model): the folder {missing} does "
                          f"not exist")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no slow network retries here
    with pytest.raises(ModelLoadError, match="QG model 'mrm8488/t5-base-finetuned-question-generation-ap'"):
        _ = Q2Scorer(Q2Config()).question_generator


def test_models_load_lazily_and_once(tiny, monkeypatch):
    loads = []

    def counting(role, *args):
        loads.append(role)
        return load_model(role, *args)

    monkeypatch.setattr(transformers_models, "load_model", counting)
    scorer = Q2Scorer(tiny_config(tiny))
    assert loads == []
    scorer.score(responses=["paris is in france ."], knowledge=["Paris is the capital of France."])
    assert sorted(loads) == ["nli", "qa", "qg"]
    qa = scorer.question_answerer
    scorer.score(responses=["it is big ."], knowledge=["The house is big."])
    assert sorted(loads) == ["nli", "qa", "qg"] and scorer.question_answerer is qa


def test_cache_serves_a_rerun_without_models(tiny, sample_rows, tmp_path):
    cfg = tiny_config(tiny, cache_dir=str(tmp_path / "cache"), question_mode="all", remove_personal=False)
    responses = [r["response"] for r in sample_rows]
    knowledge = [r["knowledge"] for r in sample_rows]
    first = Q2Scorer(cfg).score(responses=responses, knowledge=knowledge, explain=True)

    models = Q2Scorer(cfg).signature  # the stand-ins claim the real models' identities, so they share their cache
    stand_ins = {role: NeverCalled(models.get(role), "a model was called although everything is cached")
                 for role in ("qg", "qa", "nli")}
    rerun = Q2Scorer(cfg, question_generator=stand_ins["qg"], question_answerer=stand_ins["qa"], nli=stand_ins["nli"])
    second = rerun.score(responses=responses, knowledge=knowledge, explain=True)
    assert second.to_dict() == first.to_dict()
    assert rerun.cache.misses == 0 and rerun.cache.hits > 0


def test_cache_keeps_work_of_a_killed_run(tiny, tmp_path):
    cfg = tiny_config(tiny, cache_dir=str(tmp_path / "cache"), batch_size=2)
    scorer = Q2Scorer(cfg)

    def kill(*a, **k):
        raise KeyboardInterrupt()  # the run is stopped after QG and QA were computed

    scorer.nli.predict = kill
    with pytest.raises(KeyboardInterrupt):
        scorer.score(responses=["paris is the capital of france ."], knowledge=["Paris is in France."])
    from q2_plugins.metric.cache import Q2Cache

    assert len(Q2Cache(tmp_path / "cache")) > 0  # QG and QA outputs survived


@pytest.mark.parametrize(
    "response, knowledge",
    [
        ("🙂🙂🙂 👍", "Emoji are pictograms."),
        ("Ich wohne in Berlin und mag den Sommer.", "Berlin ist die Hauptstadt Deutschlands."),
        ("东京是日本的首都。", "東京は日本の首都です。"),
        ("paris is the capital of france .", LONG_KNOWLEDGE),
    ],
)
def test_odd_inputs_get_a_score_or_a_clear_error(tiny, response, knowledge):
    res = Q2Scorer(tiny_config(tiny, max_knowledge_chars=0)).score(responses=[response], knowledge=[knowledge])
    r = res.responses[0]
    assert r.status in ("scored", "fallback"), r.error


def test_too_long_response_is_a_row_error_not_a_crash(tiny):
    long_response = "Paris is the capital of France and " * 200
    # (budgets lifted: the QG input limit is what this test checks; the default budgets refuse the row earlier)
    res = Q2Scorer(tiny_config(tiny, max_response_chars=0, max_candidates=0)).score(
        responses=[long_response, "paris is in france ."], knowledge=["Paris is in France."] * 2)
    assert res.responses[0].status == "error"
    assert "qg_max_input_tokens" in res.responses[0].error
    assert res.responses[1].status in ("scored", "fallback")


def test_cli_score(tiny, tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    code = main(["score", "--input", str(SAMPLE), "--output", str(out), "--explain", "--no-progress",
                 "--history-column", "history", "--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]),
                 "--nli-model", str(tiny["nli"]), "--qg-max-length", "12", "--no-use-nli", "--chunk-size", "5",
                 "--format", "json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["row"] for x in lines] == list(range(12))
    assert lines[0]["id"] == "dodeca_consistent-1" and "questions" in lines[0]
    assert summary["n"] == 12 and "cmp:f1|" in summary["signature"]
    scored = [x["score"] for x in lines if x["score"] is not None]
    assert summary["q2"] == pytest.approx(sum(scored) / len(scored))


def test_cli_input_errors(tiny, tmp_path, capsys):
    bad = tmp_path / "in.csv"
    bad.write_text("text,evidence\nhello,world\n")
    assert main(["score", "--input", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no column(s) ['response', 'knowledge']" in err and "--response-column" in err
    jl = tmp_path / "in.jsonl"
    jl.write_text('{"response": "hi", "knowledge": ""}\n[1, 2]\nnot json\n')
    out = tmp_path / "o.jsonl"
    # rows are read and reported, none dropped; a run where no row could be scored exits 1
    code = main(["score", "--input", str(jl), "--output", str(out), "--no-progress", "--no-fallback",
                 "--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]), "--nli-model", str(tiny["nli"])])
    assert code == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["status"] for x in lines] == ["error"] * 3
    assert "knowledge is empty" in lines[0]["error"] and "JSON list" in lines[1]["error"]
    assert "not valid JSON" in lines[2]["error"]


def test_cli_flags_map_one_to_one_onto_the_config():
    import dataclasses

    from q2_plugins.cli import build_parser, config_from_args

    args = build_parser().parse_args(["score", "--input", "x.jsonl", "--qa-decoding", "squad2", "--no-remove-personal",
                                      "--qg-batch-size", "3", "--cache-dir", "/tmp/c"])
    cfg = config_from_args(args)
    assert (cfg.qa_decoding, cfg.remove_personal, cfg.qg_batch_size, cfg.cache_dir) == ("squad2", False, 3, "/tmp/c")
    defaults = config_from_args(build_parser().parse_args(["score", "--input", "x.jsonl"]))
    assert defaults == Q2Config()  # CLI defaults are the config defaults
    flags = set(vars(args))  # every setting of `q2 score`, parsed
    assert {f.name for f in dataclasses.fields(Q2Config)} <= flags


def test_runtime_fast_path_settings_reach_the_wrappers_and_change_no_result(tiny):
    responses, knowledge = ["paris is the capital of france .", "i like jazz ."], ["Paris is in France.", "Jazz."]
    fast = Q2Scorer(tiny_config(tiny))
    plain = Q2Scorer(tiny_config(tiny, qg_search="library", pack_windows=False))
    assert (fast.question_generator.runner.search, fast.question_answerer.runner.pack_windows) == ("own", True)
    assert (plain.question_generator.runner.search, plain.question_answerer.runner.pack_windows,
            plain.nli.runner.pack_windows) == ("library", False, False)
    assert plain.score(responses=responses, knowledge=knowledge, explain=True).to_dict() == \
        fast.score(responses=responses, knowledge=knowledge, explain=True).to_dict()
