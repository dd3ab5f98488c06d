#!/usr/bin/env python
"""The fixed cost of ``q2 score --engine ray``: the whole command on 2 rows against ``q2 score``, and its steps.

``cli``: wall time of ``q2 score`` and of ``q2 score --engine ray --concurrency 1`` on the same 2 rows, each in a
fresh process (and Ray instance); ``--repo DIR`` runs another checkout's code (an older commit, to compare).
``steps`` (this checkout): ``import`` (``q2_plugins.jobs.ray.dataset``: Ray, Ray Data, pyarrow), ``ray_init`` (the local
instance, started as the command starts it), ``check_models`` (the models loaded once in a Ray task),
``first_batch`` (one actor started, its models loaded, one row scored), ``shutdown``, run one after the other (the
command overlaps the check with the actor's start). Medians over ``--repeat`` runs.

    python benchmarks/bench_ray_startup.py --repeat 3 --json benchmarks/results/bench_ray_startup.json

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = r"""
import json, sys, time
t = {"start": time.perf_counter()}
from q2_plugins.jobs import ScoreJob
from q2_plugins.jobs.ray.engine import _start
from q2_plugins.jobs.ray.dataset import check_models, score_dataset
import ray
t["import"] = time.perf_counter()
from q2_plugins import Q2Config
models = json.loads(sys.argv[1])
config = Q2Config(qg_model=models["qg"], qa_model=models["qa"], nli_model=models["nli"], qg_max_length=12)
_start(ScoreJob(input="-", progress=False))
t["ray_init"] = time.perf_counter()
signature = check_models(config)
t["check_models"] = time.perf_counter()
row = {"response": "it aired in the us", "knowledge": "The show aired in the United States and Canada."}
score_dataset(ray.data.from_items([row]), config, signature=signature).take_all()
t["first_batch"] = time.perf_counter()
ray.shutdown()
t["shutdown"] = time.perf_counter()
steps = list(t)
print(json.dumps({b: t[b] - t[a] for a, b in zip(steps, steps[1:])}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", choices=("tiny", "paper"), default="tiny")
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--repo", action="append", default=[], metavar="DIR",
                    help="also time the command from this checkout (repeatable)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    from bench_pipeline import build_models

    models = {k: str(v) for k, v in build_models(Path(args.models_dir), Path(args.data), args.sizes).items()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    import tempfile

    rows = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    rows.write("".join(json.dumps({"response": r, "knowledge": "The show aired in the United States and Canada."})
                       + "\n" for r in ("it aired in the us", "it was shown in canada")))
    rows.close()
    q2 = ["-m", "q2_plugins.cli", "score", "--no-progress", "--input", rows.name, "--qg-max-length", "12",
          "--qg-model", models["qg"], "--qa-model", models["qa"], "--nli-model", models["nli"]]
    cli: dict[str, list[float]] = {}
    for repo in [str(REPO)] + args.repo:
        for name, extra in (("q2 score", []), ("q2 score --engine ray", ["--engine", "ray", "--concurrency", "1"])):
            key = f"{name} ({repo})"
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, *q2, *extra], env={**env, "PYTHONPATH": repo}, check=True,
                               capture_output=True)
                cli.setdefault(key, []).append(time.perf_counter() - t0)
            print(f"{key}: median {statistics.median(cli[key]):.2f} s  {[round(x, 2) for x in cli[key]]}",
                  flush=True)
    runs = []
    for i in range(args.repeat):
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(models)], env=env, capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"run {i + 1}: " + "  ".join(f"{k} {v:.2f} s" for k, v in runs[-1].items()), flush=True)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    median["total"] = statistics.median(sum(r.values()) for r in runs)
    print("median: " + "  ".join(f"{k} {v:.2f} s" for k, v in median.items()))
    if args.json:
        record = {"sizes": args.sizes, "cli_s": cli, "cli_median_s": {k: statistics.median(v) for k, v in cli.items()},
                  "steps_s": runs, "steps_median_s": median,
                  "loadavg": Path("/proc/loadavg").read_text().split()[:3],
                  "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:])}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
