#!/usr/bin/env python
"""A hostile corpus with enormous rows through ``q2 score`` on tiny random-weight models: wall time and rows / s.

The corpus is the fuzz test's generator (``tests/hostile.py``): ``--rows`` seeded hostile rows (odd, wrong and
missing values, duplicates, malformed records) of which ``--enormous`` hold a 50,000-word response and / or 200,000
characters of knowledge. ``q2 score`` runs in a fresh process on the tiny models (``q2 make-test-models --examples``)
with the default Q² settings and budgets; ``--over-budget truncate`` scores the enormous rows on their first
characters instead. Prints the time from start to exit, rows / s, and the outcome counts.

    python benchmarks/bench_hostile.py --rows 2000 --enormous 20 [--over-budget truncate] [--models DIR]

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_name  # noqa: E402
from tests.hostile import hostile_rows, outcome, write_jsonl  # noqa: E402


def _child_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tiny_models(where: Optional[str], scratch: Path) -> Path:
    """The directory holding ``qg``, ``qa``, ``nli`` (built here unless ``where`` names one)."""
    if where:
        return Path(where)
    from q2_plugins.backends.hf.tiny import build_examples

    return build_examples(scratch / "examples")["qg"].parent


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--enormous", type=int, default=20)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--over-budget", choices=("error", "truncate"), default="error")
    ap.add_argument("--models", help="a directory with qg, qa, nli tiny models (default: build them)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        models = tiny_models(args.models, scratch)
        rows = hostile_rows(args.rows, seed=args.seed, enormous=args.enormous)
        path = scratch / "hostile.jsonl"
        expected = write_jsonl(rows, path, seed=args.seed)
        out = scratch / "scores.jsonl"
        cmd = [sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(path), "--output", str(out),
               "--qg-model", str(models / "qg"), "--qa-model", str(models / "qa"), "--nli-model",
               str(models / "nli"), "--no-progress", "--format", "json", "--over-budget", args.over_budget]
        env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}
        t0, cpu0 = time.perf_counter(), _child_cpu()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        seconds, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
        if proc.returncode not in (0, 1):
            print(proc.stderr[-3000:])
            return proc.returncode
        scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    big = sum(len(str(r.get(k, ""))) >= 200_000 for r in rows for k in ("response", "knowledge"))
    kinds = Counter(outcome(o) for o in scored)
    budget = sum("over the budget" in (o["error"] or "") for o in scored)
    warned = sum(bool(o.get("warning")) for o in scored)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs")
    print(f"corpus: {len(expected)} records ({args.rows} rows, {args.enormous} enormous rows holding {big} texts "
          f"of 50,000 words / 200,000 characters, plus malformed lines), over_budget={args.over_budget}")
    print(f"q2 score: {seconds:.1f} s from start to exit (model loading included), {len(scored) / seconds:.0f} rows/s; "
          f"CPU time {cpu:.1f} s (user + system; load average at the end {os.getloadavg()[0]:.1f})")
    print(f"rows out: {len(scored)} of {len(expected)}; scored {kinds['scored']}, clear errors {kinds['clear']} "
          f"(over a budget: {budget}), unclear errors {kinds['unclear']}, truncated with a warning: {warned}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
