#!/usr/bin/env python
"""Audit the training-data recipes on the Q² WoW folder (default settings, seed 0): the figures that say whether a
classifier trained on them could learn noise or surface cues instead of the labels, and a sheet to read them by.

Each figure is computed here from the written rows with its own small rule, not read from the recipe's report:

* entailment rows breaking BEGIN's filter (a first-person pronoun, or under 25% of the response's words in the
  evidence);
* negations landing on a hedge (the negated verb's clause has a first- or second-person subject: "i do know");
* hallucination rows whose response comes from a row of the same topic (or is the row's own), and off-topic rows whose
  response names the topic or shares a content word with the evidence;
* negated knowledge whose negated clause holds a content word of the response beyond its subject (the claim the
  negation must deny), and negations landing in a temporal or relative clause or reading "not also / only";
* responses ending in a word with attached punctuation ("great!"), generic rows against all others;
* antonym rows; Conv-FEVER's unrelated pairs' three-way labels; rows repeating another row's (evidence, response,
  label); entity swaps leaving "a" / "an" disagreeing with the next word;
* off-topic rows' content overlap with their evidence (the share of the response's content lemmas that the evidence
  has, averaged), the silver set's beside BEGIN v1 dev's human-labelled off-topic rows (bundled), and how many
  off-topic rows were drawn from the same topic as BEGIN draws them (the rest: the other-topic fallback);
* the surface probe: logistic regression on 12 surface features of a row (lengths, punctuation, "?", "!", "not",
  first and second person, overlap with the evidence both ways, new content words, length ratio), trained on 70% of
  the source rows and tested on the rest: its held-out accuracy, overall and by label, against the majority label.

``--read K --seed S`` prints a reading sheet instead: K random rows per label of both recipes (BEGIN's five labels,
Conv-FEVER's three-way ones), each with the rule that made it, to mark by the papers' definitions (BEGIN appendix B:
same topic as the evidence? then supported / contradicted); ``--sheet FILE`` writes it as JSON lines with empty
``verdict`` and ``reason`` fields.

    python benchmarks/audit_recipes.py [--data DIR] [--json out/audit.json]
    python benchmarks/audit_recipes.py --read 25 --seed 41 [--sheet out/sheet.jsonl]

Measures and prints; asserts nothing (the unit tests pin the rules).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.datasets.grounded import read_sources  # noqa: E402
from q2_plugins.metric.spacy_parts import load_spacy  # noqa: E402
from q2_plugins.training import examples  # noqa: E402
from q2_plugins.training.perturb import PerturbOptions  # noqa: E402
from q2_plugins.training.recipes import make_training_set  # noqa: E402

FIRST_PERSON = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"}
SECOND_PERSON = {"you", "your", "yours", "yourself"}
SPEAKERS = {"i", "we", "you"}
ATTACHED = re.compile(r"\w[^\w\s]+$")
TEMPORAL = {"when", "while", "after", "before", "until", "till", "since", "as", "once", "whenever"}
FOCUS = {"also", "only", "just", "even", "merely", "simply", "solely", "too"}
HANGING = {"relcl", "acl", "advcl", "ccomp", "parataxis", "csubj", "appos"}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def breaks_begin_filter(response: str, evidence: str) -> bool:
    ws, ev = words(response), set(words(evidence))
    return bool(FIRST_PERSON & set(ws)) or not ws or sum(w in ev for w in ws) / len(ws) < 0.25


def content(doc: Any) -> set[str]:
    return {t.lemma_.lower() for t in doc if not (t.is_stop or t.is_punct or t.is_space)}


def changed_token(nlp: Any, original: str, changed: str) -> Any:
    """The token of ``original`` at (or just before) the first character where ``changed`` differs: the edited verb."""
    at = next((n for n, (a, b) in enumerate(zip(original, changed)) if a != b), min(len(original), len(changed)))
    doc = nlp(original)
    tok = next((t for t in doc if t.idx <= at <= t.idx + len(t.text)), None) or doc[-1]
    return next((t for t in reversed(doc) if t.idx + len(t.text) <= at), tok)


def on_hedge(nlp: Any, original: str, negated: str) -> bool:
    """Whether the first changed character of ``negated`` lies in a clause whose subject is the speaker or listener."""
    tok = changed_token(nlp, original, negated)
    clause = tok.head if tok.dep_ in ("aux", "auxpass", "neg") else tok
    return any(c.dep_ in ("nsubj", "nsubjpass") and c.lower_ in SPEAKERS for c in clause.children)


def negation_problem(nlp: Any, original: str, negated: str, other: str) -> str:
    """"temporal / relative", "not also / only", "claim not held" or "" for one negated text: where the negated verb's
    clause sits, what follows the negation, and whether the clause (without its subject and the clauses hanging from
    it) holds a content word of ``other``."""
    tok = changed_token(nlp, original, negated)
    clause = tok.head if tok.dep_ in ("aux", "auxpass") else tok
    walk = clause
    while True:
        marks = {c.lower_ for c in walk.children if c.dep_ in ("mark", "advmod") and c.i < walk.i}
        if walk.dep_ in ("relcl", "acl") or marks & TEMPORAL:
            return "temporal / relative"
        if walk.dep_ not in ("ccomp", "xcomp", "conj", "advcl") or walk.head == walk:
            break
        walk = walk.head
    follow = re.match(r"\w+(?:\s*not|\s*n't)?\s+(\w+)", negated[tok.idx:])
    if follow and follow.group(1).lower() in FOCUS:
        return "not also / only"
    held, stack = [], [c for c in clause.children if c.dep_ not in ("nsubj", "nsubjpass", "expl", "csubj")]
    while stack:
        t = stack.pop()
        if t.dep_ in HANGING - ({"ccomp"} if clause.lemma_ == "be" else set()) or (
                t.dep_ == "conj" and t.pos_ in ("VERB", "AUX")):
            continue
        held.append(t)
        stack += list(t.children)
    if not content(held) & content(nlp(other)):
        return "claim not held"
    return ""


def content_overlap(nlp: Any, pairs: list[tuple[str, str]]) -> float:
    """The mean share of a response's content lemmas that its evidence has, over (response, evidence) ``pairs``."""
    shares = []
    for response, evidence in pairs:
        mine = content(nlp(response))
        shares.append(len(mine & content(nlp(evidence))) / len(mine) if mine else 0.0)
    return round(sum(shares) / len(shares), 3) if shares else 0.0


