"""Rerank candidate responses by Q², and pick the Q²-best of ``model.generate`` candidates.

Selection rule (:func:`rerank`): candidates are ordered by their key, highest first; the key is the Q² score, or
``(1 - weight) * Q2 + weight * exp(sequence_score)`` when sequence scores and a weight are given (``exp`` of
transformers' length-normalised beam log-probability, so both terms lie in [0, 1]). A candidate without a score
(``status`` error or no valid question) ranks after every scored one. Ties keep the input order, i.e. the
generator's own ranking. Scoring is one :meth:`Q2Scorer.score` call over every candidate of every input.

Early stop (``early_stop=True``, the default, with a :class:`Q2Scorer`): a candidate stops getting QA and NLI once
its highest possible key is below another candidate's lowest possible one (:mod:`q2_plugins.metric.contest`); the
best candidate is the one full scoring picks, the stopped ones are marked in :attr:`Reranked.stopped`, with no
score, and rank after the others. ``explain=True`` or ``early_stop=False`` scores every candidate to the end. When
a candidate still in play fails (a row error), its input is scored again in full.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from q2_plugins.integrations import adapters
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.contest import Contest
from q2_plugins.metric.progress import on_a_terminal
from q2_plugins.metric.results import Q2Result, ResponseResult, ResponseStatus
from q2_plugins.scorer import Q2Scorer

__all__ = ["Reranked", "Generated", "rerank", "rerank_batch", "generate_best"]


@dataclass
class Reranked:
    """Candidates of one input, ranked. Lists other than ``order`` are in input order."""

    candidates: list[str]
    order: list[int]  # candidate indices, best first
    keys: list[Optional[float]]  # the ranking key per candidate (None: unscored or stopped)
    q2: list[Optional[float]]  # the Q² score per candidate
    results: list[ResponseResult]  # per candidate; questions and answers when explain=True; status "stopped": see
    signature: str
    sequence_scores: Optional[list[float]] = None
    #: per candidate: stopped early, it could not rank first (not scored to the end; it ranks after the others)
    stopped: list[bool] = field(default_factory=list)

    @property
    def best(self) -> int:
        return self.order[0]

    @property
    def best_text(self) -> str:
        return self.candidates[self.best]

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "order": self.order, "keys": self.keys, "q2": self.q2,
                "sequence_scores": self.sequence_scores, "signature": self.signature, "stopped": self.stopped,
                "results": [r.to_dict() for r in self.results]}


@dataclass
class Generated:
    """The Q²-best generation for one input, with every candidate and its ranking."""

    text: str
    reranked: Reranked


def _scorer(scorer: Optional[Q2Scorer], config: Optional[Q2Config]) -> Q2Scorer:
    if scorer is not None and config is not None:
        raise TypeError("Pass either scorer= or config=, not both")
    if scorer is not None:
        return scorer
    return adapters.shared_scorer(config if config is not None else Q2Config(), slot="rerank")


def _check_weight(weight: float, has_scores: bool) -> None:
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0.0 <= weight <= 1.0:
        raise ValueError(f"Expected weight in [0, 1], but got {weight!r}")
    if weight > 0 and not has_scores:
        raise ValueError("weight > 0 mixes in sequence scores: pass sequence_scores as well")


def rerank_batch(
    candidates: Sequence[Sequence[str]],
    knowledge: Sequence[Any],
    *,
    history: Optional[Sequence[Any]] = None,
    sequence_scores: Optional[Sequence[Sequence[float]]] = None,
    weight: float = 0.0,
    explain: bool = False,
    scorer: Optional[Q2Scorer] = None,
    config: Optional[Q2Config] = None,
    early_stop: bool = True,
) -> list[Reranked]:
    """Rerank ``candidates[i]`` (a list of responses) against ``knowledge[i]``, for every input ``i`` at once
    (``early_stop``: see the module docstring)."""
    for name, value in (("candidates", candidates), ("knowledge", knowledge)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"Expected {name} to be a list, but got {type(value).__name__}")
    if len(candidates) != len(knowledge):
        raise ValueError(f"Expected one knowledge per input, but got {len(knowledge)} for {len(candidates)} inputs")
    for i, group in enumerate(candidates):
        if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
            raise ValueError(f"Expected candidates[{i}] to be a non-empty list of responses, but got {group!r}")
    if sequence_scores is not None:
        if len(sequence_scores) != len(candidates) or any(
                len(s) != len(c) for s, c in zip(sequence_scores, candidates)):
            raise ValueError("Expected sequence_scores to have one score per candidate, shaped like candidates")
    _check_weight(weight, sequence_scores is not None)
    if history is not None and len(history) != len(candidates):
        raise ValueError(f"Expected one history per input, but got {len(history)} for {len(candidates)} inputs")

    scoring = _scorer(scorer, config)
    seq = None if sequence_scores is None else [[float(x) for x in s] for s in sequence_scores]
    stop = early_stop and not explain and isinstance(scoring, Q2Scorer)
    results = _score(scoring, candidates, knowledge, history, seq, weight, explain, stop)
    if stop:  # a candidate in play that failed: the bounds did not foresee it, so its input is scored in full
        again = [i for i, rs in enumerate(results) if any(r.status == ResponseStatus.STOPPED for r in rs)
                 and any(r.index in results.unforeseen for r in rs)]
        if again:
            full = _score(scoring, [candidates[i] for i in again], [knowledge[i] for i in again],
                          None if history is None else [history[i] for i in again],
                          None if seq is None else [seq[i] for i in again], weight, explain, False)
            for i, rs in zip(again, full):
                results[i] = rs
    out = []
    for i, group in enumerate(candidates):
        rs = list(results[i])
        stopped = [r.status == ResponseStatus.STOPPED for r in rs]
        q2 = [r.score for r in rs]
        s = None if seq is None else seq[i]
        keys = [_key(q, None if s is None else s[j], weight) for j, q in enumerate(q2)]
        order = sorted(range(len(group)), key=lambda j: (stopped[j], keys[j] is None, -(keys[j] or 0.0), j))
        out.append(Reranked(list(group), order, keys, q2, rs, results.signature, s, stopped))
    return out


class _Results(list):
    """Per input, its candidates' results; ``signature``: the scorer's; ``unforeseen``: the call's rows whose
    error the early stop's bounds had ruled out (:meth:`Contest.unforeseen`)."""

    signature = ""
    unforeseen: frozenset[int] = frozenset()


