"""What every ``q2`` command's parser shares: the two help tiers (``--help``: the common flags; ``--help-all``:
every flag), the closest-flag refusal of an unknown flag, and the help formatter that shows defaults."""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from typing import Any, Optional, Sequence

__all__ = ["Q2Parser", "DefaultsHelp", "common", "add_help_all"]


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

    def format_help(self, everything: bool = False) -> str:
        shown = [a for a in self._actions if getattr(a, "common", False)]
        if everything or not shown:
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
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show every flag of this command and exit")

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
