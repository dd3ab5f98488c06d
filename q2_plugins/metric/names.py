"""The names of Q²'s system figures, declared once: every front end (``q2 score``'s summary and ``.meta.json``,
``evaluate``'s ``compute`` and ``MetricInfo``, ParlAI's report, lm-eval's results, the scorer's torchmetrics-style
attributes) takes its names, ``higher_is_better`` and ``bounds`` from here; :data:`METRIC_INFO` is the metric itself
(a response's score and the system score: in [0, 1], higher is better).

``key`` is the name in a summary of Q²'s own (``q2 score``, ``.meta.json``, ``evaluate``); ``framework_key`` the name
in a framework's shared metric namespace (ParlAI's report, lm-eval's results), where a bare ``coverage`` could be any
metric's. ``per_response`` figures are means of one value per response: a framework that aggregates per-document
values itself (lm-eval) registers exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["MetricName", "Q2", "Q2_NO_NLI", "COVERAGE", "FALLBACK_RATE", "Q2_STDERR", "Q2_CI_LOW", "Q2_CI_HIGH",
           "COVERAGE_CI_LOW", "COVERAGE_CI_HIGH", "METRICS", "PER_RESPONSE", "METRIC_INFO", "INTERVAL_CONFIDENCE",
           "MEAN_INTERVAL_METHOD", "by_key"]

INTERVAL_CONFIDENCE = 0.95  # the level of every interval in a summary
#: what the interval of a mean score is (:func:`q2_plugins.metric.significance.mean_interval`), as every printed or
#: exported interval names it
MEAN_INTERVAL_METHOD = "Wilson score interval scaled by the scores' variance"


@dataclass(frozen=True)
class MetricName:
    """One system figure: its names, whether a higher value is better (None for a standard error), what it is, and
    the bounds of its values (None: unbounded)."""

    key: str
    framework_key: str
    higher_is_better: Optional[bool]
    description: str
    per_response: bool = False
    bounds: Optional[tuple[float, float]] = (0.0, 1.0)

    def direction(self) -> str:
        """``"in [0, 1], higher is better"``: the figure's bounds and direction as a front end's text says them."""
        parts = [f"in [{self.bounds[0]:g}, {self.bounds[1]:g}]" if self.bounds else "",
                 {True: "higher is better", False: "lower is better", None: ""}[self.higher_is_better]]
        return ", ".join(p for p in parts if p)


Q2 = MetricName("q2", "q2", True, "mean Q2 over scored responses (with NLI)", per_response=True)
Q2_NO_NLI = MetricName("q2_no_nli", "q2_no_nli", True, "the same without NLI (Q2 w/o NLI)", per_response=True)
COVERAGE = MetricName("coverage", "q2_coverage", True,
                      "share of responses (errors excluded) with at least one valid question", per_response=True)
FALLBACK_RATE = MetricName("fallback_rate", "q2_fallback_rate", False,
                           "share of responses (errors excluded) scored by the end-to-end NLI fallback",
                           per_response=True)
Q2_STDERR = MetricName("q2_stderr", "q2_stderr", None, "standard error of q2 (sample standard deviation / sqrt(n))",
                       bounds=None)
Q2_CI_LOW = MetricName("q2_ci_low", "q2_ci_low", True,
                       f"lower bound of q2's 95% interval ({MEAN_INTERVAL_METHOD})")
Q2_CI_HIGH = MetricName("q2_ci_high", "q2_ci_high", True,
                        f"upper bound of q2's 95% interval ({MEAN_INTERVAL_METHOD})")
COVERAGE_CI_LOW = MetricName("coverage_ci_low", "q2_coverage_ci_low", True,
                             "lower bound of coverage's 95% interval (Wilson)")
COVERAGE_CI_HIGH = MetricName("coverage_ci_high", "q2_coverage_ci_high", True,
                              "upper bound of coverage's 95% interval (Wilson)")

METRICS: tuple[MetricName, ...] = (Q2, Q2_NO_NLI, COVERAGE, FALLBACK_RATE, Q2_STDERR, Q2_CI_LOW, Q2_CI_HIGH,
                                   COVERAGE_CI_LOW, COVERAGE_CI_HIGH)
PER_RESPONSE: tuple[MetricName, ...] = tuple(m for m in METRICS if m.per_response)
#: the metric: Q² of a response and of a system, in [0, 1], higher is better
METRIC_INFO: MetricName = Q2


def by_key(key: str) -> MetricName:
    """The declared figure of summary key ``key``."""
    for m in METRICS:
        if m.key == key:
            return m
    raise KeyError(f"{key!r} is no declared Q2 figure; declared: {[m.key for m in METRICS]}")