def _key(q2: Optional[float], sequence_score: Optional[float], weight: float) -> Optional[float]:
    """The ranking key of a candidate (see the module docstring)."""
    if q2 is None or sequence_score is None or weight == 0:
        return q2
    return (1 - weight) * q2 + weight * math.exp(sequence_score)


def _score(scoring: Any, candidates: Sequence[Sequence[str]], knowledge: Sequence[Any],
           history: Optional[Sequence[Any]], seq: Optional[list[list[float]]], weight: float, explain: bool,
           stop: bool) -> "_Results":
    """One score() call over every candidate of every input; with ``stop``, a :class:`Contest` of each input's
    candidates (its key: the Q² score, or the mix with the sequence score)."""
    flat = [(i, j, text) for i, group in enumerate(candidates) for j, text in enumerate(group)]
    extra: dict[str, Any] = {}
    if stop:
        groups, pos = [], 0
        for group in candidates:
            groups.append(list(range(pos, pos + len(group))))
            pos += len(group)
        mixed = seq is not None and weight > 0
        extra["contest"] = Contest(groups, scale=[1 - weight if mixed else 1.0 for _ in flat],
                                   offset=[weight * math.exp(seq[i][j]) if mixed else 0.0  # type: ignore[index]
                                           for i, j, _ in flat])
    # (bars on a terminal for a long call; a scorer of the caller's own is called as before)
    if isinstance(scoring, Q2Scorer) and on_a_terminal(len(flat)):
        extra["progress"] = True
    result: Q2Result = scoring.score(
        responses=[text for _, _, text in flat],
        knowledge=[knowledge[i] for i, _, _ in flat],
        history=None if history is None else [history[i] for i, _, _ in flat],
        explain=explain, **extra,
    )
    out, pos = _Results(), 0
    for group in candidates:
        out.append(list(result.responses[pos : pos + len(group)]))
        pos += len(group)
    out.signature = result.signature
    if "contest" in extra:
        out.unforeseen = frozenset(extra["contest"].unforeseen())
    return out


def rerank(
    candidates: Sequence[str],
    knowledge: Any,
    *,
    history: Any = None,
    sequence_scores: Optional[Sequence[float]] = None,
    weight: float = 0.0,
    explain: bool = False,
    scorer: Optional[Q2Scorer] = None,
    config: Optional[Q2Config] = None,
    early_stop: bool = True,
) -> Reranked:
    """Rerank candidate responses for one knowledge (a string or a list of sentences) by Q², best first.

    Without ``scorer`` / ``config`` a process-wide scorer with the default config is used (models load once).
    """
    if isinstance(candidates, str):
        raise TypeError("Expected candidates to be a list of responses, but got a single string")
    return rerank_batch(
        [candidates], [knowledge], history=None if history is None else [history],
        sequence_scores=None if sequence_scores is None else [sequence_scores], weight=weight, explain=explain,
        scorer=scorer, config=config, early_stop=early_stop,
    )[0]


