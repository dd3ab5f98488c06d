#!/usr/bin/env python
"""Cost of one row against its size: time per row as the response or the knowledge grows, per stage, with slopes.

Two sweeps on the tiny random-weight models (``q2 make-test-models --examples``), budgets off (``0``) and the QG input
limit lifted so every size is scored:

- response length (characters, knowledge fixed): the candidate count grows with the response, and every candidate's
  question is generated from the whole response and answered on it, so the model stages cost (candidates x response
  length) by Q²'s definition; they are also shown per candidate, which must stay linear. spaCy (candidates) and the
  bookkeeping must be linear per row.
- knowledge length (characters, response fixed): QA reads the knowledge in windows, so every stage must be linear.

Each size scores ``--rows`` distinct rows in one call (batched across rows, as a run does) after a warm-up call; the
fastest of ``--repeat`` calls counts (the machine may be shared).
The slope is the exponent b of a least-squares fit time = a * size^b over the sizes (1 = linear, 2 = quadratic).

    python benchmarks/bench_row_cost.py [--rows 4] [--repeat 2] [--models DIR]

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hostile import cpu_name, tiny_models  # noqa: E402

from q2_plugins import Q2Config, Q2Scorer  # noqa: E402
from tests.hostile import KNOWLEDGE, SENTENCES  # noqa: E402

RESPONSE_SIZES = (250, 500, 1000, 2000, 4000)
KNOWLEDGE_SIZES = (2_000, 8_000, 32_000, 128_000)
STAGES = ("candidates", "qg", "personal", "qa", "nli")


def text_of(pool: Sequence[str], chars: int, rng: random.Random) -> str:
    parts: list[str] = []
    while sum(map(len, parts)) + len(parts) < chars:
        parts.append(rng.choice(pool))
    return " ".join(parts)[:chars].rsplit(" ", 1)[0]


def slope(sizes: Sequence[float], times: Sequence[float]) -> float:
    """The exponent b of the least-squares fit log t = log a + b log size."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(t, 1e-9)) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def measure(scorer: Q2Scorer, responses: list[str], knowledge: list[str]) -> tuple[float, dict[str, float], int]:
    """Seconds per row, per stage seconds per row, and candidates per row."""
    t0 = time.perf_counter()
    res = scorer.score(responses=responses, knowledge=knowledge)
    total = (time.perf_counter() - t0) / len(responses)
    stages = {s: scorer.timings.get(s, 0.0) / len(responses) for s in STAGES}
    cands = sum(r.num_candidates for r in res.responses) // len(responses)
    return total, stages, cands


def sweep(scorer: Q2Scorer, name: str, sizes: Sequence[int], make: callable, rows: int, repeat: int) -> None:
    print(f"\n{name}")
    print("| chars | candidates | s / row | " + " | ".join(STAGES) + " | s / row / candidate |")
    print("|---:|---:|---:|" + "---:|" * len(STAGES) + "---:|")
    got = []
    for size in sizes:
        rng = random.Random(size)
        pairs = [make(size, rng) for _ in range(rows)]
        # the fastest of ``repeat`` calls (a fresh call each time: no memo between calls, and no cache)
        total, stages, cands = min((measure(scorer, [p[0] for p in pairs], [p[1] for p in pairs])
                                    for _ in range(repeat)), key=lambda m: m[0])
        got.append((size, total, stages, max(cands, 1)))
        print(f"| {size} | {cands} | {total:.3f} | " + " | ".join(f"{stages[s]:.3f}" for s in STAGES)
              + f" | {total / max(cands, 1):.4f} |")
    xs = [g[0] for g in got]
    fits = {"row": slope(xs, [g[1] for g in got]), "row / candidate": slope(xs, [g[1] / g[3] for g in got])}
    fits.update({s: slope(xs, [g[2][s] for g in got]) for s in STAGES if all(g[2][s] > 0 for g in got)})
    print("slopes (exponent of time against length): " + ", ".join(f"{k} {v:.2f}" for k, v in fits.items()))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4, help="rows per size")
    ap.add_argument("--repeat", type=int, default=2, help="calls per size; the fastest counts")
    ap.add_argument("--models", help="a directory with qg, qa, nli tiny models (default: build them)")
    args = ap.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        models = tiny_models(args.models, Path(tmp))
        config = Q2Config(qg_model=str(models / "qg"), qa_model=str(models / "qa"), nli_model=str(models / "nli"),
                          max_response_chars=0, max_knowledge_chars=0, max_candidates=0, max_questions=0,
                          qg_max_input_tokens=100_000)
        scorer = Q2Scorer(config)
        scorer.score(responses=[SENTENCES[0]], knowledge=[KNOWLEDGE[0]])  # load and warm up
        print(f"CPU: {cpu_name()}, torch threads {torch.get_num_threads()}; tiny random-weight models, "
              f"{args.rows} rows per size")
        sweep(scorer, "response length (knowledge: 300 characters)", RESPONSE_SIZES,
              lambda n, rng: (text_of(SENTENCES, n, rng), text_of(KNOWLEDGE, 300, rng)), args.rows, args.repeat)
        sweep(scorer, "knowledge length (response: one sentence)", KNOWLEDGE_SIZES,
              lambda n, rng: (rng.choice(SENTENCES), text_of(KNOWLEDGE, n, rng)), args.rows, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
