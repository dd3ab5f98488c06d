#!/usr/bin/env python
"""Audit the training-data recipes on the Q² WoW folder (default settings, seed 0): the figures that say whether a
classifier trained on them could learn noise or surface cues instead of the labels.

Each figure is computed here from the written rows with its own small rule, not read from the recipe's report:

* entailment rows breaking BEGIN's filter (a first-person pronoun, or under 25% of the response's words in the
  evidence);
* negations landing on a hedge (the negated verb's clause has a first- or second-person subject: "i do know");
* hallucination and off-topic rows sharing a content word with their evidence;
* responses ending in a word with attached punctuation ("great!"), generic rows against all others;
* antonym rows; Conv-FEVER's unrelated pairs' three-way labels; rows repeating another row's (evidence, response,
  label); entity swaps leaving "a" / "an" disagreeing with the next word.

    python benchmarks/audit_recipes.py [--data DIR] [--json out/audit.json]

Measures and prints; asserts nothing (the unit tests pin the rules).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from q2_plugins.perturb import PerturbOptions  # noqa: E402
from q2_plugins.recipes import make_training_set, read_sources  # noqa: E402
from q2_plugins.spacy_parts import load_spacy  # noqa: E402

FIRST_PERSON = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"}
SPEAKERS = {"i", "we", "you"}
ATTACHED = re.compile(r"\w[^\w\s]+$")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def breaks_begin_filter(response: str, evidence: str) -> bool:
    ws, ev = words(response), set(words(evidence))
    return bool(FIRST_PERSON & set(ws)) or not ws or sum(w in ev for w in ws) / len(ws) < 0.25


def content(doc: Any) -> set[str]:
    return {t.lemma_.lower() for t in doc if not (t.is_stop or t.is_punct or t.is_space)}


def on_hedge(nlp: Any, original: str, negated: str) -> bool:
    """Whether the first changed character of ``negated`` lies in a clause whose subject is the speaker or listener."""
    at = next((n for n, (a, b) in enumerate(zip(original, negated)) if a != b), min(len(original), len(negated)))
    doc = nlp(original)
    tok = next((t for t in doc if t.idx <= at <= t.idx + len(t.text)), None) or doc[-1]
    tok = next((t for t in reversed(doc) if t.idx + len(t.text) <= at), tok)  # the verb before the insertion
    clause = tok.head if tok.dep_ in ("aux", "auxpass", "neg") else tok
    return any(c.dep_ in ("nsubj", "nsubjpass") and c.lower_ in SPEAKERS for c in clause.children)


def article_disagreements(rows: list[dict[str, Any]]) -> int:
    bad = 0
    for r in rows:
        for art, nxt in re.findall(r"(?<!\w)(a|an) (\w+)", r["response"], flags=re.IGNORECASE):
            vowel = nxt[0].lower() in "aeiou"
            bad += (art.lower() == "an") != vowel and not nxt[0].isdigit()
    return bad


def audit(data: Path) -> dict[str, Any]:
    path = data / "q2_wow"
    sources = read_sources(str(path), PerturbOptions(inputs=(str(path),), output="-"))
    original = {s.id: s.response for s in sources}
    nlp = load_spacy("en_core_web_sm")
    out: dict[str, Any] = {"grounded_rows": len(sources)}
    made = {}
    for recipe in ("begin", "conv-fever"):
        rows, _ = make_training_set(sources, recipe=recipe, seed=0, nlp=nlp)
        made[recipe] = [r.to_dict() for r in rows]
    begin, fever = made["begin"], made["conv-fever"]

    def of(rows: list[dict[str, Any]], *methods: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["method"] in methods]

    ent = [r for r in begin if r["label"] == "entailment"]
    out["entailment_breaking_filter"] = [sum(breaks_begin_filter(r["response"], r["evidence"]) for r in ent),
                                         len(ent)]
    for name, rows in (("begin_negation", of(begin, "negation")), ("conv_fever_negated_response",
                                                                   of(fever, "negated_response"))):
        out[f"{name}_on_hedge"] = [sum(on_hedge(nlp, original[r["source_id"]], r["response"]) for r in rows),
                                   len(rows)]
    for label in ("hallucination", "off-topic"):
        rows = [r for r in begin if r["label"] == label]
        shared = sum(bool(content(nlp(r["response"])) & content(nlp(r["evidence"]))) for r in rows)
        out[f"{label}_sharing_a_content_word"] = [shared, len(rows)]
    generic = [r for r in begin if r["label"] == "generic"]
    others = [r for r in begin if r["label"] != "generic"]
    out["attached_punctuation_generic"] = [sum(bool(ATTACHED.search(r["response"])) for r in generic), len(generic)]
    out["attached_punctuation_others"] = [sum(bool(ATTACHED.search(r["response"])) for r in others), len(others)]
    out["distinct_generic_responses"] = len({r["response"] for r in generic})
    out["antonym_rows"] = len(of(begin, "antonym"))
    out["conv_fever_unrelated_label3"] = dict(Counter(r["label3"] for r in of(fever, "random_response",
                                                                             "random_knowledge")))
    for recipe, rows in made.items():
        keys = Counter((r["evidence"], r["response"], r["label"]) for r in rows)
        out[f"{recipe}_duplicate_rows"] = sum(c - 1 for c in keys.values())
        out[f"{recipe}_rows"] = len(rows)
        out[f"{recipe}_by_method"] = dict(Counter(r["method"] for r in rows))
    out["entity_swap_article_disagreements"] = [article_disagreements(of(fever, "entity_swap")),
                                                len(of(fever, "entity_swap"))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--json")
    args = ap.parse_args()
    figures = audit(Path(args.data))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(sys.modules["q2_plugins.recipes"].__file__).parent).stdout.strip()
    figures["commit"] = commit or "unknown"
    for key, value in figures.items():
        if isinstance(value, list) and len(value) == 2:
            value = f"{value[0]} of {value[1]} ({100 * value[0] / value[1]:.1f}%)" if value[1] else "0 of 0"
        print(f"{key}: {value}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
