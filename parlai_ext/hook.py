"""How q2-plugins gets into ParlAI, which has no plugin entry point and ignores metric names it does not know.

The import hook of q2-plugins (``_q2_plugins_hook``, installed with ``q2 hooks install``) runs a patch right after
each of two ParlAI modules loads:

- ``parlai.core.params`` (:func:`patch_params`): ``ParlaiParser.add_parlai_args`` also adds the ``--q2-*`` argument
  group, so the options appear in every script's ``--help`` and land in ``opt``, and ``parse_args`` gives a Q²
  ``--validation-metric`` its declared direction (``--validation-metric-mode``);
- ``parlai.core.teachers`` (:func:`patch_teachers`): teachers get :class:`parlai_ext.metric.Q2TeacherMetrics`
  (ParlAI's ``TeacherMetrics`` plus a buffer of responses to score) and ``FixedDialogTeacher.observe`` hands each
  response to that buffer.

``Q2_PARLAI_HOOK=0`` (or ``false`` / ``no`` / ``off``) turns it off; ``q2 hooks`` installs, checks and removes it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENV_SWITCH", "enable", "patch_params", "patch_teachers"]

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
