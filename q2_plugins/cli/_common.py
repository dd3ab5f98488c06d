"""What every ``q2`` command's parser shares: the two help tiers (``--help``: the common flags; ``--help-all``:
every flag), the closest-flag refusal of an unknown flag, and the help formatter that shows defaults."""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from dataclasses import fields
from typing import Any, Mapping, Optional, Sequence

from q2_plugins.io.columns import TextColumns
from q2_plugins.metric.config import config_options

__all__ = ["Q2Parser", "DefaultsHelp", "common", "add_help_all", "accept_help_all", "add_config_flags",
           "add_column_flags", "count"]


class Q2Parser(argparse.ArgumentParser):
    """A parser whose ``--help`` can be short: when some of its flags are marked common (:func:`common`), ``--help``
    shows only those (the groups of the Q2 settings as one) and ends by naming ``--help-all``, which shows every
    flag. A command's unknown flag is refused in the command's own usage, with the closest flags it has
    (``q2 score --ouput``: did you mean --output?), before any other complaint."""

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace: Any = None) -> Any:
        if self._subparsers is None and args is not None:  # a command's parser (the top level has subcommands)
            for token in args:
                if token == "--":
                    break
                flag = token.split("=", 1)[0]
                if flag.startswith("--") and not any(o.startswith(flag) for o in self._option_string_actions):
                    close = difflib.get_close_matches(flag, sorted(self._option_string_actions), n=3, cutoff=0.6)
                    self.error(f"unrecognized argument {flag}"
                               + (f"; did you mean {' or '.join(close)}?" if close else ""))
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> Any:  # type: ignore[override]
        """A usage error in two lines: the error (with its suggestion), then the command's short usage and where
        its full usage is; exit 2. (argparse would print the whole usage first: dozens of lines for q2 score.)"""
        self.exit(2, f"{self.prog}: error: {message}\n{self.short_usage()}; every flag: {self.prog} --help\n")

    def short_usage(self) -> str:
        """``usage: q2 score --input FILE [options]``: the command with what it requires."""
        required = [_usage_part(a) for a in self._actions if _required(a)]
        if self._subparsers is not None:
            required = ["COMMAND" if p == "command" else p for p in required]
        return " ".join(["usage:", self.prog, *required, "[options]"])

    def format_help(self, everything: bool = False) -> str:
        shown = [a for a in self._actions if getattr(a, "common", False)]
        if everything or not shown or "--help-all" not in self._option_string_actions:  # one tier
            return super().format_help()
        shown += [a for a in self._actions if isinstance(a, argparse._HelpAction)]
        formatter = self._get_formatter()
        formatter.add_usage(" ".join(["%(prog)s", *map(_usage_part, filter(_required, self._actions)), "[options]"]),
                            [], [])
        formatter.add_text(self.description)
        sections: dict[str, list[argparse.Action]] = {}
        for group in self._action_groups:
            title = getattr(group, "brief_title", group.title)
            sections.setdefault(title, []).extend(_brief(a) for a in group._group_actions if a in shown)
        for title, actions in sections.items():
            if actions:
                formatter.start_section(title)
                formatter.add_arguments(actions)
                formatter.end_section()
        hidden = sum(a.help is not argparse.SUPPRESS and a not in shown and not isinstance(a, argparse._HelpAction)
                     for a in self._actions)
        formatter.add_text(f"{hidden} more flags ({getattr(self, 'more', '...')}): {self.prog} --help-all")
        return formatter.format_help()


def _brief(action: argparse.Action) -> argparse.Action:
    """The flag as a short ``--help`` shows it: with its short help text when it has one."""
    if getattr(action, "brief", None) is None:
        return action
    short = copy.copy(action)
    short.help = action.brief  # type: ignore[attr-defined]
    return short


def _required(action: argparse.Action) -> bool:
    return action.required or not action.option_strings


def _usage_part(action: argparse.Action) -> str:
    metavar = action.metavar or (action.dest if not action.option_strings else action.dest.upper())
    return f"{action.option_strings[0]} {metavar}" if action.option_strings else str(metavar)


