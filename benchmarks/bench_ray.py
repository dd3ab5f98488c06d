#!/usr/bin/env python
"""Benchmark ``q2 score --engine ray`` against the single-process ``q2 score`` on the same rows.

Three runs of the real command lines, each in a fresh process (and, for Ray, a fresh local Ray instance), one torch
thread per scoring process, the same rows per scoring call: ``q2 score --chunk-size B``; ``q2 score --engine ray
--concurrency 1 --ray-batch-size B``; the same with ``--concurrency 2``. Each is run
on ``--n`` rows and on ``--n-small`` rows, so the fixed cost (start-up, model loading, Ray's start) and the marginal
rate (rows/s once running: (n - n_small) / (wall(n) - wall(n_small))) are reported apart. The rows are WoW responses
with their knowledge (``q2_wow``). Models: ``--sizes tiny`` (default) or ``paper`` (random weights at the paper's
architectures and sizes, built as ``bench_pipeline.py`` builds them; the published checkpoints need the hub).

    python benchmarks/bench_ray.py --n 300 --json benchmarks/results/bench_ray.json

Wall times on a shared machine follow its load (printed); the CPU time of each run's process tree (Ray's own
processes included) does much less, and gives the marginal CPU seconds per row and Ray's overhead in CPU.
Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import SUBSETS, build_models  # noqa: E402

Q2_FIELDS = ("score", "score_no_nli", "status", "num_questions", "error")


def wow_rows(data: Path, n: int) -> list[dict[str, Any]]:
    """n WoW rows, round robin over the four annotated subsets."""
    per = []
    for name in SUBSETS:
        with open(data / "q2_wow" / f"{name}.csv", newline="", encoding="utf-8") as f:
            per.append([{"id": f"{name}-{r['']}", "response": r["response"], "knowledge": r["knowledge"]}
                        for r in csv.DictReader(f)])
    rows = [recs[i] for i in range(max(map(len, per))) for recs in per if i < len(recs)]
    if n > len(rows):
        raise SystemExit(f"--n {n}: only {len(rows)} rows in {data / 'q2_wow'}")
    return rows[:n]


def machine() -> dict[str, Any]:
    """The CPU's model name (the timings are only comparable on one), its cores, Python, threads per scorer."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "threads_per_scoring_process": 1}


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall time of ``cmd`` and the CPU time (user + system) of its whole process tree, Ray's own processes
    included, sampled every 0.2 s (CPU time depends far less than wall time on what else the machine runs)."""
    import psutil

    before = loadavg()
    t0 = time.perf_counter()
    log = tempfile.TemporaryFile("w+")  # not a pipe: a full pipe would stall the run
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    cpu: dict[tuple[int, float], float] = {}
    while proc.poll() is None:
        try:
            tree = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu[(p.pid, p.create_time())] = t.user + t.system
            except psutil.Error:
                pass
        time.sleep(0.2)
    proc.wait()
    wall = time.perf_counter() - t0
    log.seek(0)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{log.read()[-3000:]}")
    return {"wall_s": wall, "cpu_s": sum(cpu.values()), "loadavg_before": before, "loadavg_after": loadavg()}


def q2_fields(path: Path) -> list[tuple]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [tuple(r[f] for f in Q2_FIELDS) for r in rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="rows of the measured runs")
    ap.add_argument("--n-small", type=int, default=20, help="rows of the runs that measure the fixed cost")
    ap.add_argument("--sizes", choices=("tiny", "paper"), default="tiny")
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"),
                    help="where the benchmark models are built (reused when already there)")
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--qg-length", type=int, default=16, help="--qg-max-length (random weights rarely stop early)")
    ap.add_argument("--ray-batch-size", type=int, default=32,
                    help="rows per scoring call, in the Ray runs and (--chunk-size) in the single-process run")
    ap.add_argument("--extra", default="", help="more q2 score flags for every run, e.g. \"--device cuda\"")
    ap.add_argument("--ray-extra", default="", help="more flags for the Ray runs, e.g. \"--num-gpus-per-worker 1\"")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    models = build_models(Path(args.models_dir), Path(args.data), args.sizes)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # one torch thread per scoring process
    q2 = [sys.executable, "-m", "q2_plugins.cli", "score", "--no-progress", "--format", "json",
          "--qg-model", str(models["qg"]), "--qa-model", str(models["qa"]), "--nli-model", str(models["nli"]),
          "--qg-max-length", str(args.qg_length), *shlex.split(args.extra)]
    ray_flags = ["--engine", "ray", "--ray-batch-size", str(args.ray_batch_size), *shlex.split(args.ray_extra)]
    # the single process scores --ray-batch-size rows per call too, so that Ray is the only difference
    engines = {"single_process": ["--chunk-size", str(args.ray_batch_size)],
               "ray_1_actor": ray_flags + ["--concurrency", "1"], "ray_2_actors": ray_flags + ["--concurrency", "2"]}
    results: dict[str, Any] = {}
    outputs: dict[str, Path] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (args.n_small, args.n):
            src = Path(tmp) / f"rows{n}.jsonl"
            src.write_text("".join(json.dumps(r) + "\n" for r in wow_rows(Path(args.data), n)))
            for name, extra in engines.items():
                out = Path(tmp) / f"{name}-{n}.jsonl"
                res = run(q2 + ["--input", str(src), "--output", str(out)] + extra, env)
                results.setdefault(name, {})[f"n{n}"] = res
                print(f"{name:15s} n={n:4d}  wall {res['wall_s']:7.1f} s  load {res['loadavg_before'][0]:.2f} -> "
                      f"{res['loadavg_after'][0]:.2f}", flush=True)
                if n == args.n:
                    outputs[name] = out
        reference = q2_fields(outputs["single_process"])
        identical = {name: q2_fields(path) == reference for name, path in outputs.items()
                     if name != "single_process"}

    for r in results.values():
        big, small = r[f"n{args.n}"]["wall_s"], r[f"n{args.n_small}"]["wall_s"]
        r["rows_per_s"] = args.n / big
        r["marginal_rows_per_s"] = (args.n - args.n_small) / (big - small) if big > small else None
        r["fixed_s"] = small - args.n_small / r["marginal_rows_per_s"] if r["marginal_rows_per_s"] else None
        big_cpu, small_cpu = r[f"n{args.n}"]["cpu_s"], r[f"n{args.n_small}"]["cpu_s"]
        r["marginal_cpu_s_per_row"] = (big_cpu - small_cpu) / (args.n - args.n_small)
        r["fixed_cpu_s"] = small_cpu - args.n_small * r["marginal_cpu_s_per_row"]
    sp, r1, r2 = results["single_process"], results["ray_1_actor"], results["ray_2_actors"]
    summary = {
        "ray_overhead_cpu_per_row": r1["marginal_cpu_s_per_row"] / sp["marginal_cpu_s_per_row"] - 1,
        "ray_overhead_end_to_end": sp["rows_per_s"] / r1["rows_per_s"] - 1,
        "ray_overhead_marginal": (sp["marginal_rows_per_s"] / r1["marginal_rows_per_s"] - 1
                                  if sp["marginal_rows_per_s"] and r1["marginal_rows_per_s"] else None),
        "scaling_1_to_2_end_to_end": r2["rows_per_s"] / r1["rows_per_s"],
        "scaling_1_to_2_marginal": (r2["marginal_rows_per_s"] / r1["marginal_rows_per_s"]
                                    if r2["marginal_rows_per_s"] and r1["marginal_rows_per_s"] else None),
        "results_identical_to_single_process": identical,
    }
    print()
    print(f"{'run':15s} {'rows/s (n=' + str(args.n) + ')':>16s} {'marginal rows/s':>16s} {'fixed s':>8s} "
          f"{'CPU s/row':>10s} {'fixed CPU s':>12s}")
    for name, r in results.items():
        m = r["marginal_rows_per_s"]
        print(f"{name:15s} {r['rows_per_s']:16.2f} {m if m is None else round(m, 2)!s:>16s} "
              f"{r['fixed_s'] if r['fixed_s'] is None else round(r['fixed_s'], 1)!s:>8s} "
              f"{r['marginal_cpu_s_per_row']:10.4f} {r['fixed_cpu_s']:12.1f}")
    for k, v in summary.items():
        print(f"{k:40s} {v if not isinstance(v, float) else round(v, 3)}")
    record = {"machine": machine(),
              "settings": {k: v for k, v in vars(args).items()}, "runs": results, "summary": summary,
              "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:])}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
