#!/usr/bin/env python
"""Cost of one row against its size: time per row as the response or the knowledge grows, per stage, with slopes.

Two sweeps on the tiny random-weight models (``q2 make-test-models --examples``), or on any ``--models DIR`` with
``qg``, ``qa``, ``nli`` (e.g. the paper-size random-weight models ``bench_pipeline.py`` builds under
``out/bench-models/paper``), budgets off (``0``) and the QG input limit lifted so every size is scored:

- response length (characters, knowledge fixed): the candidate count grows with the response, and every candidate's
  question is generated from the whole response and answered on it, so the model stages cost (candidates x response
  length) by Q²'s definition; they are also shown per candidate, which must stay linear. spaCy (candidates) and the
  bookkeeping must be linear per row.
- knowledge length (characters, the same responses at every size): QA reads the knowledge in windows, so every
  stage must be linear.

- QA on the knowledge alone (``qa``): step 4 for one question, as the knowledge grows (random weights rarely pass a
  question through the filters, so the row sweeps may not reach it).

Each size scores ``--rows`` distinct rows in one call (batched across rows, as a run does) after a warm-up call; the
fastest of ``--repeat`` calls counts (the machine may be shared).
The slope is the exponent b of a least-squares fit time = a * size^b over the sizes (1 = linear, 2 = quadratic).

    python benchmarks/bench_row_cost.py [--rows 4] [--repeat 2] [--models DIR]
    python benchmarks/bench_row_cost.py --models out/bench-models/paper --rows 1 --repeat 1 \
        --response-sizes 125,250,500,1000 --knowledge-sizes 2500,5000,10000,20000

(the second within the default budgets; at paper size one 512-token ALBERT-xlarge window is ~1.2 TFLOP, so a
1,000-character response, ~35 candidates each answered on it, takes minutes on two cores).

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


def _sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(int(x) for x in text.split(","))
    if len(sizes) < 2 or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give at least two positive sizes, e.g. 250,500,1000")
    return sizes


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
        pairs = [make(size, rng, i) for i in range(rows)]
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


def qa_sweep(scorer: Q2Scorer, sizes: Sequence[int], rows: int, repeat: int) -> None:
    """Step 4 alone: the QA model answering a question on knowledge of each size (a row reaches this step only with a
    valid question, which random weights rarely give, so the row sweeps above may not show it)."""
    qa = scorer.parts().qa
    print("\nQA on the knowledge alone (one question per row)")
    print("| chars | s / row |\n|---:|---:|")
    got = []
    for size in sizes:
        rng = random.Random(size)
        pairs = [("what is it about?", text_of(KNOWLEDGE, size, rng)) for _ in range(rows)]
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            qa.answer(pairs)
            best = min(best, (time.perf_counter() - t0) / rows)
        got.append((size, best))
        print(f"| {size} | {best:.3f} |")
    print(f"slope (exponent of time against length): QA {slope([g[0] for g in got], [g[1] for g in got]):.2f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4, help="rows per size")
    ap.add_argument("--repeat", type=int, default=2, help="calls per size; the fastest counts")
    ap.add_argument("--models", help="a directory with qg, qa, nli models (default: build tiny ones)")
    ap.add_argument("--response-sizes", type=_sizes, default=RESPONSE_SIZES, help="characters, comma-separated")
    ap.add_argument("--knowledge-sizes", type=_sizes, default=KNOWLEDGE_SIZES, help="characters, comma-separated")
    ap.add_argument("--sweeps", default="response,knowledge,qa",
                    help="any of response, knowledge, qa (QA on the knowledge alone), comma-separated")
    args = ap.parse_args(argv)
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        models = tiny_models(args.models, Path(tmp))
        config = Q2Config(qg_model=str(models / "qg"), qa_model=str(models / "qa"), nli_model=str(models / "nli"),
                          max_response_chars=0, max_knowledge_chars=0, max_candidates=0, max_questions=0,
                          qg_max_input_tokens=100_000)
        scorer = Q2Scorer(config)
        scorer.score(responses=[SENTENCES[0]], knowledge=[KNOWLEDGE[0]])  # load and warm up
        print(f"CPU: {cpu_name()}, torch threads {torch.get_num_threads()}; models: "
              f"{args.models or 'tiny random-weight'}, {args.rows} rows per size")
        if "response" in args.sweeps:
            sweep(scorer, "response length (knowledge: 300 characters)", args.response_sizes,
                  lambda n, rng, i: (text_of(SENTENCES, n, rng), text_of(KNOWLEDGE, 300, rng)), args.rows, args.repeat)
        if "knowledge" in args.sweeps:
            # row i has the same one-sentence response at every size (the i-th longest), so only the knowledge varies
            longest = sorted(SENTENCES, key=len, reverse=True)
            sweep(scorer, "knowledge length (response: one sentence, the same at every size)", args.knowledge_sizes,
                  lambda n, rng, i: (longest[i % len(longest)], text_of(KNOWLEDGE, n, rng)), args.rows, args.repeat)
        if "qa" in args.sweeps:
            qa_sweep(scorer, args.knowledge_sizes, args.rows, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
