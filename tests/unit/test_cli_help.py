"""`q2 <command> --help`: grouped by meaning, every default shown, each command with only its own flags."""

from __future__ import annotations

import argparse

import pytest

from q2_plugins.cli import build_parser
from q2_plugins.config import Q2Config, config_from_args


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")}


def test_prefetch_lists_only_what_it_reads():
    assert _flags(_sub("prefetch")) == {"--help", "--output-dir", "--qg-model", "--qg-revision", "--qa-model",
                                        "--qa-revision", "--nli-model", "--nli-revision", "--coref-model",
                                        "--coref-revision"}
    args = build_parser().parse_args(["prefetch", "--output-dir", "d", "--qa-model", "m"])
    assert config_from_args(args) == Q2Config(qa_model="m")


def test_score_help_groups_the_settings_by_meaning():
    text = _sub("score").format_help()
    titles = ["input and output:", "models (", "Q2 settings: question generation", "Q2 settings: question answering",
              "Q2 settings: filters", "runtime (", "per-role model settings", "Ray engine"]
    at = [text.index("\n" + t) for t in titles]
    assert at == sorted(at)
    runtime = text[at[5]:at[6]]
    for name in Q2Config.names("runtime"):
        if not name.startswith(("qg_", "qa_", "nli_")) or name == "qg_search":
            assert "--" + name.replace("_", "-") in runtime


@pytest.mark.parametrize("command", ["score", "prefetch", "replay", "report"])
def test_every_default_is_shown(command):
    parser = _sub(command)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.default in (None, argparse.SUPPRESS) or action.required or not action.option_strings:
            continue
        assert "default: " in formatter._expand_help(action), action.option_strings
