"""Window logits for QA and NLI: on the CPU packed end to end where the model allows
(:mod:`q2_plugins.backends.accel.packed`), padded batches with attention masks otherwise (and on other devices, where
they are faster); the same logits either way."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from q2_plugins.backends.accel.batching import (
    PACKED_BATCH_TOKENS,
    Batching,
    bucket_length,
    input_limit,
    length_batches,
    packed_batches,
)
from q2_plugins.backends.accel.counters import RunStats
from q2_plugins.backends.accel.device import matmul_precision, packed_windows
from q2_plugins.backends.accel.packed import PackedEncoder

__all__ = ["WindowRunner"]

Features = Sequence[dict[str, Sequence[int]]]


class WindowRunner:
    """Runs a QA (``kind="qa"``) or classification model on tokenized windows, in batches.

    With ``pack_windows``, on the CPU (and with a model :class:`PackedEncoder` supports), windows run packed end to
    end (:func:`~q2_plugins.backends.accel.device.packed_windows`); elsewhere in padded batches. A model marked for TF32
    (:func:`q2_plugins.backends.accel.prepare_model`) runs its passes with TF32 matrix products. ``bucket`` (on by
    default off the CPU): padded batches are planned and padded at their
    :func:`~q2_plugins.backends.accel.batching.bucket_length` (the same logits over the real tokens: padding is masked).
    """

    def __init__(self, tokenizer: Any, model: Any, kind: str, *, pack_windows: bool = True) -> None:
        if kind not in ("qa", "classification"):
            raise ValueError(f"kind must be 'qa' or 'classification', not {kind!r}")
        self.tokenizer = tokenizer
        self.model = model
        self.kind = kind
        self.device = next(model.parameters()).device
        self.pack_windows = packed_windows(self.device.type, pack_windows)
        self.tf32 = bool(getattr(model, "q2_tf32", False))
        self.bucket = self.device.type != "cpu"
        self._limit = input_limit(tokenizer)
        self.stats = RunStats()
        self._packed: Any = None

    def packer(self) -> Optional[PackedEncoder]:
        """The packed-window runner for this model, or None (padded batches)."""
        if not self.pack_windows:
            return None
        if self._packed is None:
            self._packed = PackedEncoder.for_model(self.model, self.kind) or False
        return self._packed or None

    def logits(self, features: Features, batching: Batching) -> list[Any]:
        """Per window, in input order: ``(start logits, end logits)`` (QA) or the label logits (classification),
        float32 on the CPU, over the window's real tokens only."""
        import torch

        lengths = [len(f["input_ids"]) for f in features]
        out: list[Any] = [None] * len(features)
        packer, batches = self._plan(features, lengths, batching)
        for batch in batches:
            part = [features[w] for w in batch]
            with torch.inference_mode(), matmul_precision(self.tf32):
                if packer is not None:
                    n = sum(lengths[w] for w in batch)
                    self.stats.count(n, n)  # no padding in the token-wise layers (attention pads per window)
                    run = packer.qa_logits if self.kind == "qa" else packer.class_logits
                    result = self.stats.timed(run, _bare(part), forward=True)
                else:
                    length = self._bucket(max(lengths[w] for w in batch)) if self.bucket else None
                    outputs = self.stats.timed(self.model, **self.stats.padded(self.tokenizer, part, self.device,
                                                                               length))
                    result = (outputs.start_logits, outputs.end_logits) if self.kind == "qa" else outputs.logits
            for j, w in enumerate(batch):
                if self.kind == "qa":  # padding positions are never candidates
                    out[w] = (result[0][j][: lengths[w]].float().cpu(), result[1][j][: lengths[w]].float().cpu())
                else:
                    out[w] = result[j].float().cpu()
        return out

    def _plan(self, features: Features, lengths: list[int],
              batching: Batching) -> tuple[Optional[PackedEncoder], list[list[int]]]:
        """The packer (or None) and the window batches of one call."""
        packer = self.packer()
        if packer is None:
            planned = [self._bucket(n) for n in lengths] if self.bucket else lengths
            return None, self._padded_batches(planned, batching)
        cap = min(batching.max_tokens or PACKED_BATCH_TOKENS, PACKED_BATCH_TOKENS)
        return packer, packed_batches(lengths, batching.size, batching.sort, cap)

    def _bucket(self, n: int) -> int:
        return bucket_length(n, self._limit)

    @staticmethod
    def _padded_batches(lengths: list[int], batching: Batching) -> list[list[int]]:
        return length_batches(lengths, batching.size, batching.sort, batching.max_tokens)


def _bare(features: Features) -> list[dict[str, Sequence[int]]]:
    """Features without their attention masks (packed windows need none)."""
    return [{k: v for k, v in f.items() if k != "attention_mask"} for f in features]
