"""The ``variants`` experiment: the paper's Table 7, Q² and coverage of its cumulative pipeline variants per subset.

Base (the top beam question of each candidate only, personal questions kept) -> + the personal-question filter ->
+ top-k beam questions (the next beam question is tried while none passes: the paper's main pipeline) ->
+ coreference (pronouns of the response resolved over the history, :mod:`q2_plugins.backends.hf.coref`). Each
variant scores every response-level example; coverage is the share with at least one valid question, Q² the mean
over the scored ones (fallback included), as :class:`~q2_plugins.metric.results.Q2Stats` counts them.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from q2_plugins.datasets.types import Example
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.progress import scoring_progress
from q2_plugins.metric.results import Q2Stats

__all__ = ["VARIANTS", "variant_configs", "variants_table", "variants_markdown"]

#: (name, the settings it adds to the ones before it)
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("base", {"remove_personal": False, "qg_num_return": 1}),
    ("+ personal-question filter", {"remove_personal": True}),
    ("+ top-k questions", {"qg_num_return": None}),  # None: the configured number (5, the paper's)
    ("+ coreference", {"coref": True}),
)


def variant_configs(config: Q2Config) -> list[tuple[str, Q2Config]]:
    """The cumulative variants on top of ``config`` (its models, its number of beam questions for top-k)."""
    out, changes = [], {}
    for name, adds in VARIANTS:
        changes.update({k: (getattr(config, k) if v is None else v) for k, v in adds.items()})
        out.append((name, config.replace(**changes)))
    return out


def variants_table(examples: Sequence[Example], config: Q2Config, make_scorer: Callable[[Q2Config], Any],
                   progress: bool = False) -> dict[str, Any]:
    """Score ``examples`` with each variant (``make_scorer(config)`` builds its scorer) and tabulate Q² and
    coverage per subset and over all."""
    subsets = list(dict.fromkeys(ex.subset for ex in examples)) + ["all"]
    rows = []

    for name, cfg in variant_configs(config):
        scorer = make_scorer(cfg)
        with scoring_progress(scorer, len(examples), progress) as shown:
            result = scorer.score(responses=[ex.response for ex in examples],
                                  knowledge=[ex.knowledge for ex in examples],
                                  history=[ex.history for ex in examples], progress=shown)
        cells = {}
        for subset in subsets:
            stats = Q2Stats.of(r for r, ex in zip(result.responses, examples) if subset in ("all", ex.subset))
            cells[subset] = {"q2": _or_none(stats.score), "coverage": _or_none(stats.coverage), "n": stats.n,
                             "errors": stats.n_errors}
        rows.append({"variant": name, "signature": str(result.signature), "cells": cells})
    return {"experiment": "variants", "subsets": subsets, "rows": rows}


def _or_none(x: float) -> Optional[float]:
    return None if x != x else x  # NaN (nothing scored) -> None


def variants_markdown(table: dict[str, Any]) -> str:
    """Table 7's layout: a row per variant, Q² and coverage per subset."""
    subsets = table["subsets"]
    head = "| variant | " + " | ".join(f"{s} Q² | {s} coverage" for s in subsets) + " |"
    lines = ["## Q² variants (the paper's Table 7)", "", head, "|---|" + "---:|---:|" * len(subsets)]
    for row in table["rows"]:
        cells = []
        for s in subsets:
            c = row["cells"][s]
            cells += ["n/a" if c["q2"] is None else f"{c['q2']:.4f}",
                      "n/a" if c["coverage"] is None else f"{100 * c['coverage']:.2f}%"]
        lines.append(f"| {row['variant']} | " + " | ".join(cells) + " |")
    n = table["rows"][0]["cells"]["all"]["n"] if table["rows"] else 0
    errors = {row["variant"]: row["cells"]["all"]["errors"] for row in table["rows"] if row["cells"]["all"]["errors"]}
    lines += ["", f"{n} responses; coverage = share with at least one valid question; Q² = mean over scored "
                  f"responses (the end-to-end NLI fallback included)."]
    if errors:
        lines.append(f"Rows with errors (not scored): {errors}")
    lines += ["", "Signatures:"] + [f"- {row['variant']}: {row['signature']}" for row in table["rows"]]
    return "\n".join(lines)
