"""How q2-plugins gets into ParlAI, which has no plugin entry point and ignores metric names it does not know.

The import hook of q2-plugins (``_q2_plugins_hook``, installed with ``q2 hooks install``) runs a patch right after
each of two ParlAI modules loads:

- ``parlai.core.params`` (:func:`patch_params`): ``ParlaiParser.add_parlai_args`` also adds the ``--q2-*`` argument
  group, so the options appear in every script's ``--help`` and land in ``opt``, and ``parse_args`` gives a Q²
  ``--validation-metric`` its declared direction (``--validation-metric-mode``);
- ``parlai.core.teachers`` (:func:`patch_teachers`): teachers get :class:`parlai_ext.metric.Q2TeacherMetrics`
  (ParlAI's ``TeacherMetrics`` plus a buffer of responses to score) and ``FixedDialogTeacher.observe`` hands each
  response to that buffer.

``Q2_PARLAI_HOOK=0`` (or ``false`` / ``no`` / ``off``) turns it off. ``python -m parlai_ext.hook install|status|
uninstall`` is ``q2 hooks ...``, kept for existing set-ups.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["ENV_SWITCH", "enable", "patch_params", "patch_teachers", "main"]

ENV_SWITCH = "Q2_PARLAI_HOOK"


def patch_params(module: Any) -> None:
    """Patch the module ``parlai.core.params``: every ParlAI script gets the ``--q2-*`` options (and a Q² validation
    metric its direction)."""
    from parlai_ext.options import patch_parser

    patch_parser(module.ParlaiParser)


def patch_teachers(module: Any) -> None:
    """Patch the module ``parlai.core.teachers``: teachers compute ``--metrics q2``."""
    from parlai_ext.metric import patch_teachers as patch

    patch(module)


def enable() -> None:
    """Hook into ParlAI in this interpreter: patch its modules now if imported, else right after they are."""
    from q2_plugins.integrations.hooks import mechanism

    mechanism().enable(("parlai",))


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m parlai_ext.hook ACTION [--target DIR]``: the same as ``q2 hooks ACTION``."""
    from q2_plugins.cli import main as q2_main

    return q2_main(["hooks", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
