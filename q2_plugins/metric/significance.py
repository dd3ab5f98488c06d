"""Confidence intervals and paired significance tests of system figures: one implementation for every front end.

A system figure is a ratio of per-response sums, ``sum(num) / sum(den)``: Q² is the sum of scores over the number
of scored responses (a response without a score has ``num = den = 0``, so it leaves the mean as Q² defines it);
coverage is the number of responses with a valid question over the responses without an error. Resampling
responses resamples both sums together, so every test below sees the figure exactly as the system score defines it.

- :func:`paired_bootstrap`: Koehn's paired bootstrap as sacrebleu's ``--paired-bs`` resamples: the same resampled
  response indices for every system; per system the percentile interval of its resampled figure; per system and
  baseline the percentile interval of the difference and a two-sided p-value from the resampled differences
  centred on the null (:func:`bootstrap_p_value`; sacrebleu's own rule rejects a true null about twice as often as
  its level, which the benchmark shows).
- :func:`paired_ar`: approximate randomisation as sacrebleu's ``--paired-ar``: each trial swaps every response's
  pair of outputs with probability 1/2 (one swap pattern per trial, shared by all systems); the two-sided p-value is
  ``(#{|a* - b*| >= |a - b|} + 1) / (T + 1)`` (sacrebleu counts ``>`` only, which calls tied systems different).
- :func:`mean_interval` / :func:`proportion_interval`: closed-form intervals inside [0, 1] from additive sums (the
  summary of a run, which combines across batches and workers by adding; every front end and export of a mean score
  uses :func:`mean_interval`).

Resampling is vectorised: the bootstrap draws each block of resamples as counts per response and reduces them with
one matrix product; approximate randomisation does the same with its swap patterns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

__all__ = [
    "Interval",
    "SystemFigure",
    "PairedTest",
    "ratio",
    "bootstrap_figures",
    "bootstrap_p_value",
    "percentile_interval",
    "paired_bootstrap",
    "paired_ar",
    "paired_test",
    "mean_interval",
    "mean_interval_of",
    "proportion_interval",
    "normal_quantile",
    "systems_arrays",
]

_BLOCK = 4_000_000  # resampled entries (resamples x responses) held at once


@dataclass(frozen=True)
class Interval:
    """A two-sided interval at ``confidence`` (bounds None when undefined, e.g. no scored response)."""

    low: Optional[float]
    high: Optional[float]
    confidence: float

    def to_dict(self) -> dict[str, Optional[float]]:
        return {"low": self.low, "high": self.high}


@dataclass(frozen=True)
class SystemFigure:
    """One system's figure in a paired test, and its difference to the baseline (None for the baseline itself).
    The intervals come from the bootstrap; approximate randomisation gives none."""

    value: Optional[float]
    interval: Optional[Interval] = None
    diff: Optional[float] = None
    diff_interval: Optional[Interval] = None
    p_value: Optional[float] = None


@dataclass(frozen=True)
class PairedTest:
    """The settings of a paired test: ``kind`` is ``"bs"`` or ``"ar"``, ``n_samples`` its resamples or trials."""

    kind: str
    n_samples: int
    seed: int
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.kind not in ("bs", "ar"):
            raise ValueError(f"Expected the test to be 'bs' or 'ar', but got {self.kind!r}")
        if self.n_samples < 1:
            raise ValueError(f"Expected at least one resample / trial, but got {self.n_samples}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"Expected a confidence level in (0, 1), but got {self.confidence}")


def _float(x: float) -> Optional[float]:
    x = float(x)
    return None if math.isnan(x) else x


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` elementwise, NaN where ``den`` is 0 (a figure over no responses)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def percentile_interval(values: np.ndarray, confidence: float = 0.95, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of resampled values (NaNs ignored): for 0.95 the 2.5th and 97.5th percentiles."""
    tail = round(100 * (1 - confidence) / 2, 10)  # 2.5, not 2.5000000000000022
    return np.nanpercentile(values, tail, axis=axis), np.nanpercentile(values, 100 - tail, axis=axis)


