"""The personal-question filter with and without its token pre-check, on recorded text.

Two sets: every question of the bundled recorded original run (``q2_original_run``: the questions that passed its
filters, so few are personal) and the previous turns of BEGIN's dev split (chat turns, full of I / you: near the worst
case for the pre-check). For each: how many texts are parsed, seconds of the full parse of every text (the filter
before) and of the filter now (best of ``--repeats``), and whether both decide alike.

    python benchmarks/bench_personal.py [--repeats 3] > benchmarks/results/bench_personal_<commit>.txt

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyPersonalFilter, load_spacy  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "q2_plugins" / "data"


def texts() -> dict[str, list[str]]:
    questions = []
    for path in sorted((DATA / "q2_original_run").glob("*/*_out.steps.csv")):
        with path.open(encoding="utf-8") as f:
            questions += [r["question"] for r in csv.DictReader(f) if r["question"] not in ("", "NO_Q")]
    with (DATA / "begin_dev" / "dev_05_24_21.tsv").open(encoding="utf-8") as f:
        turns = [r["previous turn"] for r in csv.DictReader(f, delimiter="\t") if r["previous turn"]]
    return {"recorded Q² questions": questions, "BEGIN previous turns": turns}


def best(fn, repeats: int) -> tuple[float, list[bool]]:
    seconds, out = float("inf"), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        seconds = min(seconds, time.perf_counter() - t0)
    return seconds, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    nlp = load_spacy("en_core_web_sm")
    pf = SpacyPersonalFilter(nlp)
    print(f"# CPU: {os.cpu_count()}-core {cpu_name()}; load average {os.getloadavg()[0]:.1f} at the start")
    print(f"spaCy pipeline {nlp.meta.get('name')} {nlp.meta.get('version')}; best of {args.repeats}")
    print("| texts | n | parsed now | full parse s | filter now s | speed-up | same decisions |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, items in texts().items():
        full_s, full = best(lambda xs=items: [pf._personal(d) for d in nlp.pipe(xs, batch_size=pf.batch_size)],
                            args.repeats)
        now_s, now = best(lambda xs=items: pf.is_personal(xs), args.repeats)
        parsed = sum(pf._may_be_personal(t) for t in items)
        print(f"| {name} | {len(items)} | {parsed} ({parsed / len(items):.0%}) | {full_s:.2f} | {now_s:.2f} | "
              f"{full_s / now_s:.1f}x | {full == now} |")


if __name__ == "__main__":
    main()
