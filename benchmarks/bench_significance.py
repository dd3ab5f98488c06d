#!/usr/bin/env python
"""How often ``q2 compare`` calls systems different when they are not, its power when they are, and its speed.

1. Calibration: ``--pairs`` (default 1,000) simulated pairs of systems with no true difference, each scored on
   ``--n`` (default 300) shared contexts with Q²-like scores (a per-context difficulty, each system's own noise,
   scores on Q²'s coarse grid, a few responses without a score), tested by the paired bootstrap (1,000 resamples)
   and approximate randomisation (10,000 trials) as ``q2 compare`` runs them. Prints the share with p < 0.05 (the
   false-positive rate; 0.05 is right) for each test, and for sacrebleu's own bootstrap p-value rule beside it.
2. Power: the same at a few true differences in mean Q² (``--power-pairs`` pairs each).
3. Speed: ``q2 compare`` (the command, files in and table out) on 3 systems x 100,000 responses with 1,000
   resamples, pinned to one core with one BLAS thread.

    python benchmarks/bench_significance.py [--pairs 1000] [--n 300] [--power-pairs 200] [--speed-only]

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one core: set before numpy loads
    os.environ[_var] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.cli import main as q2_main  # noqa: E402
from q2_plugins.metric.significance import PairedTest, bootstrap_figures, bootstrap_p_value, paired_ar, systems_arrays  # noqa: E402

GRID = np.array([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0])  # Q² response scores are means of a few 0 / F1 / 1


def simulate_pair(rng: np.random.Generator, n: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """num / den of two systems on ``n`` shared contexts; system B's latent quality is higher by ``shift``."""
    difficulty = rng.beta(2, 2, n)
    values = []
    for s in (0.0, shift):
        latent = np.clip(difficulty + s + rng.normal(0, 0.25, n), 0, 1)
        score = GRID[np.abs(latent[:, None] - GRID[None, :]).argmin(axis=1)]
        values.append([None if rng.random() < 0.05 else float(x) for x in score])  # ~5% without a score
    return systems_arrays(values)


def rejection_rates(shift: float, pairs: int, n: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = {"bootstrap": 0, "bootstrap (sacrebleu rule)": 0, "approximate randomisation": 0}
    diffs = []
    for i in range(pairs):
        num, den = simulate_pair(rng, n, shift)
        resampled = bootstrap_figures(num, den, 1000, seed=i)
        d = resampled[:, 1] - resampled[:, 0]
        observed = num[1].sum() / den[1].sum() - num[0].sum() / den[0].sum()
        diffs.append(observed)
        hits["bootstrap"] += bootstrap_p_value(d, observed) < 0.05
        hits["bootstrap (sacrebleu rule)"] += bootstrap_p_value(d, observed, rule="sacrebleu") < 0.05
        hits["approximate randomisation"] += paired_ar(num, den, PairedTest("ar", 10000, seed=i))[1].p_value < 0.05
    return {"mean difference": float(np.mean(diffs)), **{k: v / pairs for k, v in hits.items()}}


def timed_compare(n: int, systems: int, resamples: int) -> tuple[float, float, float]:
    """Wall and CPU seconds of ``q2 compare`` on ``systems`` result files of ``n`` responses (reading them
    included), and the seconds of writing the files."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        paths = []
        for k in range(systems):
            path = Path(tmp) / f"system{k}.jsonl"
            scores = rng.random(n)
            with path.open("w", encoding="utf-8") as f:
                for i, s in enumerate(scores):
                    status = "no_valid_question" if s < 0.03 else "scored"
                    f.write(json.dumps({"id": str(i), "status": status, "score": None if s < 0.03 else s}) + "\n")
            paths.append(str(path))
        written = time.perf_counter() - start
        start, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            code = q2_main(["compare", *paths, "--paired-bs-n", str(resamples)])
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        if code != 0:
            raise SystemExit(f"q2 compare exited {code}")
    return elapsed, cpu, written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=1000)
    p.add_argument("--n", type=int, default=300, help="responses per system")
    p.add_argument("--power-pairs", type=int, default=200)
    p.add_argument("--shifts", default="0.02,0.04,0.08", help="true latent differences for the power runs")
    p.add_argument("--speed-n", type=int, default=100_000)
    p.add_argument("--speed-only", action="store_true", help="only the speed run (3 of them)")
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(f"# CPU: {cpu_name()}, pinned to one core, one BLAS thread; numpy {np.__version__}")
    for _ in range(3 if args.speed_only else 1):
        elapsed, cpu, written = timed_compare(args.speed_n, 3, 1000)
        print(f"speed: q2 compare, 3 systems x {args.speed_n:,} responses, 1,000 resamples (q2 and coverage), files "
              f"read included: {elapsed:.2f} s wall, {cpu:.2f} s CPU (load average {os.getloadavg()[0]:.1f}; files "
              f"written beforehand in {written:.2f} s)")
    if args.speed_only:
        return
    print(f"\ncalibration: {args.pairs} pairs with no true difference, {args.n} responses each; share with p < 0.05")
    for name, rate in rejection_rates(0.0, args.pairs, args.n, seed=1).items():
        print(f"  {name:<28} {rate:.4f}")
    for shift in (float(s) for s in args.shifts.split(",")):
        print(f"\npower: {args.power_pairs} pairs, true latent difference {shift}; share with p < 0.05")
        for name, rate in rejection_rates(shift, args.power_pairs, args.n, seed=2).items():
            print(f"  {name:<28} {rate:.4f}")


if __name__ == "__main__":
    main()
