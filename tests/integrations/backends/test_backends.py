"""Backends by registry (:mod:`q2_plugins.backends`): a model string ``SCHEME:NAME`` picks the backend registered as
``SCHEME`` from every front end, and the signature names the component by that backend's identity. The test
backend ``scripted`` (tests/scripted_backend.py) reaches ``q2 score`` in a fresh process through
``Q2_BACKEND_MODULES`` and through an entry point, as a plug-in package would; the default backend signs as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer, backends
from q2_plugins.backends import BackendError
from q2_plugins.metric.errors import ModelLoadError, SettingError
from q2_plugins.metric.signature import model_id
from tests import scripted_backend

REPO = Path(__file__).resolve().parents[3]
ROWS = [  # every candidate of the first response is in its knowledge, none of the second's
    {"id": "a", "response": "Paris is in France.", "knowledge": "Paris is the capital of France."},
    {"id": "b", "response": "Berlin is in Germany.", "knowledge": "Rome is the capital of Italy."},
]
SCRIPTED = {"qg_model": "scripted:x", "qa_model": "scripted:x", "nli_model": "scripted:x"}


def scripted_config(**changes) -> Q2Config:
    return Q2Config(**{**SCRIPTED, **changes})


def q2(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``q2 ARGS`` in a fresh process (the worktree on the path, no hub)."""
    base = {k: v for k, v in os.environ.items() if k != backends.MODULES_ENV}
    base.update(PYTHONPATH=os.pathsep.join([str(REPO), base.get("PYTHONPATH", "")]), HF_HUB_OFFLINE="1")
    base.update(env)
    return subprocess.run([sys.executable, "-m", "q2_plugins.cli", *args], env=base, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def score_args(tmp_path: Path, **models: str) -> list[str]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    flags = [x for name, value in {**SCRIPTED, **models}.items() for x in ("--" + name.replace("_", "-"), value)]
    return ["score", "--input", str(rows), "--output", str(tmp_path / "out.jsonl"), "--no-progress", "--format",
            "json", *flags]


def out_rows(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]


def python_result():
    """The rows scored in this process with the scripted parts handed to the constructor (no registry)."""
    parts = scripted_backend.parts("x")
    scorer = Q2Scorer(scripted_config(), question_generator=parts["qg"], question_answerer=parts["qa"],
                      nli=parts["nli"])
    return scorer.score(responses=[r["response"] for r in ROWS], knowledge=[r["knowledge"] for r in ROWS])


# -- the registry --------------------------------------------------------------------------------------------------
def test_a_model_string_without_a_scheme_or_with_hf_is_the_default_backend_and_signs_as_before(tmp_path):
    assert backends.resolve("qg", "org/model")[1] == "org/model"
    assert backends.resolve("qg", "hf:org/model") == backends.resolve("qg", "org/model")
    c = Q2Config()
    assert backends.identity("qg", c) == f"{model_id(c.qg_model)}[float32]"
    assert backends.identity("nli", c.replace(nli_dtype="bfloat16")) == f"{model_id(c.nli_model)}[bfloat16]"
    assert backends.identity("qg", c, model="hf:" + c.qg_model) == backends.identity("qg", c)
    assert backends.identity("coref", c) == f"fcoref-head-v1:{model_id(c.coref_model)}[float32]"
    odd = tmp_path / "ab:cd"  # an existing directory is the default backend's, whatever its name holds
    odd.mkdir()
    assert backends.resolve("qa", str(odd)) == (backends.resolve("qa", "x")[0], str(odd))
    assert backends.identity("taxonomy", model=str(odd)) == model_id(str(odd))


def test_an_unregistered_scheme_names_the_setting_and_how_to_register():
    with pytest.raises(BackendError) as caught:
        backends.load("qa", Q2Config(qa_model="nosuch:dir"))
    assert isinstance(caught.value, SettingError) and isinstance(caught.value, ModelLoadError)
    assert caught.value.setting == "qa_model"
    assert "'nosuch:dir' names the backend 'nosuch', which is not registered" in str(caught.value)
    assert backends.ENTRY_POINT_GROUP in str(caught.value) and backends.MODULES_ENV in str(caught.value)
    with pytest.raises(ValueError, match="scheme"):
        backends.register("X", scripted_backend.BACKEND)
    with pytest.raises(TypeError, match="load"):
        backends.register("thing", object())  # type: ignore[arg-type]


def test_python_front_end_scores_through_the_backend_as_with_the_parts_given():
    result = Q2Scorer(scripted_config()).score(responses=[r["response"] for r in ROWS],
                                               knowledge=[r["knowledge"] for r in ROWS])
    assert [r.score for r in result.responses] == [1.0, 0.0]
    assert result.signature.get("qg") == result.signature.get("qa") == result.signature.get("nli") == "scripted:x"
    given = python_result()
    assert result.signature == given.signature
    assert [r.to_dict() for r in result.responses] == [r.to_dict() for r in given.responses]
    other = Q2Scorer(scripted_config(qa_model="scripted:y")).signature
    assert other.get("qa") == "scripted:y" and other != result.signature  # signed with the backend's identity


# -- the command line, in a fresh process ---------------------------------------------------------------------------
def test_cli_reaches_a_backend_module_named_in_the_environment(tmp_path):
    proc = q2(score_args(tmp_path), tmp_path, **{backends.MODULES_ENV: "tests.scripted_backend"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    given = python_result()
    assert [r["score"] for r in out_rows(tmp_path)] == [r.score for r in given.responses] == [1.0, 0.0]
    assert json.loads(proc.stdout)["signature"] == given.signature
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())
    assert meta["signature"] == given.signature and meta["config"]["qg_model"] == "scripted:x"


def test_cli_reaches_a_backend_of_an_installed_package_entry_point(tmp_path):
    site = tmp_path / "site"
    dist = site / "q2_scripted_backend-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: q2-scripted-backend\nVersion: 1.0\n")
    entry = f"[{backends.ENTRY_POINT_GROUP}]\nscripted = tests.scripted_backend:BACKEND\n"
    (dist / "entry_points.txt").write_text(entry)
    proc = q2(score_args(tmp_path), tmp_path, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [r["score"] for r in out_rows(tmp_path)] == [1.0, 0.0]
    assert json.loads(proc.stdout)["signature"] == python_result().signature


def test_cli_names_the_flag_of_an_unknown_backend_and_scores_nothing(tmp_path):
    proc = q2(score_args(tmp_path, nli_model="nosuch:m"), tmp_path,
              **{backends.MODULES_ENV: "tests.scripted_backend"})
    assert proc.returncode == 2
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("q2 score: error")]
    assert line.startswith("q2 score: error: --nli-model: 'nosuch:m' names the backend 'nosuch', which is not "
                           "registered (known: ct2, hf, onnx, scripted)")
    assert not (tmp_path / "out.jsonl").exists()


def test_cli_stops_before_scoring_when_a_backend_cannot_load(tmp_path):
    proc = q2(score_args(tmp_path, qa_model="scripted:missing"), tmp_path,
              **{backends.MODULES_ENV: "tests.scripted_backend"})
    assert proc.returncode == 2
    # the plug-in's error names the setting; the command line writes it as its flag
    assert "q2 score: error: Cannot load the QA model 'scripted:missing' (setting --qa-model)" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_prefetch_goes_through_the_backend_a_model_string_names(tmp_path):
    """``q2 prefetch`` asks the backend, not the hub: a backend without a ``prefetch`` hook is named with its flag
    before anything is copied, and a hook gets the name without its scheme."""
    proc = q2(["prefetch", "--output-dir", str(tmp_path / "m"), "--qg-model", "scripted:x"], tmp_path,
              **{backends.MODULES_ENV: "tests.scripted_backend"})
    assert proc.returncode == 2
    assert "q2 prefetch: error: --qg-model: 'scripted:x': its backend cannot copy its model" in proc.stderr
    assert not (tmp_path / "m" / "qg").exists()

    class Copying(scripted_backend.ScriptedBackend):
        def prefetch(self, role, name, config, target):
            return f"{role}:{name}->{target}"

    backends.register("copying", Copying())
    try:
        assert backends.prefetch("qa", tmp_path, Q2Config(qa_model="copying:y")) == f"qa:y->{tmp_path}"
    finally:
        backends.unregister("copying")


def test_the_hf_components_settings_are_signed_only_for_the_hf_backend():
    """``qa-dec`` and ``nli-dec`` (the hf QA / NLI windows) name settings only the hf components read: a scripted
    QA or NLI model signs and caches without them; the default (hf) configuration keeps them, byte for byte."""
    from q2_plugins.metric.signature import scorer_signature, stage_key

    ids = {"candidates": "c", "qg": "g", "qa": "a", "nli": "n", "personal": "p"}
    hf = scorer_signature(Q2Config(), ids, "v")
    assert "|qa-dec:original-win512-stride128|" in str(hf) and "|nli-dec:win512-stride128|" in str(hf)
    assert stage_key(Q2Config(), "qa", "a") == "qa|a|original-win512-stride128"
    scripted = scripted_config()
    parts = dict(scorer_signature(scripted, ids, "v").parts)
    assert "qa-dec" not in parts and "nli-dec" not in parts and "qg-dec" in parts
    assert stage_key(scripted, "qa", "a", "v1") == "qa|a|v1" and stage_key(scripted, "nli", "n", "v1") == "nli|n|v1"
