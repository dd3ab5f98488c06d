"""Beam search for T5-style question generation: the beams ``model.generate`` returns, with less work per step.

``generate`` runs the library's decoder step once per generated token: it rebuilds the attention mask from T5's
position bias in every layer, grows every layer's key/value cache by concatenation and, after every step, copies all
of it to put each beam's history under its new row. Here, per step:

- the mask (position bias plus which beam's keys each hypothesis descends from) is built once, for all layers;
- self-attention keys and values are written once into a preallocated buffer and never moved: a hypothesis attends
  to the beam slots of its ancestors, looked up in a small index table, instead of its history being copied;
- the beams of an input are the query rows of one attention product against that input's encoder keys and values,
  projected once per input;
- an input whose beams are final (its pool full, or no running hypothesis able to beat its worst) stops being
  decoded, where ``generate`` steps every input of a batch until the last one is done.

Selection follows ``generate``'s beam search step for step (top 2 x beams continuations, finished hypotheses kept
by length-normalised score, the same stopping rules, n-gram ban and minimum length, applied in place), so the
returned token ids are ``generate``'s whenever the step's log-probabilities are. They are the same computation in
another summation order: tests check identical sequences against ``generate``, and the benchmark reports any change.
"""

from __future__ import annotations

import copy
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Optional, Sequence, Union

# generation settings this search reproduces; any other setting that differs from the library default sends the
# call to ``generate`` itself
_HANDLED = frozenset({
    "num_beams", "num_return_sequences", "max_length", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size",
    "early_stopping", "length_penalty", "do_sample", "pad_token_id", "eos_token_id", "bos_token_id",
    "decoder_start_token_id", "use_cache", "transformers_version", "_from_model_config", "_commit_hash",
})

_NEG = -1.0e9  # the score that keeps a candidate out, as the library's beam search uses it


@dataclass(frozen=True)
class BeamSettings:
    """What one beam search call needs, resolved from the model's generation config and the call's arguments."""

    num_beams: int
    num_return: int
    max_length: int  # decoder tokens, the start token included
    min_new_tokens: int
    no_repeat_ngram: int
    length_penalty: float
    early_stopping: Union[bool, str]
    eos: tuple[int, ...]  # end-of-sequence ids
    pad: Optional[int]
    start: int


def beam_settings(model: Any, gen_kwargs: dict[str, Any]) -> Optional[BeamSettings]:
    """The settings of a beam search this module reproduces, or None (use ``generate``) for anything else."""
    from transformers import GenerationConfig

    config = copy.deepcopy(model.generation_config)
    try:
        if config.update(**gen_kwargs):
            return None  # arguments that are not generation settings
    except ValueError:  # settings that don't go together: generate says why
        return None
    unset = GenerationConfig().to_dict()
    fallback = getattr(GenerationConfig, "_get_default_generation_params", dict)()  # what generate fills in
    resolved = {k: fallback.get(k) if v is None else v for k, v in config.to_dict().items()}
    active = {k for k, v in resolved.items() if v != unset.get(k, v) and v != fallback.get(k, unset.get(k))} | \
        {k for k in resolved if k not in unset}
    if active - _HANDLED:
        return None
    num_beams = resolved.get("num_beams") or 1
    if resolved.get("do_sample") or num_beams < 2:
        return None
    eos, start = resolved.get("eos_token_id"), resolved.get("decoder_start_token_id")
    eos = tuple(eos) if isinstance(eos, (list, tuple)) else (eos,)
    if not eos or None in eos or start is None or isinstance(start, (list, tuple)):
        return None
    max_new = resolved.get("max_new_tokens")
    max_length = 1 + max_new if max_new is not None else resolved.get("max_length") or 20  # 1: the start token
    if max_length < 2:
        return None  # nothing to generate: generate says why
    return BeamSettings(
        num_beams=num_beams, num_return=resolved.get("num_return_sequences") or 1, max_length=max_length,
        min_new_tokens=resolved.get("min_new_tokens") or 0, no_repeat_ngram=resolved.get("no_repeat_ngram_size") or 0,
        length_penalty=float(resolved["length_penalty"]),
        early_stopping=resolved.get("early_stopping") or False, eos=tuple(map(int, eos)),
        pad=resolved.get("pad_token_id"), start=int(start),
    )