class _HelpAll(argparse.Action):
    """``--help-all``: every flag of the command, then exit."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show every flag of this command and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs["help"])

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        text = parser.format_help(everything=True) if isinstance(parser, Q2Parser) else parser.format_help()
        parser._print_message(text, sys.stdout)
        parser.exit()


def common(action: argparse.Action, brief: Optional[str] = None) -> argparse.Action:
    """Mark a flag as one of the few a command's short ``--help`` shows (with ``brief`` as its text there, when
    given; ``--help-all`` shows its full text)."""
    action.common, action.brief = True, brief  # type: ignore[attr-defined]
    return action


def add_help_all(parser: argparse.ArgumentParser, more: str) -> None:
    """Give ``parser`` the two help tiers: ``--help`` (its common flags, then a line naming the ``more`` there are)
    and ``--help-all`` (every flag)."""
    common(parser.add_argument("--help-all", action=_HelpAll))
    parser.more = more  # type: ignore[attr-defined]


def accept_help_all(parser: argparse.ArgumentParser) -> None:
    """Let a command of one help tier take ``--help-all`` too (its whole help, as ``--help`` gives it), so the flag
    learnt from ``q2 score`` works on every command; it is not listed there."""
    if "--help-all" not in parser._option_string_actions:
        parser.add_argument("--help-all", action=_HelpAll, help=argparse.SUPPRESS)


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows every flag's default (a flag that is unset by default says so in its text)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 30,
                 width: Optional[int] = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width)

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default in (None, []) or action.required or _switch(action):
            return action.help
        return super()._get_help_string(action)


def _switch(action: argparse.Action) -> bool:
    """A flag that takes no value and sets one (``store_true`` / ``store_false``): its default is its absence."""
    return isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))


_GROUP_TITLES = {
    "models": "models (each named in the signature by its identity)",
    "question generation": "Q2 settings: question generation (each can change a score; in the signature)",
    "question answering": "Q2 settings: question answering",
    "filters and comparison": "Q2 settings: filters and answer comparison",
    "coreference": "Q2 settings: coreference (the paper's appendix A step; off by default)",
    "budgets": "Q2 settings: per-row budgets, each checked before the work it bounds (lengths before any spaCy or "
               "model work; 0 = no limit; docs/failures.md)",
    "runtime": "runtime (how a run goes: never changes a score, not in the signature)",
    "per-role": "per-role model settings (each overrides the setting for all models; the dtype is in the signature)",
}

#: a short --help shows the groups of the score settings as one
_BRIEF_TITLES = {g: "Q2 settings (each can change a score; in the signature)" for g in
                 ("question generation", "question answering", "filters and comparison", "coreference", "budgets")}


#: the metavar of a setting's flag, by the last word of its name (the others: the name in capitals)
_METAVARS = {"model": "MODEL", "revision": "REV", "dir": "DIR", "device": "DEVICE"}


def add_config_flags(parser: argparse.ArgumentParser, names: Optional[Sequence[str]] = None) -> None:
    """One flag per :class:`Q2Config` field (or per field in ``names``), grouped by what the field means; the
    fields marked ``common`` are the ones a short ``--help`` shows."""
    groups: dict[str, Any] = {}
    for opt in config_options():
        if names is not None and opt.name not in names:
            continue
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(_GROUP_TITLES[opt.group])
            groups[opt.group].brief_title = _BRIEF_TITLES.get(opt.group, _GROUP_TITLES[opt.group])
        flag = "--" + opt.name.replace("_", "-")
        metavar = _METAVARS.get(opt.name.rsplit("_", 1)[-1])
        if opt.type is bool:
            action = groups[opt.group].add_argument(flag, dest=opt.name, action=argparse.BooleanOptionalAction,
                                                    default=opt.default, help=opt.help)
        else:
            shown = "" if opt.default is None else " (default: %(default)s)"
            action = groups[opt.group].add_argument(flag, dest=opt.name, type=opt.type, default=opt.default,
                                                    choices=opt.choices, metavar=metavar, help=opt.help + shown)
        action.common = opt.common  # type: ignore[attr-defined]


def add_column_flags(parser: Any, *, brief: bool = False, notes: Mapping[str, str] = {}) -> None:
    """One flag per :class:`~q2_plugins.io.columns.TextColumns` field (``--response-column``, ``--knowledge-column``)
    on ``parser`` (or an argument group), its default and text the field's; ``brief`` marks them common (shown by a
    short ``--help``), ``notes`` adds a command's words to a field's text."""
    for f in fields(TextColumns):
        action = parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, default=f.default,
                                     metavar="COLUMN",
                                     help=f.metadata["help"] + notes.get(f.name, "") + " (default: %(default)s)")
        if brief:
            common(action)


def count(n: int, noun: str) -> str:
    """``1 response``, ``2 responses``: a count and its noun in agreement."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
