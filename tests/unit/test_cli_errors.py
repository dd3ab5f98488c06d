"""What reaches a person at the command line when a run cannot work: one line naming the fix and exit 2 (a bug: one
line and exit 1), before any model loads; ``Q2_DEBUG=1`` shows the traceback instead. From Python the same error
keeps its type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins import cli
from q2_plugins.cli import main
from q2_plugins.errors import SettingError


def a_missing_device() -> str:
    """A torch device this machine does not have: cuda without a GPU, else one past its last GPU."""
    import torch

    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


@pytest.fixture
def rows(tmp_path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"response": "it aired on pbs .", "knowledge": "It aired on PBS."}) + "\n")
    return path


@pytest.fixture
def no_model_loads(monkeypatch):
    """A model load fails the test: the errors below must come first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(Q2Scorer, "load", refuse)
    monkeypatch.setattr(Q2Scorer, "parts", refuse)


@pytest.mark.parametrize("flag", ["--device", "--qa-device"])
def test_a_device_that_is_not_here_is_one_line_naming_the_fix_before_any_model_loads(rows, capsys, flag,
                                                                                     no_model_loads):
    device = a_missing_device()
    assert main(["score", "--input", str(rows), flag, device]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"q2 score: error: {flag}: {device} is not available: "), err
    assert err.rstrip().endswith("set it to cpu")


def test_from_python_a_missing_device_keeps_its_type_and_names_the_setting_first():
    scorer = Q2Scorer(Q2Config(device=a_missing_device(), qg_model="./none", qa_model="./none", nli_model="./none"))
    with pytest.raises(SettingError) as e:
        scorer.load()  # before the (missing) model folders are even looked at
    assert isinstance(e.value, ValueError) and str(e.value).startswith("device: ")


def test_a_device_that_is_no_device_at_all_says_what_devices_are(rows, capsys, no_model_loads):
    assert main(["score", "--input", str(rows), "--device", "gpu0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("q2 score: error: --device: 'gpu0' is not a torch device") and err.count("\n") == 1


def test_a_missing_extra_is_one_line_naming_the_extra(monkeypatch, capsys):
    def needs_sacrebleu(args):
        raise ModuleNotFoundError("No module named 'sacrebleu'", name="sacrebleu")

    monkeypatch.setattr(cli, "_compare", needs_sacrebleu)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == ("q2 compare: error: No module named 'sacrebleu'; install it: pip install 'q2-plugins[metaeval]'"
                   "\n")


def test_our_own_missing_extra_message_is_kept_as_it_is(monkeypatch, capsys):
    from q2_plugins.metaeval.deps import require

    def needs(args):
        require("no_such_module_q2_test")

    monkeypatch.setattr(cli, "_compare", needs)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 2
    assert capsys.readouterr().err == ("q2 compare: error: The meta-evaluation needs no_such_module_q2_test (import "
                                       "'no_such_module_q2_test'), which is in the 'metaeval' extra: pip install "
                                       "'q2-plugins[metaeval]'\n")


def test_a_bug_is_one_line_with_exit_1_and_q2_debug_shows_its_traceback(monkeypatch, capsys):
    def bug(args):
        raise KeyError("oops")

    monkeypatch.setattr(cli, "_compare", bug)
    monkeypatch.delenv("Q2_DEBUG", raising=False)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 1
    assert capsys.readouterr().err == ("q2 compare: error: KeyError: 'oops' (an internal error; Q2_DEBUG=1 shows "
                                       "the traceback)\n")
    monkeypatch.setenv("Q2_DEBUG", "1")
    with pytest.raises(KeyError, match="oops"):
        main(["compare", "a.jsonl", "b.jsonl"])
    with pytest.raises(SettingError):  # a user's error too: its traceback, as asked
        main(["score", "--input", "x.jsonl", "--device", "gpu0"])
