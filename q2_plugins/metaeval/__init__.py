"""Meta-evaluation: how well a factual-consistency metric agrees with human labels, beside the usual baselines.

The paper's experiments (Honovich et al. 2021, Sections 4 and 5) as a library and as ``q2 meta-eval``:

* :mod:`q2_plugins.datasets` reads annotated data (the paper's WoW sets, BEGIN, DialFact-, Dialogue-NLI-style files,
  FaithDial's audits, LLM-AggreFact, RAGTruth, HalluDial and any table with response / knowledge / label columns)
  into :class:`q2_plugins.datasets.types.MetaEvalData`; a row that cannot be an example is listed with its line and
  reason.
* :mod:`.runner` is the library entry point: :class:`.runner.MetaEvalSettings` (typed) to a run.
* :mod:`.scores` brings metric scores in: a ``q2 score`` output file, a replay of recorded per-question outputs, or
  scoring on the fly with a :class:`~q2_plugins.Q2Scorer`.
* :mod:`.baselines` scores the same examples with token-F1 overlap, BLEU, BERTScore and end-to-end NLI.
* :mod:`.experiments` runs the response-level, per-subset, system-level, robustness and control experiments, and
  the BEGIN-taxonomy and stress-pair experiments; :mod:`.benchmark` balanced accuracy per data set and published
  figures beside ours; :mod:`.caveats` says where figures are not like for like;
  :mod:`.stats` holds the statistics (scikit-learn / SciPy where they have them).
* :mod:`.report` and :mod:`.plots` write the markdown tables, the JSON file and the figures.

Nothing heavy is imported here: scikit-learn, SciPy, sacrebleu and matplotlib (the ``metaeval`` extra) load when an
experiment first needs them.
"""

from __future__ import annotations

__all__ = ["scores", "baselines", "stats", "experiments", "plots", "report", "runner", "benchmark",
           "caveats"]
