"""The coreference step's text rules and the F-coref backend, which live in :mod:`q2_plugins.backends.hf.coref`;
their names stay importable from here."""

from .backends.hf.coref import COREF_IMPL, PRONOUNS, FCoref, join_dialogue, load_fcoref, rewrite

__all__ = ["FCoref", "load_fcoref", "rewrite", "join_dialogue", "COREF_IMPL", "PRONOUNS"]
