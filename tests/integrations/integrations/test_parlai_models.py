"""The models the Q² paper scored, end to end: tiny models of exactly those ParlAI classes, trained offline here.

MemNet is the Wizard of Wikipedia ``EndToEndAgent``, dodecaDialogue an ``image_seq2seq`` model; a plain
``transformer/generator`` is the third. Each is trained for a few steps on a tiny WoW data set under a temporary
datapath, then evaluated with ``--metrics q2`` and reranked by Q², with tiny random-weight Q² models (their scores
mean nothing; the code paths are the real ones). Two cases run the real ``parlai`` command and
``python -m parlai.scripts.eval_model`` in a subprocess: they need the start-up hook installed in this
interpreter (``bash scripts/install_parlai.sh``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("parlai", "parlai")

warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

import parlai_ext  # noqa: E402
from parlai_ext.testing import MODELS, train_tiny_model, write_wow_data  # noqa: E402
from q2_plugins import Q2Config  # noqa: E402
from q2_plugins.backends.hf.tiny import build_all  # noqa: E402
from q2_plugins.metric.results import ResponseResult, ResponseStatus  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402

parlai_ext.enable()

from parlai.core.agents import create_agent  # noqa: E402
from parlai.core.params import ParlaiParser  # noqa: E402
from parlai.scripts.eval_model import EvalModel  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")]

REPO = Path(__file__).resolve().parents[3]
RERANKERS = {"transformer": "parlai_ext.agents:Q2RerankTransformerGeneratorAgent",
             "end2end": "parlai_ext.agents:Q2RerankEndToEndAgent",
             "image_seq2seq": "parlai_ext.agents:Q2RerankImageSeq2seqAgent"}
BEAM = {"inference": "beam", "beam_size": 4, "beam_min_length": 2}  # no empty responses


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("parlai_models")
    datapath = root / "data"
    write_wow_data(datapath)
    q2 = build_all(root / "q2")
    # light Q² decoding keeps the tiny models fast; the options map onto Q2Config like any other
    options = {"q2_qg_model": str(q2["qg"]), "q2_qa_model": str(q2["qa"]), "q2_nli_model": str(q2["nli"]),
               "q2_qg_num_beams": 2, "q2_qg_num_return": 2, "q2_qg_max_length": 12}
    models = {kind: train_tiny_model(kind, root / kind / "model", datapath) for kind in MODELS}
    return {"root": root, "datapath": str(datapath), "q2": options, "models": models}


def evaluate(world, **kwargs):
    report = EvalModel.main(task="wizard_of_wikipedia:Generator", datapath=world["datapath"], log_every_n_secs=1e9,
                            **world["q2"], **kwargs)
    return {k: v.value() if hasattr(v, "value") else v for k, v in report.items()}


def read_replies(world_logs):
    with open(world_logs) as f:
        return [turn[1] for line in f for turn in json.loads(line)["dialog"]]


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_eval_model_metrics_q2(world, kind, tmp_path):
    report = evaluate(world, model_file=world["models"][kind], metrics="default,q2", batchsize=2, **BEAM,
                      report_filename=str(tmp_path / "report.json"))
    assert 0.0 <= report["q2"] <= 1.0
    assert 0.0 <= report["q2_coverage"] <= 1.0 and 0.0 <= report["q2_fallback_rate"] <= 1.0
    assert report["q2_no_knowledge"] == 3 and report["q2_errors"] == 0
    assert "ppl" in report  # beside ParlAI's own metrics
    saved = json.loads((tmp_path / "report.json").read_text())["report"]
    assert saved["q2"] == pytest.approx(report["q2"])


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_rerank_inside_eval_model(world, kind, tmp_path):
    logs = tmp_path / "logs.jsonl"
    report = evaluate(world, model=RERANKERS[kind], model_file=world["models"][kind], metrics="q2", batchsize=2,
                      world_logs=str(logs), **BEAM)
    assert "q2" in report and 0.0 <= report["q2_rerank_changed"] <= 1.0
    replies = read_replies(logs)
    reranked = [r for r in replies if r.get("q2_rerank")]
    assert len(reranked) == 9  # every turn with knowledge
    assert any(len(r["beam_texts"]) > 1 for r in reranked)
    for reply in reranked:
        best = reply["q2_rerank"][0]
        assert reply["text"] == reply["beam_texts"][0][0] == best["text"]
        scored = [c["q2"] for c in reply["q2_rerank"] if c["q2"] is not None]
        if scored:
            assert best["q2"] == max(scored)


def distinct_letters(text):
    """The scripted Q²: the candidate with the most distinct letters wins (never the beam's own order by chance)."""
    return len(set(text.replace(" ", ""))) / 26


def by_distinct_letters(i, response):
    q2 = distinct_letters(response)
    return ResponseResult(i, ResponseStatus.SCORED, score=q2, score_no_nli=q2)


def agent_for(world, kind, **extra):
    parser = ParlaiParser(True, True)
    opt = parser.parse_kwargs(model=RERANKERS[kind], model_file=world["models"][kind], **BEAM, **world["q2"],
                              **extra)
    return create_agent(opt, requireModelExists=True)


def test_scripted_scorer_picks_the_highest_q2_candidate(world):
    scorer = ScriptedScorer(rule=by_distinct_letters, config=Q2Config(**{k[3:]: v for k, v in world["q2"].items()}))
    parlai_ext.register_scorer(scorer)
    try:
        agent = agent_for(world, "transformer")
        for text, knowledge in [("where is the louvre ?", "The Louvre is a museum in Paris."),
                                ("who painted the mona lisa ?", "Leonardo da Vinci painted the Mona Lisa."),
                                ("what is the capital of japan ?", "Tokyo is the capital of Japan.")]:
            agent.observe({"text": text, "checked_sentence": knowledge, "episode_done": True})
            reply = agent.act()
            candidates = [t for t, _ in reply["beam_texts"]]
            candidates_beam_order = [c["text"] for c in sorted(reply["q2_rerank"], key=lambda c: -c["beam_score"])]
            assert len(candidates) > 1
            assert reply["text"] == max(candidates, key=distinct_letters)
            assert [c["q2"] for c in reply["q2_rerank"]] == sorted((distinct_letters(t) for t in candidates),
                                                                   reverse=True)
            if reply["text"] != candidates_beam_order[0]:
                assert reply["metrics"]["q2_rerank_changed"].value() == 1
    finally:
        parlai_ext.unregister_scorer(scorer)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_interactive_single_turns(world, kind):
    agent = agent_for(world, kind, q2_rerank_weight=0.5)
    sentence = "The Eiffel Tower was built in 1889 for the world fair."
    agent.observe({"text": "paris\nwhere is the eiffel tower ?", "episode_done": True,  # a WoW-style message
                   "title": "Paris", "checked_sentence": sentence, "knowledge": f"Paris __knowledge__ {sentence}\n"})
    reply = agent.act()
    assert reply["text"] == reply["beam_texts"][0][0] == reply["q2_rerank"][0]["text"]
    keys = [c["rank_key"] for c in reply["q2_rerank"]]
    assert keys == sorted(keys, reverse=True)
    agent.observe({"text": "tell me more", "episode_done": True})  # no knowledge: the beam order is kept
    reply = agent.act()
    assert reply["q2_rerank"] is None
    assert reply["text"] == reply["beam_texts"][0][0]


def _subprocess(args, world):
    from q2_plugins.integrations import hooks

    legacy = [hooks.site_dir() / name for name in hooks.LEGACY_PTH_NAMES]
    if hooks.installed() is None and not any(path.is_file() for path in legacy):
        pytest.fail("the start-up hook is not installed in this interpreter: q2 hooks install "
                    "(bash scripts/install_parlai.sh does it)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    flags = [arg for k, v in world["q2"].items() for arg in (f"--{k.replace('_', '-')}", str(v))]
    out = subprocess.run(args + ["-t", "wizard_of_wikipedia:Generator", "--datapath", world["datapath"]] + flags,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_parlai_command(world, tmp_path):
    parlai = Path(sys.executable).with_name("parlai")
    report = tmp_path / "report.json"
    out = _subprocess([str(parlai), "eval_model", "-mf", world["models"]["end2end"], "--metrics", "q2",
                       "-rf", str(report)], world)
    assert "q2_coverage" in out.stdout and "q2_fallback_rate" in out.stdout
    saved = json.loads(report.read_text())["report"]
    assert {"q2", "q2_coverage", "q2_fallback_rate"} <= set(saved)
    assert saved["q2_signature"].startswith("q2:") and "q2 signature: q2:" in out.stdout + out.stderr


def test_python_m_eval_model(world, tmp_path):
    report = tmp_path / "report.json"
    _subprocess([sys.executable, "-m", "parlai.scripts.eval_model", "-mf", world["models"]["image_seq2seq"],
                 "--metrics", "default,q2", "-bs", "3", "--q2-no-nli", "-rf", str(report)], world)
    saved = json.loads(report.read_text())["report"]
    assert "q2" in saved and "q2_no_nli" not in saved and "ppl" in saved
    assert "|cmp:f1|" in saved["q2_signature"]  # the run's own settings (--q2-no-nli), also when run as __main__
