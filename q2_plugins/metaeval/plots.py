"""Figures in the style of the paper's: precision / recall curves, score histograms per label, score robustness; and
confusion matrices of BEGIN labels.

matplotlib (the ``metaeval`` extra) through its object API (``matplotlib.figure.Figure``): no pyplot, no change to
the caller's backend or style; nothing is shown, files are written.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from q2_plugins.metaeval.deps import require
from q2_plugins.metaeval.experiments import MetaEvalRun, scored_examples

__all__ = ["plot_all", "plot_pr_curves", "plot_histograms", "plot_robustness", "plot_confusion"]

_STYLE = "seaborn-v0_8-darkgrid"  # the look of the paper's seaborn figures, without seaborn


@contextlib.contextmanager
def _figure(**kwargs: Any) -> Iterator[Any]:
    """A new figure drawn in the paper-like style (only inside this block)."""
    style = require("matplotlib.style")
    with style.context(_STYLE if _STYLE in style.available else "default"):
        yield require("matplotlib.figure").Figure(**kwargs)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "metric"


def plot_pr_curves(run: MetaEvalRun, path: str | Path) -> Path:
    """Precision vs recall of detecting inconsistent (left) and consistent (right) responses, one line per metric."""
    block = run.report["response_level"]["metrics"]
    with _figure(figsize=(12, 5)) as fig:
        _draw_pr_curves(fig, block)
        fig.savefig(path, dpi=110)
    return Path(path)


def _draw_pr_curves(fig: Any, block: dict[str, Any]) -> None:
    axes = fig.subplots(1, 2, sharey=True)
    for ax, positive in zip(axes, ("inconsistent", "consistent")):
        for name, r in block.items():
            curve = r.get(f"pr_{positive}")
            if curve:
                ax.plot(curve["recall"], curve["precision"], label=name, linewidth=1.6)
        ax.set_title(f"Precision vs. recall, {positive} response detection")
        ax.set_xlabel("Recall")
        ax.set_xlim(0, 1.0)
        ax.set_ylim(0, 1.02)
        ax.legend(title="Metric", loc="lower left")
    axes[0].set_ylabel("Precision")
    fig.tight_layout()


def plot_histograms(run: MetaEvalRun, folder: str | Path) -> list[Path]:
    """One figure per metric: histograms of response scores for inconsistent and consistent data (10 bins)."""
    paths = []
    for metric in run.metrics:
        kept, s = scored_examples(metric, run.data.examples)
        if not kept:
            continue
        y = np.array([ex.consistent for ex in kept], dtype=bool)
        lo, hi = min(0.0, float(s.min())), max(1.0, float(s.max()))
        path = Path(folder) / f"hist_{_slug(metric.name)}.png"
        with _figure(figsize=(11, 4.2)) as fig:
            axes = fig.subplots(1, 2, sharey=True)
            for ax, (label, mask, color) in zip(axes, (("inconsistent", ~y, "C3"), ("consistent", y, "C0"))):
                ax.hist(s[mask], bins=10, range=(lo, hi), color=color, edgecolor="white", alpha=0.85)
                ax.set_title(f"Histogram of response scores, {metric.name}, {label} data (n={int(mask.sum())})",
                             fontsize=10)
                ax.set_xlabel("Score" + (" (min-max normalised)" if not metric.bounded else ""))
            axes[0].set_ylabel("Count")
            fig.tight_layout()
            fig.savefig(path, dpi=110)
        paths.append(path)
    return paths


def plot_robustness(run: MetaEvalRun, path: str | Path) -> Path:
    """Mean system score against the share of inconsistent responses, with 95% intervals, one line per metric."""
    block = run.report["robustness"]
    levels = np.array(block["levels"], dtype=float)
    with _figure(figsize=(7, 5)) as fig:
        ax = fig.subplots()
        for i, (name, r) in enumerate(block["metrics"].items()):
            if "mean" not in r:
                continue
            mean, low, high = (np.array(r[k], dtype=float) for k in ("mean", "low", "high"))
            color = f"C{i % 10}"
            ax.plot(levels, mean, marker="o", markersize=3, color=color, label=name)
            ax.errorbar(levels, mean, yerr=[mean - low, high - mean], fmt="none", ecolor=color, capsize=3)
        ax.set_title("Score robustness")
        ax.set_xlabel("Proportion of inconsistent responses")
        ax.set_ylabel("Avg. score")
        ax.legend(title="Metric")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    return Path(path)


def _draw_confusion(ax: Any, block: dict[str, Any], title: str) -> None:
    counts = np.array(block["confusion"], dtype=float)
    totals = counts.sum(axis=1, keepdims=True)
    share = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)  # colour: share of the gold row
    ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0)
    labels = block["labels"]
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.grid(False)
    for i in range(len(labels)):
        for j in range(len(labels)):
            ax.text(j, i, f"{int(counts[i, j])}", ha="center", va="center",
                    color="white" if share[i, j] > 0.5 else "black", fontsize=9)
    ax.set_xlabel("Predicted")
    ax.set_ylabel("Gold")
    ax.set_title(f"{title}: accuracy {100 * block['accuracy']:.1f}%, macro-F1 {100 * block['macro_f1']:.1f}",
                 fontsize=10)


def plot_confusion(run: MetaEvalRun, folder: str | Path) -> list[Path]:
    """One figure per label source: five-way and three-way confusion matrices against BEGIN's gold labels (counts;
    colour = share of the gold label's row)."""
    paths = []
    for name, r in run.report["taxonomy"]["metrics"].items():
        if not r["n"]:
            continue
        path = Path(folder) / f"confusion_{_slug(name)}.png"
        with _figure(figsize=(12, 5)) as fig:
            axes = fig.subplots(1, 2, gridspec_kw={"width_ratios": [5, 3]})
            _draw_confusion(axes[0], r["five_way"], f"{name}, five-way (n={r['n']})")
            _draw_confusion(axes[1], r["three_way"], "three-way")
            fig.tight_layout()
            fig.savefig(path, dpi=110)
        paths.append(path)
    return paths


def plot_all(run: MetaEvalRun, folder: str | Path) -> list[Path]:
    """Every figure the run's experiments allow, written into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if "response_level" in run.report:
        paths.append(plot_pr_curves(run, folder / "pr_curve.png"))
        paths += plot_histograms(run, folder)
    if "robustness" in run.report:
        paths.append(plot_robustness(run, folder / "robustness.png"))
    if "taxonomy" in run.report:
        paths += plot_confusion(run, folder)
    return paths
