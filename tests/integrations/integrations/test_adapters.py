"""Plumbing shared by the adapters: the scorer cache, and the example layout of ``q2 make-test-models --examples``."""

from __future__ import annotations

import pytest

from q2_plugins import Q2Config
from q2_plugins.backends.hf import tiny as testing
from q2_plugins.cli import main
from q2_plugins.integrations import adapters


def test_scorer_lookup_compares_configs_without_building(monkeypatch):
    built = []

    class Counting:
        def __init__(self, config):
            built.append(config)
            self.config = config

    monkeypatch.setattr(adapters, "Q2Scorer", Counting)
    cache = adapters.ScorerCache()
    first = cache.get(Q2Config(qg_model="a"))
    assert cache.get(Q2Config(qg_model="a")) is first and built == [Q2Config(qg_model="a")]
    other = cache.get(Q2Config(qg_model="a", use_nli=False))
    assert other is not first and len(built) == cache.builds == 2


def test_make_test_models_examples_layout(examples_dir, monkeypatch, tmp_path, capsys):
    names = {p.name for p in examples_dir.iterdir()}
    assert names == {"q2-models", "my-dialogue-model", "my-seq2seq-model", "metrics"}
    assert {p.name for p in (examples_dir / "q2-models").iterdir()} == {"qg", "qa", "nli", "coref"}
    assert (examples_dir / "metrics" / "response_length" / "response_length.py").is_file()
    calls = []
    monkeypatch.setattr(testing, "build_examples", lambda root: calls.append(root) or {"qg": tmp_path / "qg"})
    assert main(["make-test-models", "--examples", str(tmp_path)]) == 0
    assert calls == [str(tmp_path)] and "random weights" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["make-test-models", "--examples", "a", "--output-dir", "b"])
