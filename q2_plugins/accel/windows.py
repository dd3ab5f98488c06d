"""Window logits for QA and NLI: packed end to end where the model allows (:mod:`q2_plugins.accel.packed`), padded
batches with attention masks otherwise; the same logits either way."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .batching import PACKED_BATCH_TOKENS, Batching, length_batches, packed_batches
from .counters import RunStats
from .packed import PackedEncoder
from .selfcheck import FastPathCheck

__all__ = ["WindowRunner"]

Features = Sequence[dict[str, Sequence[int]]]


class WindowRunner:
    """Runs a QA (``kind="qa"``) or classification model on tokenized windows, in batches.

    With ``pack_windows`` (and a model :class:`PackedEncoder` supports), windows run packed end to end; on the first
    call on a device / dtype the tests do not cover, the first packed batch also runs padded, and any other argmax
    (span ends, labels) turns packing off for the rest of the run.
    """

    def __init__(self, tokenizer: Any, model: Any, kind: str, *, pack_windows: bool = True) -> None:
        if kind not in ("qa", "classification"):
            raise ValueError(f"kind must be 'qa' or 'classification', not {kind!r}")
        self.tokenizer = tokenizer
        self.model = model
        self.kind = kind
        self.pack_windows = pack_windows
        self.device = next(model.parameters()).device
        self.stats = RunStats()
        self.check = FastPathCheck("packed windows of q2_plugins.accel.packed")
        self._packed: Any = None

    def packer(self) -> Optional[PackedEncoder]:
        """The packed-window runner for this model, or None (padded batches)."""
        if not self.pack_windows or self.check.agreed is False:
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
            with torch.inference_mode():
                if packer is not None:
                    n = sum(lengths[w] for w in batch)
                    self.stats.count(n, n)  # no padding in the token-wise layers (attention pads per window)
                    run = packer.qa_logits if self.kind == "qa" else packer.class_logits
                    result = self.stats.timed(run, _bare(part), forward=True)
                else:
                    outputs = self.stats.timed(self.model, **self.stats.padded(self.tokenizer, part, self.device))
                    result = (outputs.start_logits, outputs.end_logits) if self.kind == "qa" else outputs.logits
            for j, w in enumerate(batch):
                if self.kind == "qa":  # padding positions are never candidates
                    out[w] = (result[0][j][: lengths[w]].float().cpu(), result[1][j][: lengths[w]].float().cpu())
                else:
                    out[w] = result[j].float().cpu()
        return out

    def _plan(self, features: Features, lengths: list[int],
              batching: Batching) -> tuple[Optional[PackedEncoder], list[list[int]]]:
        """The packer (or None) and the window batches of one call, after the first call's check where one is due."""
        packer = self.packer()
        if packer is None:
            return None, self._padded_batches(lengths, batching)
        cap = min(batching.max_tokens or PACKED_BATCH_TOKENS, PACKED_BATCH_TOKENS)
        batches = packed_batches(lengths, batching.size, batching.sort, cap)
        dtype = next(self.model.parameters()).dtype
        if batches and self.check.needed(self.device, dtype):
            first = [features[w] for w in batches[0]]
            same = self._packed_agrees(packer, first)
            if not self.check.record(same, self.device, dtype, "argmax of the window logits"):
                return None, self._padded_batches(lengths, batching)
        return packer, batches

    @staticmethod
    def _padded_batches(lengths: list[int], batching: Batching) -> list[list[int]]:
        return length_batches(lengths, batching.size, batching.sort, batching.max_tokens)

    def _packed_agrees(self, packer: PackedEncoder, features: Features) -> bool:
        """Whether packed and padded runs of ``features`` pick the same argmax (span ends, labels)."""
        import torch

        padded = {k: v.to(self.device) for k, v in
                  self.tokenizer.pad(list(features), padding=True, return_tensors="pt").items()}
        with torch.inference_mode():
            ref = self.model(**padded)
            if self.kind == "qa":
                starts, ends = packer.qa_logits(_bare(features))
                return all(int(starts[j].argmax()) == int(ref.start_logits[j][: len(starts[j])].argmax())
                           and int(ends[j].argmax()) == int(ref.end_logits[j][: len(ends[j])].argmax())
                           for j in range(len(features)))
            logits = packer.class_logits(_bare(features))
            return bool((logits.float().argmax(-1) == ref.logits.float().argmax(-1)).all())


def _bare(features: Features) -> list[dict[str, Sequence[int]]]:
    """Features without their attention masks (packed windows need none)."""
    return [{k: v for k, v in f.items() if k != "attention_mask"} for f in features]
