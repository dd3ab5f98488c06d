"""`q2 <command> --help`: grouped by meaning, every default shown, each command with only its own flags; `q2 score`
and `q2 meta-eval` in two tiers (``--help`` a screen of the common flags, ``--help-all`` every flag)."""

from __future__ import annotations

import argparse

import pytest

from q2_plugins.cli import build_parser, main
from q2_plugins.metric.config import Q2Config, config_from_args, config_options


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_prefetch_lists_only_what_it_reads():
    assert _flags(_sub("prefetch")) == {"--help", "--help-all", "--output-dir", "--qg-model", "--qg-revision",
                                        "--qa-model", "--qa-revision", "--nli-model", "--nli-revision",
                                        "--coref-model", "--coref-revision"}
    args = build_parser().parse_args(["prefetch", "--output-dir", "d", "--qa-model", "m"])
    assert config_from_args(args) == Q2Config(qa_model="m")


def test_score_help_groups_the_settings_by_meaning():
    text = _sub("score").format_help(everything=True)
    titles = ["input and output:", "models (", "Q2 settings: question generation", "Q2 settings: question answering",
              "Q2 settings: filters", "runtime (", "per-role model settings", "Ray engine"]
    at = [text.index("\n" + t) for t in titles]
    assert at == sorted(at)
    runtime = text[at[5]:at[6]]
    for name in Q2Config.names("runtime"):
        if not name.startswith(("qg_", "qa_", "nli_")) or name == "qg_search":
            assert "--" + name.replace("_", "-") in runtime


@pytest.mark.parametrize("command", ["score", "prefetch", "replay", "report", "meta-eval"])
def test_every_default_is_shown(command):
    parser = _sub(command)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.default in (None, argparse.SUPPRESS, []) or action.required or not action.option_strings:
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            continue  # a switch: off unless given
        assert "default: " in formatter._expand_help(action), action.option_strings


def _help(command: str, flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")  # the width of a usual terminal: help wraps to it
    with pytest.raises(SystemExit) as stop:
        main([command, flag])
    assert stop.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize("command", ["score", "meta-eval"])
def test_help_is_a_screen_that_names_help_all(command, capsys, monkeypatch):
    text = _help(command, "--help", capsys, monkeypatch)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 60, f"q2 {command} --help is {len(lines)} lines"
    assert f"q2 {command} --help-all" in " ".join(lines[-2:])  # its last line (wrapped or not) names the full list
    shown = {w.strip("[],|:") for w in text.split() if w.startswith("--")}
    for opt in config_options():  # the common settings, declared once in config.py, and only those
        flag = "--" + opt.name.replace("_", "-")
        assert (flag in shown) == opt.common, flag
    assert {"--no-use-nli", "--question-mode", "--coref", "--dtype", "--device", "--qg-model"} <= shown


@pytest.mark.parametrize("command", ["score", "meta-eval"])
def test_help_all_lists_every_flag_the_parser_accepts(command, capsys, monkeypatch):
    text = _help(command, "--help-all", capsys, monkeypatch)
    shown = {w.strip("[],|") for w in text.split()}
    # every flag but one hidden on purpose (help=SUPPRESS)
    accepted = {s for a in _sub(command)._actions if a.help is not argparse.SUPPRESS for s in a.option_strings}
    assert accepted - shown == set()
    assert len(text.splitlines()) > 60 and "--help-all" in text
    brief = _help(command, "--help", capsys, monkeypatch)
    hidden = int(brief.rsplit(" more flags", 1)[0].split()[-1])  # "N more flags (...): q2 CMD --help-all"
    assert hidden == sum(1 for a in _sub(command)._actions
                         if not getattr(a, "common", False) and not isinstance(a, argparse._HelpAction)
                         and a.help is not argparse.SUPPRESS)


def test_a_command_without_common_flags_has_one_help():
    parser = _sub("report")
    assert parser.format_help() == parser.format_help(everything=True)
    assert "--help-all" not in parser.format_help()


def _commands() -> list[str]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(action.choices)


@pytest.mark.parametrize("command", _commands())
def test_a_help_that_names_help_all_is_one_the_command_accepts(command, capsys, monkeypatch):
    text = _help(command, "--help", capsys, monkeypatch)
    if "--help-all" in text:
        assert len(_help(command, "--help-all", capsys, monkeypatch)) > len(text)


@pytest.mark.parametrize("command", _commands())
def test_every_command_takes_help_all_and_lists_every_flag(command, capsys, monkeypatch):
    text = _help(command, "--help-all", capsys, monkeypatch)
    accepted = {s for a in _sub(command)._actions if a.help is not argparse.SUPPRESS for s in a.option_strings}
    assert accepted - {w.strip("[],|") for w in text.split()} == set()


def test_every_column_flag_comes_from_text_columns(monkeypatch):
    """The commands' ``--response-column`` / ``--knowledge-column`` are generated from ``TextColumns``: a new default
    there reaches every command's flag (none spells it by hand)."""
    import dataclasses

    from q2_plugins.io.columns import TextColumns

    for f in dataclasses.fields(TextColumns):
        monkeypatch.setattr(f, "default", "moved_" + f.name)
    found = {}
    for command in _commands():
        for action in _sub(command)._actions:
            if action.dest in ("response_column", "knowledge_column"):
                found[command, action.dest] = action.default
    assert {c for c, _ in found} == {"score", "report", "check-precision", "perturb", "meta-eval", "train"}
    assert all(default == "moved_" + dest for (_, dest), default in found.items()), found