def _check(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    num = np.atleast_2d(np.asarray(num, dtype=np.float64))
    den = np.atleast_2d(np.asarray(den, dtype=np.float64))
    if num.shape != den.shape or num.ndim != 2 or num.shape[1] == 0:
        raise ValueError(f"Expected num and den of one shape (systems, responses), but got {num.shape} and {den.shape}")
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        raise ValueError("num and den must be finite: a response without a score has num = den = 0")
    return num, den


def _blocks(total: int, n: int) -> Iterator[int]:
    per = max(1, _BLOCK // n)
    for start in range(0, total, per):
        yield min(per, total - start)


def _resampled_sums(num: np.ndarray, den: np.ndarray, n_samples: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap sums of ``num`` and ``den`` per system, shape ``(n_samples, systems)`` each: every resample
    draws ``n`` response indices with replacement, shared by all systems."""
    k, n = num.shape
    stacked = np.concatenate([num, den]).T  # (n, 2k)
    out = np.empty((n_samples, 2 * k))
    done = 0
    for size in _blocks(n_samples, n):
        idx = rng.integers(0, n, size=(size, n), dtype=np.int64)
        idx += (np.arange(size) * n)[:, None]
        counts = np.bincount(idx.ravel(), minlength=size * n).reshape(size, n)
        out[done:done + size] = counts.astype(np.float64) @ stacked
        done += size
    return out[:, :k], out[:, k:]


def bootstrap_figures(num: np.ndarray, den: np.ndarray, n_samples: int, seed: Optional[int]) -> np.ndarray:
    """Every system's figure on each of ``n_samples`` paired bootstrap resamples, shape ``(n_samples, systems)``."""
    num, den = _check(num, den)
    s_num, s_den = _resampled_sums(num, den, n_samples, np.random.default_rng(seed))
    return ratio(s_num, s_den)


def paired_bootstrap(num: np.ndarray, den: np.ndarray, test: PairedTest) -> list[SystemFigure]:
    """Paired bootstrap resampling of the figures ``num[j].sum() / den[j].sum()`` of systems ``j`` (row 0 is the
    baseline), with ``test.n_samples`` resamples drawn from ``default_rng(test.seed)``."""
    return paired_test([(num, den)], test)[0]


def paired_test(figures: Sequence[tuple[np.ndarray, np.ndarray]], test: PairedTest) -> list[list[SystemFigure]]:
    """The paired test of ``test.kind`` on several figures of the same systems (e.g. Q² and coverage), each given
    as ``(num, den)`` of shape (systems, responses): one set of resamples or swap patterns serves them all."""
    checked = [_check(num, den) for num, den in figures]
    if len({c[0].shape for c in checked}) != 1:
        raise ValueError(f"Expected figures of one shape, but got {[c[0].shape for c in checked]}")
    k = checked[0][0].shape[0]
    num = np.concatenate([c[0] for c in checked])
    den = np.concatenate([c[1] for c in checked])
    if test.kind == "ar":
        return [_ar_figures(c[0], c[1], test) for c in checked]
    values = bootstrap_figures(num, den, test.n_samples, test.seed)
    return [_bs_figures(c[0], c[1], values[:, i * k:(i + 1) * k], test) for i, c in enumerate(checked)]


def _bs_figures(num: np.ndarray, den: np.ndarray, values: np.ndarray, test: PairedTest) -> list[SystemFigure]:
    """Figures, intervals, differences and p-values from the resampled figures ``values`` (resamples, systems)."""
    actual = ratio(num.sum(axis=1), den.sum(axis=1))
    low, high = percentile_interval(values, test.confidence, axis=0)
    out = [SystemFigure(_float(actual[0]), Interval(_float(low[0]), _float(high[0]), test.confidence))]
    for j in range(1, num.shape[0]):
        diffs = values[:, j] - values[:, 0]
        d_low, d_high = percentile_interval(diffs, test.confidence, axis=0)
        diff = actual[j] - actual[0]
        p = bootstrap_p_value(diffs, diff)
        out.append(SystemFigure(_float(actual[j]), Interval(_float(low[j]), _float(high[j]), test.confidence),
                                _float(diff), Interval(_float(d_low), _float(d_high), test.confidence), _float(p)))
    return out


def bootstrap_p_value(diffs: np.ndarray, observed: float, rule: str = "centred") -> float:
    """Two-sided p-value of a difference from its bootstrap resamples ``diffs`` (NaNs ignored).

    ``"centred"`` (used here): the resampled differences shifted to mean the null, ``(#{|d* - d| >= |d|} + 1) /
    (B + 1)``. ``"sacrebleu"``: sacrebleu's ``--paired-bs`` rule, ``(#{|d*| - mean|d*| > |d|} + 1) / (B + 1)``,
    which rejects a true null more often than the level says (``benchmarks/bench_significance.py`` measures both)."""
    d = np.asarray(diffs, dtype=np.float64)
    d = d[~np.isnan(d)]
    if not d.size or math.isnan(observed):
        return math.nan
    if rule == "sacrebleu":
        absd = np.abs(d)
        return _p_value(absd - absd.mean(), abs(observed), strict=True)
    if rule != "centred":
        raise ValueError(f"Expected the rule 'centred' or 'sacrebleu', but got {rule!r}")
    eps = 1e-12 * max(1.0, abs(observed))
    return (int(np.count_nonzero(np.abs(d - observed) >= abs(observed) - eps)) + 1) / (d.size + 1)


def _p_value(stats: np.ndarray, observed: float, strict: bool = False) -> float:
    """``(#{stats >= observed} + 1) / (len(stats) + 1)``, equality up to float rounding, as SciPy's
    ``permutation_test`` counts. sacrebleu (``strict``) counts only ``stats > observed``: with the ties of Q²'s
    discrete scores that makes a system "significantly different" from itself (p = 1 / (T + 1))."""
    eps = 1e-12 * max(1.0, abs(observed))
    hits = stats > observed + eps if strict else stats >= observed - eps
    return (int(np.count_nonzero(hits)) + 1) / (stats.size + 1)


def paired_ar(num: np.ndarray, den: np.ndarray, test: PairedTest) -> list[SystemFigure]:
    """Approximate randomisation of each system (rows 1..) against the baseline (row 0): ``test.n_samples``
    trials, each swapping every response's pair of outputs with probability 1/2 (patterns from
    ``default_rng(test.seed)``, shared by all systems). Gives values, differences and p-values, no intervals."""
    return paired_test([(num, den)], test)[0]


def _ar_figures(num: np.ndarray, den: np.ndarray, test: PairedTest) -> list[SystemFigure]:
    k, n = num.shape
    rng = np.random.default_rng(test.seed)
    actual = ratio(num.sum(axis=1), den.sum(axis=1))
    # swapping a response moves (base - sys) from one side to the other: A* = sum(sys) + sel @ (base - sys)
    delta = np.concatenate([num[0] - num[1:], den[0] - den[1:]]).T  # (n, 2(k-1))
    moved = np.empty((test.n_samples, 2 * (k - 1)))
    done = 0
    for size in _blocks(test.n_samples, n):
        sel = rng.integers(2, size=(size, n), dtype=bool)  # as sacrebleu draws its swap patterns
        moved[done:done + size] = sel.astype(np.float64) @ delta
        done += size
    out = [SystemFigure(_float(actual[0]))]
    for j in range(1, k):
        m_num, m_den = moved[:, j - 1], moved[:, k - 1 + j - 1]
        a = ratio(num[j].sum() + m_num, den[j].sum() + m_den)
        b = ratio(num[0].sum() - m_num, den[0].sum() - m_den)
        diff = actual[j] - actual[0]
        stats = np.abs(a - b)
        p = _p_value(stats[~np.isnan(stats)], abs(diff)) if not np.isnan(diff) else math.nan
        out.append(SystemFigure(_float(actual[j]), diff=_float(diff), p_value=_float(p)))
    return out


def normal_quantile(confidence: float) -> float:
    """The two-sided standard-normal quantile of ``confidence`` (1.959964 for 0.95)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def mean_interval(n: int, total: float, total_sq: float, confidence: float = 0.95
                  ) -> tuple[Optional[float], Optional[Interval]]:
    """Standard error and interval of a mean of scores in [0, 1] from its additive sums (``n`` scores, their sum and
    sum of squares): the one interval of a mean score that every front end prints or exports. None for fewer than
    two scores.

    The standard error is ``s / sqrt(n)`` with the sample standard deviation ``s`` (the one lm-eval reports for a
    ``mean``). The interval (:data:`q2_plugins.metric.names.MEAN_INTERVAL_METHOD`) is Wilson's score interval with
    the binomial variance ``p (1 - p)`` scaled by the dispersion the scores show, ``phi = s^2 / (mean (1 - mean))``
    (a quasi-binomial model: ``n / phi`` scores' worth of information): it lies inside [0, 1], is Wilson's own
    interval for 0/1 scores (up to the ``n - 1`` of ``s``), and nears the normal interval ``mean +- z s / sqrt(n)``
    away from the bounds. All scores equal to 0 or to 1 take ``phi = 1`` (the binomial case)."""
    if n < 2:
        return None, None
    mean = total / n
    if not -1e-9 <= mean <= 1 + 1e-9:
        raise ValueError(f"Expected scores in [0, 1], but their mean is {mean}")
    mean = min(1.0, max(0.0, mean))
    var = max(0.0, (total_sq - n * mean * mean) / (n - 1))
    stderr = math.sqrt(var / n)
    spread = mean * (1 - mean)
    phi = var / spread if spread > 0 else 1.0
    z = normal_quantile(confidence)
    a = z * z * phi / n  # z^2 / n_eff
    centre = (mean + a / 2) / (1 + a)
    half = z * math.sqrt(stderr * stderr + a * a / (4 * z * z)) / (1 + a) if a else 0.0
    return stderr, Interval(max(0.0, centre - half), min(1.0, centre + half), confidence)


def mean_interval_of(values: Sequence[Optional[float]], confidence: float = 0.95
                     ) -> tuple[Optional[float], Optional[Interval]]:
    """:func:`mean_interval` of the scores among ``values`` (a None or NaN, a response without a score, is left out,
    as the mean leaves it): what a front end that holds one value per response (lm-eval, LightEval, Inspect, the
    exports) gives."""
    kept = [float(v) for v in values if v is not None and not math.isnan(v)]
    return mean_interval(len(kept), sum(kept), sum(v * v for v in kept), confidence)


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> Optional[Interval]:
    """Wilson score interval of the proportion ``k / n`` (None when ``n`` is 0)."""
    if n <= 0:
        return None
    z = normal_quantile(confidence)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(max(0.0, centre - half), min(1.0, centre + half), confidence)


def systems_arrays(values: Sequence[Sequence[Optional[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """``num`` and ``den`` of mean figures from per-response values (None for a response without one)."""
    den = np.array([[v is not None for v in row] for row in values], dtype=np.float64)
    num = np.array([[0.0 if v is None else float(v) for v in row] for row in values], dtype=np.float64)
    return num, den
