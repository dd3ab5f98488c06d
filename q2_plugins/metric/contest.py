"""Early stop for ranking: responses that compete in groups (the candidates of one input), scored only as far as
it takes to know each group's winner.

A response's final score is the mean of its question scores (each in [0, 1]), else its fallback score (0, 0.5 or
1), else none (it ranks after every scored response). Between the filter's rounds, and once more before NLI, each
response still in play gets the lowest and highest score it can still end with (:func:`score_bounds`): a question
whose score is known counts as it is; a valid question whose knowledge answer or NLI label is still to come counts
anywhere in [0, 1] (so the steps ask the knowledge answers of a round's valid questions in that round, and NLI
labels each question and fallback as soon as they are known, :func:`~q2_plugins.metric.stages.stop_losers`);
questions the filter may still admit (up to one per open candidate in ``single`` mode, every untried one in ``all``
mode, within ``max_questions``) may or may not come, each in [0, 1]; with no question at all the fallback (or no
score) decides. Q²*'s questions without a knowledge answer may or may not count. The key a
group ranks by is ``scale * score + offset`` per response (``scale`` >= 0). A response whose highest key is below
another one's lowest key, by more than :data:`MARGIN`, cannot rank first: it is stopped (:attr:`Row.stopped
<q2_plugins.metric.runner.Row.stopped>`) and gets no more QA or NLI. The winner is the one full scoring gives, as
long as no component fails on a row still in play (a row error is not foreseen by the bounds: the caller scores
such a group again in full).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from q2_plugins.metric.components import Answer, AnswerKind, NLILabel
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.runner import Row, Slot, ValidQuestion
from q2_plugins.metric.scoring import NLI_SCORES, answer_f1, needs_nli, question_score

__all__ = ["MARGIN", "Contest", "Bounds", "score_bounds"]

#: how far apart two keys must be for the lower to be stopped (float sums in another order stay well inside it)
MARGIN = 1e-9

_UNSCORED = -math.inf


@dataclass(frozen=True)
class Bounds:
    """The lowest and highest score a response can still end with (``-inf``: it may end with no score)."""

    low: float
    high: float


def _mean_bound(fixed: Sequence[float], optional: Sequence[float], lowest: bool) -> float:
    """The lowest (or highest) mean of ``fixed`` (not empty) plus any subset of ``optional``. Greedy: the optional
    values that pull the mean down (up) most, while they do."""
    total, n = sum(fixed), len(fixed)
    for v in sorted(optional, reverse=not lowest):
        if (v < total / n) if lowest else (v > total / n):
            total, n = total + v, n + 1
        else:
            break
    return total / n


def _question_range(c: Q2Config, valid: ValidQuestion, answer: Optional[Answer],
                    label: Optional[NLILabel]) -> tuple[float, float, bool]:
    """``(low, high, optional)`` of one valid question's score: known once its knowledge answer is, and its NLI
    label where NLI decides it ([0, 1] until then); optional when Q²* may leave it out."""
    if answer is None:
        return 0.0, 1.0, c.discard_unanswerable
    f1 = answer_f1(valid.slot.candidate, answer, c.normalization)
    optional = c.discard_unanswerable and answer.kind is AnswerKind.NO_ANSWER
    if c.use_nli and needs_nli(answer, f1):
        if label is None:
            return 0.0, 1.0, optional
        f1 = question_score(f1, label)
    return f1, f1, optional


def _to_come(c: Q2Config, row: Row, slots: Sequence[Slot], count: int) -> tuple[int, bool]:
    """How many more valid questions the filter may still admit for ``row``, and whether the row may still get a
    budget error."""
    if row.full:
        return 0, False
    more = 0
    for s in slots:
        if not s.done:
            more += len(s.questions) - s.next if c.question_mode == "all" else 1
    limit = c.max_questions
    if limit and count + more > limit:
        if c.over_budget == "error":
            return min(more, limit - count), True
        more = max(0, limit - count)
    return more, False


def score_bounds(c: Q2Config, row: Row, slots: Sequence[Slot], valid: Sequence[ValidQuestion],
                 answer_of: Callable[[ValidQuestion], Optional[Answer]],
                 label_of: Callable[[ValidQuestion, Answer], Optional[NLILabel]] = lambda v, a: None,
                 fallback: Optional[NLILabel] = None) -> Bounds:
    """The :class:`Bounds` of ``row``'s final score, given its ``slots``, its ``valid`` questions so far and what is
    known of them: their knowledge answers (``answer_of``) and NLI labels (``label_of``; None while to come), and
    the row's fallback label."""
    if row.error is not None:
        return Bounds(_UNSCORED, _UNSCORED)
    fixed_lo, fixed_hi, opt_lo, opt_hi = [], [], [], []
    for v in valid:
        answer = answer_of(v)
        lo, hi, optional = _question_range(c, v, answer, None if answer is None else label_of(v, answer))
        (opt_lo if optional else fixed_lo).append(lo)
        (opt_hi if optional else fixed_hi).append(hi)
    more, may_fail = _to_come(c, row, slots, len(valid))
    opt_lo += [0.0] * more
    opt_hi += [1.0] * more
    # no question at all: the fallback's 0 / 0.5 / 1 (its label's, once known), or no score
    if not c.fallback:
        empty = (_UNSCORED, _UNSCORED)
    else:
        empty = (0.0, 1.0) if fallback is None else (NLI_SCORES[fallback],) * 2
    if fixed_lo:
        low, high = _mean_bound(fixed_lo, opt_lo, lowest=True), _mean_bound(fixed_hi, opt_hi, lowest=False)
    else:  # any subset of the optional ones, the empty one too
        low, high = min([empty[0], *opt_lo]), max([empty[1], *opt_hi])
    return Bounds(_UNSCORED if may_fail else low, high)


