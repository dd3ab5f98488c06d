"""The default path on the published checkpoints' layouts, offline; prefetch records; pickle checkpoints.

The fixture (``tests/hub_fixtures.py``) is a Hugging Face cache holding each default and alternative repository with
its published files and configs and tiny random weights; the CLI runs as a user runs it, in a fresh process with
``HF_HUB_CACHE`` pointing at it and ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from q2_plugins.backends.hf.transformers_models import load_model
from q2_plugins.metric.errors import ModelLoadError
from q2_plugins.metric.signature import model_id
from tests.hub_fixtures import ALTERNATIVE_REPOS, COREF_REPO, DEFAULT_REPOS, build_hub_cache

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    cache = tmp_path_factory.mktemp("hf-hub-cache")
    return cache, build_hub_cache(cache)


def _snapshot(cache: Path, repo: str, commit: str) -> Path:
    return cache / f"models--{repo.replace('/', '--')}" / "snapshots" / commit


_RUNNER = """
import contextlib, io, json, sys
from q2_plugins.cli import main
runs = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    runs.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]})
print(json.dumps(runs))
"""


def _run_cli(cache: Path, home: Path, *argvs: list[str]) -> list[dict]:
    """Run ``q2`` commands in one fresh process, offline, with ``cache`` as the Hugging Face hub cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(home), HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO),
               TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(list(argvs))], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def hub_runs(hub_cache, tmp_path_factory) -> dict:
    """In one fresh offline process: ``q2 score`` on the defaults (no --*-model flag), ``q2 prefetch``, and
    ``q2 score`` on the README's alternative models."""
    cache, _ = hub_cache
    work = tmp_path_factory.mktemp("hub-runs")
    rows = work / "rows.jsonl"
    rows.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:4]))
    common = ["--input", str(rows), "--format", "json", "--no-progress", "--qg-max-length", "8"]
    qg, qa = ALTERNATIVE_REPOS
    default, prefetch, alternatives, coref = _run_cli(
        cache, work / "home",
        ["score", *common, "--output", str(work / "hub.jsonl")],
        ["prefetch", "--output-dir", str(work / "q2-models")],
        ["score", *common, "--qg-model", qg, "--qg-input-template", "generate question: {highlighted}",
         "--qa-model", qa],
        ["score", *common, "--coref", "--history-column", "history", "--output", str(work / "coref.jsonl"),
         "--explain"],
    )
    return {"work": work, "common": common, "default": default, "prefetch": prefetch, "alternatives": alternatives,
            "coref": coref}


def test_default_path_offline_then_prefetch_and_copy(hub_cache, hub_runs, tmp_path):
    _, commits = hub_cache
    work, common, default, prefetch = (hub_runs[k] for k in ("work", "common", "default", "prefetch"))
    assert default["code"] == 0 and prefetch["code"] == 0, (default, prefetch)
    summary = json.loads(default["stdout"])
    expected = {role: f"hub:{repo}@{commits[repo]}[float32]" for role, repo in zip(("qg", "qa", "nli"), DEFAULT_REPOS)}
    for role, ident in expected.items():
        assert f"|{role}:{ident}|" in summary["signature"] + "|"
    assert summary["n"] == 4 and summary["n_errors"] == 0
    qg_repo = DEFAULT_REPOS[0]
    assert f"qg:{qg_repo.split('/')[1]}@{commits[qg_repo][:7]}[float32]|" in summary["signature_short"]
    assert "|cfg:custom|#" in summary["signature_short"]  # --qg-max-length 8 is not the paper's setting
    scored = [json.loads(line) for line in (work / "hub.jsonl").read_text().splitlines()]
    assert len(scored) == 4 and all(r["status"] in ("scored", "fallback") for r in scored)

    # the README's offline route: prefetch, copy, score on the copy with an empty cache: the same signature
    prefetched, copied = work / "q2-models", tmp_path / "other-machine" / "q2-models"
    assert sorted(p.name for p in (prefetched / "nli").iterdir()) == [
        "config.json", "merges.txt", "model.safetensors", "q2_source.json", "tokenizer.json",
        "tokenizer_config.json", "vocab.json"]  # safetensors taken, the pickle left behind
    shutil.copytree(prefetched, copied)
    (again,) = _run_cli(tmp_path / "empty-cache", tmp_path / "home2",
                        ["score", *common, "--qg-model", str(copied / "qg"), "--qa-model", str(copied / "qa"),
                         "--nli-model", str(copied / "nli")])
    assert again["code"] == 0, again
    assert json.loads(again["stdout"])["signature"] == summary["signature"]
    assert json.loads(again["stdout"])["signature_short"] == summary["signature_short"]
    assert json.loads(again["stdout"])["q2"] == summary["q2"]