def begin_off_topic(data: Path) -> list[tuple[str, str]]:
    """(response, evidence) of BEGIN v1 dev's rows labelled off-topic."""
    import csv

    with (data / "begin_dev" / "dev_05_24_21.tsv").open(newline="") as f:
        return [(r["response"], r["evidence"]) for r in csv.DictReader(f, delimiter="\t")
                if r["gold label"] == "off-topic"]


def article_disagreements(rows: list[dict[str, Any]]) -> int:
    bad = 0
    for r in rows:
        for art, nxt in re.findall(r"(?<!\w)(a|an) (\w+)", r["response"], flags=re.IGNORECASE):
            vowel = nxt[0].lower() in "aeiou"
            bad += (art.lower() == "an") != vowel and not nxt[0].isdigit()
    return bad


def surface_features(row: dict[str, Any]) -> list[float]:
    """12 surface features of a row: what a classifier can see without reading."""
    resp, ev = words(row["response"]), words(row["evidence"])
    rs, es = set(resp), set(ev)
    n = max(len(resp), 1)
    return [len(resp), len(row["response"]), sum(not c.isalnum() and not c.isspace() for c in row["response"]),
            "?" in row["response"], "!" in row["response"],
            bool({"not", "t", "never", "no"} & rs), sum(w in FIRST_PERSON for w in resp) / n,
            sum(w in SECOND_PERSON for w in resp) / n, sum(w in es for w in resp) / n,
            len(rs & es) / max(len(es), 1), len(rs - es), len(resp) / max(len(ev), 1)]