@dataclass
class Contest:
    """Responses of one ``score()`` call that compete in ``groups`` (lists of row indices, each group's candidates
    in their order); the ranking key of row ``i`` is ``scale[i] * score + offset[i]`` (default: the score).
    :meth:`prune` stops the rows that cannot rank first in their group; ``stopped`` counts them."""

    groups: list[list[int]]
    scale: Optional[list[float]] = None
    offset: Optional[list[float]] = None
    stopped: int = 0
    rows: Sequence[Row] = ()  # the call's rows (set by the scorer)
    #: rows whose bounds once said they end with a score (a row error after that was not foreseen)
    sure: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        seen = [i for g in self.groups for i in g]
        if len(seen) != len(set(seen)):
            raise ValueError("Expected each row in one group at most")
        for name in ("scale", "offset"):
            values = getattr(self, name)
            if values is not None and len(values) <= max(seen, default=-1):
                raise ValueError(f"Expected a {name} for every row of the groups")
        if self.scale is not None and any(s < 0 for s in self.scale):
            raise ValueError("Expected scale >= 0 (a key that grows with the score)")

    def _key(self, i: int, score: float) -> float:
        if score == _UNSCORED:
            return _UNSCORED
        return (1.0 if self.scale is None else self.scale[i]) * score + (0.0 if self.offset is None else
                                                                         self.offset[i])

    def prune(self, bounds: Callable[[Row], Bounds]) -> int:
        """Stop each row of the call (those the groups name by index; rows with an error are left as they are)
        whose highest key (from ``bounds``) is below the best lowest key of its group; returns how many it stopped
        now."""
        by_index = {r.index: r for r in self.rows}
        now = 0
        for group in self.groups:
            live = [by_index[i] for i in group if i in by_index and not by_index[i].stopped]
            if len(live) < 2:
                continue
            b = {r.index: bounds(r) for r in live}
            self.sure.update(i for i, x in b.items() if x.low != _UNSCORED)
            best_low = max(self._key(i, x.low) for i, x in b.items())
            if best_low == _UNSCORED:
                continue
            for r in live:
                if r.error is None and self._key(r.index, b[r.index].high) < best_low - MARGIN:
                    r.stopped = True
                    now += 1
        self.stopped += now
        return now

    def unforeseen(self) -> list[int]:
        """The rows that ended with an error their bounds had ruled out (a component failed on them): the stops
        in their group may be wrong, so the caller scores it again in full."""
        return [r.index for r in self.rows if r.error is not None and r.index in self.sure]
