#!/usr/bin/env python
"""``q2 report`` on a large results file: peak memory (RSS), time and the page's size.

Writes N explained result rows with a history (default 99,365, about 200 MB, as in the issue's case) to a temporary
JSONL file, cycling through the replay of the bundled slice of the original run (real questions, answers and texts;
ids made unique), then runs
``q2 report FILE --output PAGE`` in a child process and prints its wall time, its peak RSS and the page's size.
``--repo DIR`` runs the ``q2_plugins`` of another checkout (a before / after comparison on one machine); ``--args``
passes flags to ``q2 report``.

    python benchmarks/bench_report_big.py [--n 100000] [--repo DIR] [--args "--all-rows"]

Measures and prints; asserts nothing. The file is generated, never kept.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_report import build_rows  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.io.outputs import json_line  # noqa: E402


def write_results(path: Path, n: int) -> int:
    """n result rows as ``q2 score --explain --history-column history`` writes them (``row``, the texts, the result
    fields; the history is eight turns: the knowledge and the response of four other rows); returns bytes."""
    rows = build_rows(min(n, 400))
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            base = rows[i % len(rows)]
            history = [t for k in (7, 13, 29, 41) for t in (rows[(i + k) % len(rows)]["knowledge"],
                                                        rows[(i + k) % len(rows)]["response"])]
            f.write(json_line({"row": i, **base, "history": history, "id": f"{base['id']}-{i}", "index": i}) + "\n")
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=99_365)
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose q2 report runs (default: this one)")
    parser.add_argument("--args", default="", help="more flags for q2 report")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results, page = Path(tmp) / "results.jsonl", Path(tmp) / "report.html"
        size = write_results(results, args.n)
        env = dict(os.environ, PYTHONPATH=args.repo)
        argv = [sys.executable, "-m", "q2_plugins.cli", "report", str(results), "--output", str(page),
                *shlex.split(args.args)]
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=args.repo, capture_output=True, text=True)  # (-m: cwd first)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"# CPU: {cpu_name()}; checkout {args.repo}")
        print(f"{args.n:,} rows, {size / 1e6:.0f} MB of results: q2 report {args.args or '(default flags)'}: exit "
              f"{done.returncode}, {wall:.1f} s, peak RSS {peak_kb / 1024:.0f} MB, page "
              f"{page.stat().st_size / 1e6 if page.exists() else 0:.1f} MB")
        print("  " + (done.stdout.strip() or done.stderr.strip()[-300:]))


if __name__ == "__main__":
    main()
