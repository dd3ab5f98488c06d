"""The examples a data set loads into (:mod:`q2_plugins.datasets.types`, their home); importable from here too."""

from ..datasets.types import Example, MetaEvalData, PairedContext, PerturbedPair, SkippedRow

__all__ = ["Example", "PairedContext", "PerturbedPair", "SkippedRow", "MetaEvalData"]
