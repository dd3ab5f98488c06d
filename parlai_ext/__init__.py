"""Q² for ParlAI: ``--metrics q2`` in ParlAI's own evaluation loop, and Q² reranking of beam candidates.

ParlAI has no plugin entry point and ignores metric names it does not know, so this package hooks itself in:
``q2 hooks install`` writes the one-line ``.pth`` start-up file of the package's import hook into site-packages
(see :mod:`_q2_plugins_hook` for what it costs and how it stays safe, :mod:`parlai_ext.hook` for what it patches).
In a script or notebook that runs ParlAI in-process, :func:`enable` does the same for the running interpreter only.

Importing this package imports nothing else.
"""

from __future__ import annotations

__all__ = ["enable", "register_scorer", "unregister_scorer"]


def enable() -> None:
    """Hook ``--metrics q2`` and the ``--q2-*`` options into ParlAI in this interpreter (idempotent)."""
    from parlai_ext.hook import enable as _enable

    _enable()


def register_scorer(scorer: object) -> None:
    """Serve ParlAI's Q² metric and reranking with ``scorer`` whenever the options ask for its config.

    The way to plug custom components (a :class:`q2_plugins.Q2Scorer` built with your own QG / QA / NLI) into
    ParlAI runs: build the scorer, register it, run ParlAI in-process with the matching ``--q2-*`` options.
    """
    from parlai_ext.options import register_scorer as _register

    _register(scorer)


def unregister_scorer(scorer: object) -> None:
    """Undo :func:`register_scorer`."""
    from parlai_ext.options import unregister_scorer as _unregister

    _unregister(scorer)