def _length(model: Any, enc: Any, decoder_only: bool, max_new_tokens: int,
            generate_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The length keyword arguments of ``generate`` for ``max_new_tokens`` new tokens. A model whose generation
    config sets ``max_length`` (many seq2seq models do) gets the same limit as a ``max_length`` counted as
    ``generate`` counts it (the decoder's input plus the new tokens), with no ``max_new_tokens``: both set make
    transformers warn, on every call, that ``max_new_tokens`` wins."""
    if getattr(getattr(model, "generation_config", None), "max_length", None) is None:
        return {"max_new_tokens": max_new_tokens}
    if decoder_only:
        start = enc["input_ids"].shape[1]
    else:  # the decoder starts from its start token, or from the decoder input given
        given = generate_kwargs.get("decoder_input_ids")
        start = given.shape[1] if given is not None else 1
    return {"max_length": start + max_new_tokens, "max_new_tokens": None}


def generate_best(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    knowledge: Sequence[Any],
    *,
    num_candidates: int = 4,
    weight: float = 0.0,
    batch_size: int = 8,
    max_new_tokens: int = 40,
    explain: bool = False,
    scorer: Optional[Q2Scorer] = None,
    config: Optional[Q2Config] = None,
    early_stop: bool = True,
    **generate_kwargs: Any,
) -> list[Generated]:
    """Generate ``num_candidates`` beams per prompt and return the Q²-best text for each.

    Works for encoder-decoder and decoder-only models (prompts are left-padded for the latter and the prompt is cut
    from the output). Calls ``model.generate(num_beams=k, num_return_sequences=k)`` in batches of ``batch_size``
    prompts, then reranks every candidate of every prompt in one Q² call. ``weight`` mixes in the beam score (see
    the module docstring; so is ``early_stop``). Extra keyword arguments go to ``generate``.
    """
    import torch

    if isinstance(prompts, str) or isinstance(knowledge, str):
        raise TypeError("Expected prompts and knowledge to be lists (one knowledge per prompt)")
    if len(prompts) != len(knowledge):
        raise ValueError(f"Expected one knowledge per prompt, but got {len(knowledge)} for {len(prompts)} prompts")
    if not isinstance(num_candidates, int) or num_candidates < 1:
        raise ValueError(f"Expected num_candidates to be a positive integer, but got {num_candidates!r}")
    for key in ("num_beams", "num_return_sequences", "do_sample"):
        if key in generate_kwargs:
            raise TypeError(f"generate_best sets {key} itself (beam search with num_candidates beams)")
    if "max_length" in generate_kwargs:
        raise TypeError("generate_best sets max_length itself (from max_new_tokens)")
    _check_weight(weight, True)
    decoder_only = not getattr(model.config, "is_encoder_decoder", False)
    if tokenizer.pad_token_id is None:
        raise ValueError("The tokenizer has no pad token: set tokenizer.pad_token (e.g. to its eos_token) first")
    device = next(model.parameters()).device
    k = num_candidates
    texts: list[list[str]] = []
    seq_scores: list[list[float]] = []
    for start in range(0, len(prompts), batch_size):
        part = list(prompts[start : start + batch_size])
        enc = tokenizer(part, return_tensors="pt", padding=True,
                        padding_side="left" if decoder_only else "right").to(device)
        with torch.no_grad():
            out = model.generate(**enc, num_beams=k, num_return_sequences=k, do_sample=False,
                                 **_length(model, enc, decoder_only, max_new_tokens, generate_kwargs),
                                 output_scores=True, return_dict_in_generate=True,
                                 pad_token_id=tokenizer.pad_token_id, **generate_kwargs)
        sequences = out.sequences[:, enc["input_ids"].shape[1]:] if decoder_only else out.sequences
        decoded = tokenizer.batch_decode(sequences, skip_special_tokens=True)
        scores = out.sequences_scores.tolist() if k > 1 else [0.0] * len(decoded)
        for j in range(len(part)):
            texts.append([t.strip() for t in decoded[j * k : (j + 1) * k]])
            seq_scores.append(scores[j * k : (j + 1) * k])
    ranked = rerank_batch(texts, knowledge, sequence_scores=seq_scores, weight=weight, explain=explain,
                          scorer=scorer, config=config, early_stop=early_stop)
    return [Generated(r.best_text, r) for r in ranked]