@dataclass
class _DecoderState:
    """What the decoder steps of one call read: per layer, the cross-attention keys and values of every input still
    decoded (``[inputs, heads, longest input, head_dim]``, padding masked by ``cross_mask``) and the self-attention
    buffers (``[inputs, heads, capacity x beams, head_dim]``, slot ``position * beams + beam``)."""

    cross: list[tuple[Any, Any]]
    cross_mask: Any
    beams: int
    positions: int  # the most positions the decoder is fed in this call
    self_kv: Optional[list[tuple[Any, Any]]] = None
    capacity: int = 0  # positions the self-attention buffers hold

    @property
    def batch(self) -> int:
        return int(self.cross_mask.shape[0])

    @property
    def dtype(self) -> Any:
        return self.cross_mask.dtype

    def keep(self, inputs: Any) -> None:
        """Keep only ``inputs`` (a 1-d index tensor, in order), and cut the encoder padding none of them needs
        (masked keys weigh nothing; as between padded and unpadded batches, only rounding can differ)."""
        mask = self.cross_mask[inputs]
        width = int((mask[:, 0, 0, :] == 0).any(dim=0).nonzero().max()) + 1
        self.cross_mask = mask[..., :width].contiguous()
        self.cross = [(k[inputs, :, :width], v[inputs, :, :width]) for k, v in self.cross]
        if self.self_kv is not None:
            self.self_kv = [(k[inputs], v[inputs]) for k, v in self.self_kv]


_PROMPT = 1  # decoder tokens before the first generated one: the start token


