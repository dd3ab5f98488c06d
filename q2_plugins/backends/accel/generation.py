"""Token ids of generated questions: our beam search for T5-style models (:mod:`q2_plugins.backends.accel.beam`), the
library's ``generate`` for anything else (or on request), with a cache that never reorders cross-attention."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from q2_plugins.backends.accel.batching import Batching, bucket_length, input_limit, length_batches, merge_consecutive
from q2_plugins.backends.accel.beam import BeamSettings, T5BeamSearch, beam_settings
from q2_plugins.backends.accel.counters import RunStats
from q2_plugins.backends.accel.device import matmul_precision

__all__ = ["SEARCHES", "QuestionDecoder"]

SEARCHES = ("own", "library")


class QuestionDecoder:
    """Runs ``generate``-style decoding over encoded inputs, in batches.

    ``search="own"``: beam search by :class:`T5BeamSearch` where it reproduces the call (same beams, less work per
    step; tested equal to ``generate`` on the CPU, and on other settings compared with it by the decisions of
    :mod:`q2_plugins.metric.precision`, never swapped silently). ``"library"``: always ``generate``.
    ``generate_overrides``: extra ``generate`` arguments on every call (benchmarks fix the question length with
    ``min/max_new_tokens``).
    """

    def __init__(self, tokenizer: Any, model: Any, *, search: str = "own",
                 generate_overrides: Optional[Mapping[str, Any]] = None) -> None:
        if search not in SEARCHES:
            raise ValueError(f"search must be one of {', '.join(map(repr, SEARCHES))}, got {search!r}")
        self.tokenizer = tokenizer
        self.model = model
        self.search = search
        self.generate_overrides = dict(generate_overrides or {})
        self.device = next(model.parameters()).device
        self.tf32 = bool(getattr(model, "q2_tf32", False))
        self.bucket = self.device.type != "cpu"  # encoder batches padded at their length bucket (few GPU shapes)
        self._limit = input_limit(tokenizer)
        self.stats = RunStats()
        self.beam_search: Optional[T5BeamSearch] = None  # built on the first call it serves

    def generate(self, encoded: Sequence[Sequence[int]], gen_kwargs: Mapping[str, Any],
                 batching: Batching) -> list[Any]:
        """Per input, in input order: its ``num_return_sequences`` token-id rows (padded with the pad id)."""
        import torch

        gen_kwargs = {**gen_kwargs, **self.generate_overrides}
        num_return = gen_kwargs.get("num_return_sequences") or 1
        settings = self._settings(gen_kwargs)
        lengths = [len(x) for x in encoded]
        if self.bucket:
            lengths = [bucket_length(n, self._limit) for n in lengths]
        groups = length_batches(lengths, batching.size, batching.sort, batching.max_tokens)
        # the decoder's cost per input does not depend on its length: our beam search decodes consecutive encoder
        # batches together, up to batch_size inputs; generate takes one encoder batch at a time
        calls = merge_consecutive(groups, batching.size) if settings else [[g] for g in groups]
        out: list[Any] = [None] * len(encoded)
        for call in calls:
            padded = [self.stats.padded(self.tokenizer, [{"input_ids": encoded[i]} for i in g], self.device,
                                        max(lengths[i] for i in g) if self.bucket else None)
                      for g in call]
            with torch.inference_mode(), matmul_precision(self.tf32):
                if settings is not None:
                    pairs = [(p["input_ids"], p["attention_mask"]) for p in padded]
                    generated = [self.stats.timed(self.beam_search.generate, encoder_batches=pairs,
                                                  settings=settings, timer=self.stats.timer)]
                else:
                    generated = [self.stats.timed(self._library, inputs=p, gen_kwargs=gen_kwargs) for p in padded]
            rows = [row for g in generated for row in g]
            for j, i in enumerate(i for g in call for i in g):
                out[i] = rows[j * num_return : (j + 1) * num_return]
        return out

    def _settings(self, gen_kwargs: dict[str, Any]) -> Optional[BeamSettings]:
        """The settings of our beam search for this call, or None (the library's ``generate``)."""
        if self.search != "own" or (gen_kwargs.get("num_beams") or 1) < 2:
            return None
        settings = beam_settings(self.model, gen_kwargs)
        if settings is not None and self.beam_search is None:
            self.beam_search = T5BeamSearch.for_model(self.model)
        return settings if self.beam_search is not None else None

    def _library(self, inputs: dict[str, Any], gen_kwargs: dict[str, Any]) -> Any:
        cache = beam_search_cache(self.model) if (gen_kwargs.get("num_beams") or 1) > 1 else None
        if cache is not None:
            inputs = dict(inputs, **{generate_cache_argument(): cache})
        return self.model.generate(**inputs, **gen_kwargs)


def generate_cache_argument() -> str:
    """The name under which this transformers version's ``generate`` takes a cache object: ``cache`` from 5.24 on
    (where ``past_key_values`` is deprecated), ``past_key_values`` before."""
    try:
        from transformers.generation.utils import ALL_CACHE_NAMES
    except ImportError:  # pragma: no cover - transformers without the list
        return "past_key_values"
    return "cache" if "cache" in ALL_CACHE_NAMES else "past_key_values"


_BEAM_CACHE_CLASS: Any = None


def beam_search_cache(model: Any) -> Optional[Any]:
    """An encoder-decoder cache for beam search that never reorders its cross-attention part, or None.

    Every beam of an input attends to the same encoder output, so its cross-attention keys and values are the same
    for all beams of that input, and beam search only ever picks beams within an input: reordering them (what the
    default cache does after every decoder step, a copy of every layer's keys and values) moves nothing. The
    self-attention cache is reordered as usual. None (the library's default cache is used) when this transformers
    version has no such cache classes.
    """
    global _BEAM_CACHE_CLASS
    if not getattr(model.config, "is_encoder_decoder", False):
        return None
    try:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    except ImportError:  # pragma: no cover - transformers without Cache classes
        return None
    if _BEAM_CACHE_CLASS is None:

        class BeamSharedCrossAttentionCache(EncoderDecoderCache):
            def reorder_cache(self, beam_idx: Any) -> None:
                self.self_attention_cache.reorder_cache(beam_idx)

        _BEAM_CACHE_CLASS = BeamSharedCrossAttentionCache
    try:
        config = model.config.get_text_config(decoder=True)
        return _BEAM_CACHE_CLASS(DynamicCache(config=config), DynamicCache(config=config))
    except TypeError:  # pragma: no cover - older DynamicCache without config
        return _BEAM_CACHE_CLASS(DynamicCache(), DynamicCache())
