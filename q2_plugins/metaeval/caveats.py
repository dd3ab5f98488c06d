"""Where a report's figures are not like for like: a metric covering only part of the responses, a reference figure
from another split or data version, BLEU against long knowledge. Each caveat is one sentence for the report's
"Caveats" section; ``markers`` tag the metric rows of the response-level table it concerns."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from q2_plugins.datasets.types import MetaEvalData

__all__ = ["LONG_KNOWLEDGE_WORDS", "PARTIAL", "LONG_BLEU", "find_caveats", "marked"]

#: mean knowledge length (words) above which BLEU against the knowledge is flagged
LONG_KNOWLEDGE_WORDS = 100
PARTIAL = "‡"
LONG_BLEU = "§"


def _coverage(report: dict[str, Any], n: int) -> tuple[list[str], dict[str, list[str]]]:
    block = report.get("response_level", {}).get("metrics", {})
    partial = {name: r["n"] for name, r in block.items() if r["n"] < n}
    if not partial:
        return [], {}
    listed = ", ".join(f"{name} ({k} of {n})" for name, k in partial.items())
    return ([f"{PARTIAL} partial coverage: {listed} score only part of the responses, so their figures are on "
             f"other responses than those of a metric scoring all {n} and not like for like with them (which "
             f"responses are unscored, and why, is in the response-level table and in report.json)."],
            {name: [PARTIAL] for name in partial})


def _long_bleu(report: dict[str, Any], data: MetaEvalData) -> tuple[list[str], dict[str, list[str]]]:
    block = report.get("response_level", {}).get("metrics", {})
    names = [name for name in block if name.split(" (")[0] == "BLEU"]
    if not names or not data.examples:
        return [], {}
    words = sum(len(ex.knowledge.split()) for ex in data.examples) / len(data.examples)
    if words <= LONG_KNOWLEDGE_WORDS:
        return [], {}
    auc = block[names[0]].get("roc_auc")
    at = f" (ROC AUC {auc:.3f})" if auc is not None else ""
    return ([f"{LONG_BLEU} long knowledge: the knowledge averages {words:.0f} words (as in CMU-DoG and Topical-Chat), "
             f"so BLEU, an n-gram precision of the response against the knowledge as reference, mostly measures "
             f"length and wording{at}; it is not comparable with its figures on short knowledge such as WoW's "
             f"single sentence."], {name: [LONG_BLEU] for name in names})


def _references(report: dict[str, Any], data: MetaEvalData) -> list[str]:
    out = []
    if "taxonomy" in report:
        ref = report["taxonomy"]["reference"]["name"]
        dev = data.benchmark == "BEGIN" and "dev" in Path(data.source).name.lower()
        what = "different data version" if dev else "different split and data version"
        out.append(f"{what}: the reference row ({ref}) was measured on BEGIN's development split of the preprint "
                   f"release; the other rows are on {data.name} ({len(data.examples)} responses of {data.source}); "
                   f"set side by side, they are not like for like.")
    if data.benchmark == "BEGIN v2":
        out.append("different data version: published BEGIN figures (the BEGIN paper's, TRUE's) are on BEGIN v1, "
                   "whose labels and examples differ from v2's (Fully attributable / Not fully attributable / "
                   "Generic); none is comparable with the figures here.")
    published = report.get("benchmark", {}).get("published")
    if published and not all(r["same_examples"] for r in published["rows"]):
        out.append(f"published figures: the rows marked not like for like are on other examples than the "
                   f"{published['published_n']} the published figures are on.")
    return out


def find_caveats(report: dict[str, Any], data: MetaEvalData) -> tuple[list[str], dict[str, list[str]]]:
    """The caveats of a report (sentences) and the markers of the metrics they concern (``{name: [marker]}``)."""
    texts: list[str] = list(data.caveats)
    markers: dict[str, list[str]] = {}
    for found, marks in (_coverage(report, len(data.examples)), _long_bleu(report, data)):
        texts += found
        for name, m in marks.items():
            markers.setdefault(name, []).extend(m)
    texts += _references(report, data)
    return texts, markers


def marked(name: str, markers: dict[str, Sequence[str]]) -> str:
    """``name`` with its caveat markers, for a table row."""
    return name + "".join(f" {m}" for m in markers.get(name, ()))