@dataclass
class _Search:
    """The hypotheses of one beam search over the inputs still decoded (``[inputs, beams, ...]``, input ``inputs[i]``
    at row group ``i``): the running ones (``seqs``, their scores ``running``, and ``ancestors``, the beam slots of
    their keys per position) and each input's pool of finished ones (the best ``beams`` by length-normalised score;
    ``pool_done`` marks the slots filled). ``final_*`` keeps the pools of the inputs that left, by input."""

    s: BeamSettings
    eos: Any  # the end-of-sequence ids, as a tensor
    inputs: Any
    seqs: Any
    running: Any
    ancestors: Any
    pool_seqs: Any
    pool_scores: Any
    pool_done: Any
    pool_len: Any
    improvable: Any  # [inputs, 1]: can a running hypothesis still enter the pool?
    final_seqs: Any
    final_len: Any
    beam_ids: Any  # 0 .. beams - 1
    top_mask: Any  # [keep]: which of the kept continuations are among the best ``beams``

    @classmethod
    def start(cls, batch: int, s: BeamSettings, device: Any) -> "_Search":
        """Every input at its start token, only its first beam live (so the beams don't start as copies)."""
        torch = _torch()
        beams, max_length = s.num_beams, s.max_length
        fill = s.pad or s.eos[0]  # what the library writes after a sequence's end
        seqs = torch.full((batch, beams, max_length), fill, dtype=torch.long, device=device)
        seqs[:, :, 0] = s.start
        running = torch.zeros(batch, beams, device=device)
        running[:, 1:] = _NEG
        pool_seqs = seqs.clone()
        pool_len = torch.zeros(batch, beams, dtype=torch.long, device=device)
        return cls(
            s=s, eos=torch.tensor(s.eos, device=device), inputs=torch.arange(batch, device=device), seqs=seqs,
            running=running, ancestors=torch.zeros(batch, beams, max_length, dtype=torch.long, device=device),
            pool_seqs=pool_seqs, pool_scores=torch.full((batch, beams), _NEG, device=device),
            pool_done=torch.zeros(batch, beams, dtype=torch.bool, device=device), pool_len=pool_len,
            improvable=torch.ones(batch, 1, dtype=torch.bool, device=device),
            final_seqs=pool_seqs.clone(), final_len=pool_len.clone(),
            beam_ids=torch.arange(beams, device=device), top_mask=torch.arange(cls.kept(s), device=device) < beams,
        )

    @property
    def batch(self) -> int:
        return int(self.inputs.shape[0])

    @property
    def rows(self) -> int:
        return self.batch * self.s.num_beams

    @staticmethod
    def kept(s: BeamSettings) -> int:
        """Continuations kept per input: enough for a full set of unfinished beams even if each end id takes one."""
        return max(2, 1 + len(s.eos)) * s.num_beams

    def log_probs(self, logits: Any, cur: int) -> Any:
        """The step's log-probabilities with the n-gram ban and the minimum length applied."""
        torch, s = _torch(), self.s
        log_probs = torch.log_softmax(logits, dim=-1)
        if s.no_repeat_ngram > 0:
            _ban_repeated_ngrams(self.seqs.view(self.rows, s.max_length)[:, :cur], log_probs, s.no_repeat_ngram)
        if cur - _PROMPT < s.min_new_tokens:
            log_probs[:, self.eos] = -math.inf
        return log_probs

    def advance(self, log_probs: Any, cur: int) -> Any:
        """Choose the token at ``cur``: of the best :meth:`kept` continuations, the best unfinished ones run on and the
        finished ones among the best ``beams`` join the pool. Returns which continuations end there."""
        torch = _torch()
        batch, beams = self.batch, self.s.num_beams
        vocab = log_probs.shape[-1]
        totals = log_probs.view(batch, beams, vocab).add_(self.running[:, :, None]).view(batch, beams * vocab)
        top_scores, top_index = torch.topk(totals, self.kept(self.s))
        parent = top_index // vocab
        cand_seqs = torch.take_along_dim(self.seqs, parent[:, :, None], dim=1)
        cand_seqs[:, :, cur] = top_index % vocab
        cand_anc = torch.take_along_dim(self.ancestors, parent[:, :, None], dim=1)
        ends = torch.isin(cand_seqs[:, :, cur], self.eos) | (cur + 1 >= self.s.max_length)

        live = top_scores + ends.to(torch.float32) * _NEG
        chosen = torch.topk(live, beams)[1]
        self.seqs = torch.take_along_dim(cand_seqs, chosen[:, :, None], dim=1)
        self.ancestors = torch.take_along_dim(cand_anc, chosen[:, :, None], dim=1)
        self.running = torch.take_along_dim(live, chosen, dim=1)

        self._join_pool(top_scores, cand_seqs, ends & self.top_mask[None, :], cur + 1 - _PROMPT)
        return ends

    def _join_pool(self, scores: Any, cand_seqs: Any, just_done: Any, generated: int) -> None:
        """Finished continuations enter their input's pool if they beat its worst (none once it is full and
        stopping early, or once no running hypothesis could improve it)."""
        torch, s = _torch(), self.s
        final = scores / (generated ** s.length_penalty)
        pool_full = torch.all(self.pool_done, dim=-1, keepdim=True) & (s.early_stopping is True)
        final = final + pool_full.to(torch.float32) * _NEG
        final = final + (~self.improvable).to(torch.float32) * _NEG
        final = final + (~just_done) * _NEG
        best = torch.topk(torch.cat((self.pool_scores, final), dim=1), s.num_beams)[1]
        self.pool_seqs = torch.take_along_dim(torch.cat((self.pool_seqs, cand_seqs), dim=1), best[:, :, None], dim=1)
        self.pool_scores = torch.take_along_dim(torch.cat((self.pool_scores, final), dim=1), best, dim=1)
        self.pool_done = torch.take_along_dim(torch.cat((self.pool_done, just_done), dim=1), best, dim=1)
        lengths = torch.full_like(just_done, generated, dtype=torch.long)
        self.pool_len = torch.take_along_dim(torch.cat((self.pool_len, lengths), dim=1), best, dim=1)

    def over(self, ends: Any, generated_to: int) -> bool:
        """After the step that filled positions up to ``generated_to``: is the search over (nothing can enter any
        pool, every pool is full when stopping early, or every continuation ended)?"""
        torch, s = _torch(), self.s
        self.improvable = self.improvable & self._can_improve(generated_to - _PROMPT, s.max_length - _PROMPT)
        any_open = not bool(torch.all(self.pool_done)) or s.early_stopping is not True
        return not (bool(torch.any(self.improvable)) and any_open and not bool(torch.all(ends)))

    def _can_improve(self, generated: int, most: int) -> Any:
        """Per input: can the best running hypothesis still beat the worst finished one?"""
        torch, s = _torch(), self.s
        length = most if s.early_stopping == "never" and s.length_penalty > 0.0 else generated
        best_possible = self.running[:, :1] / (length ** s.length_penalty)
        worst = torch.where(self.pool_done, torch.min(self.pool_scores, dim=1, keepdim=True)[0], _NEG)
        return torch.any(best_possible > worst, dim=-1, keepdim=True)

    def drop_final(self, drop_fraction: float) -> Optional[Any]:
        """Inputs whose pool nothing can enter any more (no running hypothesis can beat its worst, or, stopping
        early, it is full) leave the search, their pools kept aside, once they are ``drop_fraction`` of it. Returns
        the row groups that stay (an index tensor), or None when none left."""
        s = self.s
        open_ = self.improvable[:, 0] & ~(_torch().all(self.pool_done, dim=1) & (s.early_stopping is True))
        batch = self.batch
        closed = batch - int(open_.sum())
        if not (closed and closed >= drop_fraction * batch):
            return None
        gone, stay = (~open_).nonzero()[:, 0], open_.nonzero()[:, 0]
        left = self.inputs[gone]
        self.final_seqs[left], self.final_len[left] = self.pool_seqs[gone], self.pool_len[gone]
        for name in ("inputs", "seqs", "running", "ancestors", "pool_seqs", "pool_scores", "pool_done", "pool_len",
                     "improvable"):
            setattr(self, name, getattr(self, name)[stay])
        return stay

    def best(self) -> Any:
        """The best ``num_return`` finished hypotheses per input, ``[inputs * num_return, length]``, cut after the
        longest."""
        s = self.s
        self.final_seqs[self.inputs], self.final_len[self.inputs] = self.pool_seqs, self.pool_len
        out = self.final_seqs[:, : s.num_return].reshape(-1, s.max_length)
        longest = int(self.final_len[:, : s.num_return].max())
        return out[:, : _PROMPT + longest]


