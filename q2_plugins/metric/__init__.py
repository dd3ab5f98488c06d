"""The metric in memory: Q²'s settings, steps, scoring rules, results and signature.

Nothing here reads a file or knows a command-line flag, and nothing here imports a module outside ``metric/``:
the models come in through the protocols of :mod:`.components`, built by ``q2_plugins.backends``. The steps are
:mod:`.stages` (in the README's order), run by :mod:`.runner`; :mod:`.scoring` holds the per-question rules.
"""
