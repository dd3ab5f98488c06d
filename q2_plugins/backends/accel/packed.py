"""Encoder forward passes over packed windows: no padding in the products that cost.

A padded batch computes every layer on ``windows x longest window`` positions. Here the windows of a batch are laid
end to end in one row, so embeddings, linear layers, layer norms and activations (nearly all of an encoder's work)
see real tokens only. Attention, the one part that mixes tokens, runs per window: through an attention function
registered with transformers, the row's queries, keys and values are gathered into a padded block for that product
alone and scattered back. Each window's outputs are the ones a padded batch gives (tests check them bit for bit).

Used for the QA models with a per-token span head (ALBERT, BERT, RoBERTa) and RoBERTa-style NLI classifiers;
other models run padded batches as before.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

ATTENTION = "q2_packed"

# model types whose packed calls are known to match padded ones (tests), by head
_QA_TYPES = {"albert", "bert", "roberta", "xlm-roberta"}
_CLASSIFIER_TYPES = {"roberta", "xlm-roberta"}


class _Layout:
    """Where each window's tokens sit in the packed row and in the padded attention block."""

    def __init__(self, lengths: Sequence[int], device: Any) -> None:
        torch = _torch()
        n, longest, total = len(lengths), max(lengths), sum(lengths)
        self.lengths, self.n, self.longest = list(lengths), n, longest
        starts = torch.tensor([0, *lengths[:-1]], device=device).cumsum(0)
        slot = torch.arange(longest, device=device)
        real = slot[None, :] < torch.tensor(lengths, device=device)[:, None]  # [n, longest]
        # block position -> packed token (padding reads an extra zero row at index ``total``)
        self.gather = torch.where(real, starts[:, None] + slot[None, :], total).reshape(-1)
        # packed token -> block position
        self.scatter = (torch.arange(n, device=device)[:, None] * longest + slot[None, :])[real]
        self.mask = real[:, None, None, :]  # keys a query may attend to: its own window's tokens
        self.starts = starts

    def block(self, x: Any) -> Any:
        """``[1, heads, tokens, dim]`` packed -> ``[windows, heads, longest, dim]`` padded with zeros."""
        torch = _torch()
        rows = x[0].transpose(0, 1)  # [tokens, heads, dim]
        # one contiguous copy with a zero row appended, then a gather (twice as fast here as scattering into zeros)
        rows = torch.cat((rows, rows.new_zeros(1, *rows.shape[1:])))
        return rows.index_select(0, self.gather).view(self.n, self.longest, *rows.shape[1:]).transpose(1, 2)

    def unblock(self, x: Any) -> Any:
        """``[windows, heads, longest, dim]`` -> ``[1, tokens, heads, dim]`` (the layout attention functions return)."""
        flat = x.transpose(1, 2).reshape(self.n * self.longest, *x.shape[1:2], x.shape[-1])
        return flat.index_select(0, self.scatter)[None]


def _packed_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                      scaling: Optional[float] = None, **kwargs: Any) -> tuple[Any, None]:
    """Per-window attention for packed calls (``q2_layout`` given); anything else goes to the library's SDPA."""
    layout: Optional[_Layout] = kwargs.pop("q2_layout", None)
    if layout is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    torch = _torch()
    out = torch.nn.functional.scaled_dot_product_attention(
        layout.block(query), layout.block(key), layout.block(value), attn_mask=layout.mask, dropout_p=0.0,
        scale=scaling)
    return layout.unblock(out), None


def _register() -> bool:
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    except ImportError:  # pragma: no cover - transformers without attention interfaces
        return False
    if ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION, _packed_attention)
        AttentionMaskInterface.register(ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return True


class PackedEncoder:
    """Runs a QA or classification model on packed windows (see the module docstring).

    Build with :meth:`for_model`; None means the model runs padded batches (another architecture, a head that reads
    a fixed position of the row, or an attention implementation other than SDPA).
    """

    def __init__(self, model: Any, kind: str) -> None:
        self.model = model
        self.kind = kind
        config = model.config
        pad = getattr(config, "pad_token_id", None)
        self.position_offset = (pad + 1) if config.model_type in ("roberta", "xlm-roberta") else 0

    @classmethod
    def for_model(cls, model: Any, kind: str) -> Optional["PackedEncoder"]:
        if kind not in ("qa", "classification"):
            raise ValueError(f"kind must be 'qa' or 'classification', not {kind!r}")
        config = getattr(model, "config", None)
        if config is None or getattr(config, "_attn_implementation", None) not in ("sdpa", ATTENTION):
            return None
        types, head = (_QA_TYPES, "qa_outputs") if kind == "qa" else (_CLASSIFIER_TYPES, "classifier")
        if config.model_type not in types or not hasattr(model, head):
            return None
        if config.model_type in ("roberta", "xlm-roberta") and getattr(config, "pad_token_id", None) is None:
            return None
        if not _register():
            return None
        if config._attn_implementation != ATTENTION:
            try:
                model.set_attn_implementation(ATTENTION)
            except (ValueError, AttributeError, KeyError):
                return None
            if config._attn_implementation != ATTENTION:
                return None
        return cls(model, kind)

    def _inputs(self, features: Sequence[dict[str, Sequence[int]]]) -> tuple[dict[str, Any], _Layout]:
        torch = _torch()
        device = next(self.model.parameters()).device
        lengths = [len(f["input_ids"]) for f in features]
        layout = _Layout(lengths, device)

        def row(key: str) -> Any:
            return torch.tensor([t for f in features for t in f[key]], dtype=torch.long, device=device)[None]

        positions = torch.cat([torch.arange(n, device=device) for n in lengths]) + self.position_offset
        inputs = {"input_ids": row("input_ids"), "position_ids": positions[None],
                  "token_type_ids": row("token_type_ids") if "token_type_ids" in features[0]
                  else torch.zeros(1, sum(lengths), dtype=torch.long, device=device)}
        return inputs, layout

    def qa_logits(self, features: Sequence[dict[str, Sequence[int]]]) -> tuple[list[Any], list[Any]]:
        """Start and end logits of each window (real tokens only)."""
        inputs, layout = self._inputs(features)
        out = self.model(**inputs, q2_layout=layout)
        return list(out.start_logits[0].split(layout.lengths)), list(out.end_logits[0].split(layout.lengths))

    def class_logits(self, features: Sequence[dict[str, Sequence[int]]]) -> Any:
        """``[windows, labels]`` logits: the classifier head on each window's first token."""
        inputs, layout = self._inputs(features)
        hidden = self.model.base_model(**inputs, q2_layout=layout).last_hidden_state
        return self.model.classifier(hidden[0].index_select(0, layout.starts)[:, None, :])


def _torch() -> Any:
    import torch

    return torch