class T5BeamSearch:
    """Beam search over a T5-style encoder-decoder's own modules (see the module docstring).

    Build with :meth:`for_model`, which returns None for a model of another layout or in float16 (T5's float16
    overflow clamps are not reproduced); the caller then uses ``generate``.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        decoder = model.decoder
        self.blocks = list(decoder.block)
        self.embed = decoder.embed_tokens
        self.final_norm = decoder.final_layer_norm
        self.lm_head = model.lm_head
        first = self.blocks[0].layer[0].SelfAttention
        self.position_bias = first  # the layer whose relative position bias every layer shares
        self.heads = first.n_heads
        self.head_dim = first.key_value_proj_dim
        cfg = model.config
        self.scale = cfg.d_model ** -0.5 if getattr(cfg, "scale_decoder_outputs", cfg.tie_word_embeddings) else None
        # finished inputs leave the decoded batch once they are this share of it (0: as soon as one is). Leaving
        # copies the others' keys and values, for 32 paper-size inputs about a sixth of a step's time, while each
        # input gone saves its share of every later step (benchmarks/bench_beam_ends.py)
        self.drop_fraction = 0.0
        self.decoded_rows = 0  # hypotheses x steps the last call decoded

    @classmethod
    def for_model(cls, model: Any) -> Optional["T5BeamSearch"]:
        torch = _torch()
        decoder = getattr(model, "decoder", None)
        blocks = getattr(decoder, "block", None)
        if blocks is None or not len(blocks) or not hasattr(model, "lm_head") or not hasattr(model, "get_encoder"):
            return None
        if next(model.parameters()).dtype == torch.float16:
            return None
        for i, block in enumerate(blocks):
            layers = getattr(block, "layer", ())
            if len(layers) != 3:
                return None
            sa, ca = getattr(layers[0], "SelfAttention", None), getattr(layers[1], "EncDecAttention", None)
            for attn in (sa, ca):
                if attn is None or not all(hasattr(attn, a) for a in ("q", "k", "v", "o", "n_heads",
                                                                       "key_value_proj_dim")):
                    return None
                if getattr(attn, "scaling", 1.0) != 1.0:
                    return None
            if (i == 0) != bool(getattr(sa, "has_relative_attention_bias", False)) or \
                    getattr(ca, "has_relative_attention_bias", False):
                return None
        if not hasattr(decoder, "final_layer_norm") or not hasattr(decoder, "embed_tokens"):
            return None
        return cls(model)

    def generate(self, encoder_batches: Sequence[tuple[Any, Any]], settings: BeamSettings,
                 timer: Optional[Callable[[], ContextManager[Any]]] = None) -> Any:
        """Token ids of the best ``num_return`` finished hypotheses per input, ``[inputs * num_return, length]``,
        laid out as ``generate`` returns them, for the inputs of all ``encoder_batches`` (``(input_ids,
        attention_mask)`` pairs, each padded to its own length) in order. The encoder runs per batch, so short inputs
        are not padded to long ones; one beam search decodes them all, and an input whose beams are final stops being
        decoded (once ``drop_fraction`` of those still decoded are final). ``timer`` wraps each model computation
        (for forward-time counters)."""
        s = settings
        timed = timer or nullcontext
        with timed():
            state = self._encode(encoder_batches, s.num_beams, positions=s.max_length - 1)
        search = _Search.start(state.batch, s, encoder_batches[0][0].device)
        self.decoded_rows = 0
        cur = _PROMPT  # the position whose token is chosen next
        while True:
            self.decoded_rows += search.rows
            search.ancestors[:, :, cur - 1] = search.beam_ids  # this step's keys go to each hypothesis' own slot
            with timed():
                logits = self._step(state, search.seqs[:, :, cur - 1].reshape(search.rows), cur - 1,
                                    search.ancestors[:, :, :cur])
            ends = search.advance(search.log_probs(logits, cur), cur)
            if search.over(ends, cur + 1):
                break
            stay = search.drop_final(self.drop_fraction)
            if stay is not None:
                state.keep(stay)
            cur += 1
        return search.best()

    def _encode(self, encoder_batches: Sequence[tuple[Any, Any]], beams: int, positions: int) -> _DecoderState:
        """Each batch's encoder output projected to every layer's cross-attention keys and values (once per input,
        not per beam), gathered into ``[inputs, heads, longest input, head_dim]`` with a mask over the padding."""
        torch = _torch()
        encoder = self.model.get_encoder()
        batch = sum(int(ids.shape[0]) for ids, _ in encoder_batches)
        length = max(int(ids.shape[1]) for ids, _ in encoder_batches)
        heads, head_dim = self.heads, self.head_dim
        cross: list[tuple[Any, Any]] = []
        cross_mask: Any = None
        start = 0
        for input_ids, attention_mask in encoder_batches:
            states = encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state
            n, width = states.shape[:2]
            if cross_mask is None:
                dtype, device = states.dtype, states.device
                cross_mask = torch.full((batch, 1, 1, length), torch.finfo(dtype).min, dtype=dtype, device=device)
                cross = [(torch.zeros(batch, heads, length, head_dim, dtype=dtype, device=device),
                          torch.zeros(batch, heads, length, head_dim, dtype=dtype, device=device))
                         for _ in self.blocks]
            cross_mask[start : start + n, 0, 0, :width].masked_fill_(attention_mask.bool(), 0.0)
            for (keys, values), block in zip(cross, self.blocks):
                attn = block.layer[1].EncDecAttention
                keys[start : start + n, :, :width] = attn.k(states).view(n, width, heads, head_dim).transpose(1, 2)
                values[start : start + n, :, :width] = attn.v(states).view(n, width, heads, head_dim).transpose(1, 2)
            start += n
        return _DecoderState(cross=cross, cross_mask=cross_mask, beams=beams, positions=positions)

    def _self_buffers(self, state: _DecoderState, positions: int) -> list[tuple[Any, Any]]:
        """Every layer's self-attention key and value buffers, grown by doubling (up to the most positions a call
        can need) when a step needs more positions."""
        torch = _torch()
        if positions > state.capacity:
            capacity = min(max(16, 2 * state.capacity, positions), state.positions)
            beams = state.beams
            shape = (state.batch, self.heads, capacity * beams, self.head_dim)
            grown = []
            for i in range(len(self.blocks)):
                k = torch.empty(shape, dtype=state.dtype, device=state.cross_mask.device)
                v = torch.empty(shape, dtype=state.dtype, device=state.cross_mask.device)
                if state.self_kv is not None:
                    used = state.capacity * beams
                    k[:, :, :used] = state.self_kv[i][0][:, :, :used]
                    v[:, :, :used] = state.self_kv[i][1][:, :, :used]
                grown.append((k, v))
            state.self_kv, state.capacity = grown, capacity
        return state.self_kv

    def _step(self, state: _DecoderState, tokens: Any, position: int, ancestors: Any) -> Any:
        """Float32 logits ``[inputs x beams, vocab]`` for the tokens at ``position``; ``ancestors[b, i, p]`` is the
        beam slot holding hypothesis (b, i)'s keys for position ``p``."""
        torch = _torch()
        sdpa = torch.nn.functional.scaled_dot_product_attention
        batch, beams, dtype = state.batch, state.beams, state.dtype
        rows, heads, head_dim = batch * beams, self.heads, self.head_dim
        seen = position + 1
        buffers = self._self_buffers(state, seen)

        # the mask every layer shares: T5's relative position bias, and each hypothesis' own ancestry
        bias = self.position_bias.compute_bias(1, seen, device=tokens.device, past_seen_tokens=position)
        bias = bias.to(dtype).repeat_interleave(beams, dim=-1)  # [1, heads, 1, seen * beams]
        mine = ancestors[:, :, :, None] == torch.arange(beams, device=tokens.device)  # [b, beams, seen, beams]
        blocked = torch.zeros(mine.shape, dtype=dtype, device=tokens.device)
        blocked.masked_fill_(~mine, torch.finfo(dtype).min)
        self_mask = bias + blocked.view(batch, 1, beams, seen * beams)

        def grouped(x: Any) -> Any:  # [rows, dim] -> [inputs, heads, beams, head_dim]
            return x.view(batch, beams, heads, head_dim).transpose(1, 2)

        def merged(x: Any) -> Any:  # the inverse
            return x.transpose(1, 2).reshape(rows, heads * head_dim)

        hidden = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            sa_layer, ca_layer, ff_layer = block.layer
            attn = sa_layer.SelfAttention
            x = sa_layer.layer_norm(hidden)
            k_buf, v_buf = buffers[i]
            k_buf[:, :, position * beams : seen * beams] = grouped(attn.k(x))
            v_buf[:, :, position * beams : seen * beams] = grouped(attn.v(x))
            out = sdpa(grouped(attn.q(x)), k_buf[:, :, : seen * beams], v_buf[:, :, : seen * beams],
                       attn_mask=self_mask, scale=1.0)
            hidden = hidden + attn.o(merged(out))

            attn = ca_layer.EncDecAttention
            x = ca_layer.layer_norm(hidden)
            keys, values = state.cross[i]
            out = sdpa(grouped(attn.q(x)), keys, values, attn_mask=state.cross_mask, scale=1.0)
            hidden = hidden + attn.o(merged(out))
            hidden = ff_layer(hidden)
        hidden = self.final_norm(hidden)
        if self.scale is not None:
            hidden = hidden * self.scale
        return self.lm_head(hidden).to(torch.float32)


def _ban_repeated_ngrams(history: Any, log_probs: Any, n: int) -> None:
    """Set to -inf, in place, every token that would repeat an n-gram already in its row of ``history`` (what the
    library's ``no_repeat_ngram_size`` does)."""
    length = history.shape[1]
    if length < n:
        return
    prefix = history[:, length - n + 1 :]  # the n-1 tokens a new n-gram would start with
    windows = history.unfold(1, n, 1)  # every n-gram so far
    rows, hits = (windows[:, :, :-1] == prefix[:, None, :]).all(dim=-1).nonzero(as_tuple=True)
    log_probs[rows, windows[rows, hits, -1]] = -math.inf


def _torch() -> Any:
    import torch

    return torch