def test_coref_default_model_offline_and_prefetched(hub_cache, hub_runs):
    """--coref on the default F-coref repository (a pickle checkpoint, the published layout) signs as the hub
    commit; prefetch copied it and it signs the same from the copy."""
    _, commits = hub_cache
    run = hub_runs["coref"]
    assert run["code"] == 0, run
    summary = json.loads(run["stdout"])
    ident = f"hub:{COREF_REPO}@{commits[COREF_REPO]}"
    assert f"|coref:fcoref-head-v1:{ident}[float32]|" in summary["signature"] + "|"
    rows = [json.loads(x) for x in (hub_runs["work"] / "coref.jsonl").read_text().splitlines()]
    assert all("coref" in r for r in rows if r["status"] != "error")
    copied = hub_runs["work"] / "q2-models" / "coref"
    assert model_id(str(copied)) == ident and (copied / "pytorch_model.bin").is_file()


def test_alternative_models_from_the_readme_run_offline(hub_cache, hub_runs):
    _, commits = hub_cache
    run = hub_runs["alternatives"]
    assert run["code"] == 0, run
    qg, qa = ALTERNATIVE_REPOS
    summary = json.loads(run["stdout"])
    assert f"qg:hub:{qg}@{commits[qg]}[float32]" in summary["signature"]
    assert f"qa:hub:{qa}@{commits[qa]}[float32]" in summary["signature"]
    assert summary["n"] == 4 and summary["n_errors"] == 0


def test_every_fixture_loads_and_a_changed_copy_loses_the_hub_identity(hub_cache, tmp_path):
    cache, commits = hub_cache
    kinds = {"t5": ("qg", "seq2seq"), "albert": ("qa", "qa"), "roberta": ("nli", "classification")}
    for repo, commit in commits.items():
        snapshot = _snapshot(cache, repo, commit)
        assert model_id(str(snapshot)) == f"hub:{repo}@{commit}"
        if repo == COREF_REPO:
            from q2_plugins.backends.hf.coref import load_fcoref

            load_fcoref(str(snapshot))
            continue
        model_type = json.loads((snapshot / "config.json").read_text())["model_type"]
        role, kind = kinds[model_type]
        tokenizer, model = load_model(role, str(snapshot), None, "cpu", "float32", kind, cpu_kernels="torch")
        assert tokenizer.is_fast and model.config.vocab_size >= len(tokenizer) - 1
    from q2_plugins.backends.hf.prefetch import prefetch_model

    target = prefetch_model("qa", str(_snapshot(cache, DEFAULT_REPOS[1], commits[DEFAULT_REPOS[1]])), None,
                            tmp_path / "qa")
    assert model_id(str(target)) == f"hub:{DEFAULT_REPOS[1]}@{commits[DEFAULT_REPOS[1]]}"
    (target / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    assert model_id(str(target)).startswith("local:sha256:")


# -- pickle checkpoints -----------------------------------------------------------------------------------------------
class _Payload:
    """A pickle that runs code when unpickled without weights_only."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _pickle_checkpoint(src: Path, dst: Path, extra=None) -> Path:
    from safetensors.torch import load_file

    shutil.copytree(src, dst)
    state = load_file(dst / "model.safetensors")
    (dst / "model.safetensors").unlink()
    torch.save({**state, **(extra or {})}, dst / "pytorch_model.bin")
    return dst


def test_pickle_checkpoints_load_as_tensors_only(tiny_models, tmp_path):
    plain = _pickle_checkpoint(tiny_models["qa"], tmp_path / "plain")
    _, model = load_model("qa", str(plain), None, "cpu", "float32", "qa", cpu_kernels="torch")
    assert model.config.model_type == "albert"

    marker = tmp_path / "code-ran"
    hostile = _pickle_checkpoint(tiny_models["qa"], tmp_path / "hostile", {"x": _Payload(marker)})
    with pytest.raises(ModelLoadError, match=r"Refused to load the QA model .*weights_only=True.*safetensors"):
        load_model("qa", str(hostile), None, "cpu", "float32", "qa", cpu_kernels="torch")
    assert not marker.exists()

    # both formats present: the safetensors file is read, the pickle never opened
    both = tmp_path / "both"
    shutil.copytree(hostile, both)
    shutil.copy(tiny_models["qa"] / "model.safetensors", both / "model.safetensors")
    _, model = load_model("qa", str(both), None, "cpu", "float32", "qa", cpu_kernels="torch")
    assert not marker.exists() and model.config.model_type == "albert"


def test_the_readmes_first_example_runs_on_the_hubs_files(hub_cache, tmp_path):
    """The README's first screen (``<!-- test: first-screen -->``): ``Q2Scorer()`` with the default models, run as
    printed in a fresh process whose Hugging Face cache holds the published repositories' files (tiny weights)."""
    from tests.conftest import _doc_blocks

    (lang, code), = _doc_blocks(REPO / "README.md", "first-screen")
    assert lang == "python" and "Q2Scorer()" in code
    cache, _ = hub_cache
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "Q2_"))}
    env.update(HF_HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO),
               TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    score, short = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    assert score == "None" or 0.0 <= float(score) <= 1.0
    assert short.startswith("q2:") and "qg:" in short and "qa:" in short and "nli:" in short