def surface_probe(rows: list[dict[str, Any]], key: str, seed: int = 0) -> dict[str, Any]:
    """Held-out accuracy (overall and by label) of logistic regression on :func:`surface_features`, split by source."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    ids = sorted({r["source_id"] for r in rows})
    random.Random(seed).shuffle(ids)
    test = set(ids[: int(0.3 * len(ids))])
    train = [r for r in rows if r["source_id"] not in test]
    held = [r for r in rows if r["source_id"] in test]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit([surface_features(r) for r in train], [r[key] for r in train])
    predicted = model.predict([surface_features(r) for r in held])
    gold = [r[key] for r in held]
    majority = Counter(r[key] for r in train).most_common(1)[0][0]
    by_label = {label: [sum(g == p == label for g, p in zip(gold, predicted)), gold.count(label)]
                for label in sorted(set(gold))}
    return {"accuracy": [sum(g == p for g, p in zip(gold, predicted)), len(gold)],
            "majority": [gold.count(majority), len(gold)], "by_label": by_label}


def made_rows(data: Path) -> tuple[list[Any], dict[str, list[dict[str, Any]]]]:
    path = data / "q2_wow"
    sources = read_sources(str(path), PerturbOptions(inputs=(str(path),), output="-"))
    nlp = load_spacy("en_core_web_sm")
    made = {}
    for recipe in ("begin", "conv-fever"):
        rows, _ = make_training_set(sources, recipe=recipe, seed=0, nlp=nlp)
        made[recipe] = [r.to_dict() for r in rows]
    return sources, made


def audit(data: Path) -> dict[str, Any]:
    sources, made = made_rows(data)
    original = {s.id: s.response for s in sources}
    knowledge = {s.id: s.knowledge for s in sources}
    topic = {s.id: s.topic for s in sources}
    topics_of: dict[str, set[str]] = {}
    for s in sources:
        topics_of.setdefault(s.response, set()).add(s.topic or "")
    nlp = load_spacy("en_core_web_sm")
    out: dict[str, Any] = {"grounded_rows": len(sources)}
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
    hall = [r for r in begin if r["label"] == "hallucination"]
    out["hallucination_of_the_same_topic"] = [sum(topic[r["source_id"]] in topics_of.get(r["response"], set())
                                                  for r in hall), len(hall)]
    off = [r for r in begin if r["label"] == "off-topic"]

    def names_topic(r: dict[str, Any]) -> bool:
        name = set(words(re.sub(r"\(.*?\)", "", topic[r["source_id"]] or ""))) - {"the", "a", "an", "of", "and"}
        return bool(name & set(words(r["response"])))

    out["off-topic_naming_the_topic"] = [sum(names_topic(r) for r in off), len(off)]
    out["off-topic_of_the_same_topic"] = [sum("fallback" not in r["change"] for r in off), len(off)]
    out["off-topic_content_overlap_silver"] = content_overlap(nlp, [(r["response"], r["evidence"]) for r in off])
    out["off-topic_content_overlap_begin_v1_dev"] = content_overlap(nlp, begin_off_topic(data))
    for name, rows, other in (("begin_negation", of(begin, "negation"), "evidence"),
                              ("conv_fever_negated_response", of(fever, "negated_response"), "evidence"),
                              ("conv_fever_negated_knowledge", of(fever, "negated_knowledge"), "response")):
        problems = Counter()
        for r in rows:
            before = original[r["source_id"]] if other == "evidence" else knowledge[r["source_id"]]
            after = r["response"] if other == "evidence" else r["evidence"]
            problems[negation_problem(nlp, before, after, r[other])] += 1
        for problem in ("claim not held", "temporal / relative", "not also / only"):
            out[f"{name}_{problem.replace(' / ', '_or_').replace(' ', '_')}"] = [problems[problem], len(rows)]
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
    for recipe, key in (("begin", "label"), ("conv-fever", "label3")):
        probe = surface_probe(made[recipe], key)
        out[f"{recipe}_surface_probe_accuracy"] = probe["accuracy"]
        out[f"{recipe}_surface_probe_majority"] = probe["majority"]
        for label, v in probe["by_label"].items():
            out[f"{recipe}_surface_probe_{label}"] = v
    return out


def reading_sheet(data: Path, k: int, seed: int) -> list[dict[str, Any]]:
    """``k`` random rows per label of both recipes (seeded), each with its rule and change, to mark."""
    sources, made = made_rows(data)
    previous = {s.id: s.previous or "" for s in sources}
    sheet = []
    for recipe, key in (("begin", "label"), ("conv-fever", "label3")):
        by: dict[str, list[dict[str, Any]]] = {}
        for r in made[recipe]:
            by.setdefault(r[key], []).append(r)
        for label in sorted(by):
            for r in random.Random(f"{seed}|{recipe}|{label}").sample(by[label], min(k, len(by[label]))):
                sheet.append({"id": r["id"], "recipe": recipe, "label": r[key], "method": r["method"],
                              "rule": examples.RULES.get((recipe, r["method"]), ""), "change": r["change"],
                              "evidence": r["evidence"], "previous_turn": previous.get(r["source_id"], ""),
                              "response": r["response"], "verdict": "", "reason": ""})
    return sheet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--json")
    ap.add_argument("--read", type=int, default=0, metavar="K", help="print K random rows per label to mark")
    ap.add_argument("--seed", type=int, default=0, help="the reading sheet's draw")
    ap.add_argument("--sheet", help="with --read: write the sheet as JSON lines (verdict and reason to fill)")
    args = ap.parse_args()
    if args.read:
        sheet = reading_sheet(Path(args.data), args.read, args.seed)
        for n, r in enumerate(sheet):
            print(f"\n[{n}] {r['id']} | {r['recipe']} {r['label']} | {r['method']}: {r['rule']}\n"
                  f"  change: {r['change']}\n  evidence: {r['evidence']}\n  previous turn: {r['previous_turn']}\n"
                  f"  response: {r['response']}\n  verdict: ____  reason: ____")
        if args.sheet:
            Path(args.sheet).parent.mkdir(parents=True, exist_ok=True)
            Path(args.sheet).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sheet))
        return
    figures = audit(Path(args.data))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(sys.modules["q2_plugins.training.recipes"].__file__).parent).stdout.strip()
    figures["commit"] = commit or "unknown"
    figures["cpu"] = cpu_name()
    for key, value in figures.items():
        if isinstance(value, list) and len(value) == 2:
            value = f"{value[0]} of {value[1]} ({100 * value[0] / value[1]:.1f}%)" if value[1] else "0 of 0"
        print(f"{key}: {value}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
