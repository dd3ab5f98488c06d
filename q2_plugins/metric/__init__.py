"""The metric in memory: Q²'s settings, steps, scoring rules, results and signature.

Nothing here knows a command-line flag or imports a module outside ``metric/``: the models come in through the
protocols of :mod:`.components`, built by ``q2_plugins.backends``. Three modules touch the machine, each for the
run's sake and never for a row's data: :mod:`.signature` reads a local model's files to name it by content (keeping a
file-hash index in the user's cache folder, ``Q2_HASH_INDEX``) and reads and writes ``q2 prefetch``'s source record;
:mod:`.cache` keeps ``--cache-dir``'s SQLite file; :mod:`.spacy_worker` starts a spaCy process beside a GPU run.
The steps are :mod:`.stages` (in the README's order), run by :mod:`.runner`; :mod:`.scoring` holds the
per-question rules.
"""
