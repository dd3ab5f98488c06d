#!/usr/bin/env python
"""Ray's cost per batch: the same ``score()`` calls timed in one process and inside a Ray Data actor.

``bench_ray.py`` times whole commands, whose fixed costs (start-up, model loading) vary from run to run and blur
the marginal rate. This script separates them: it scores ``--n`` rows in batches of ``--batch-size`` with one
``Q2Scorer`` in this process, then the same batches through :func:`q2_plugins.jobs.ray.dataset.score_dataset` on one
actor of a local Ray instance, timing each ``score()`` call where it runs (one torch thread in both). It reports the
per-batch times both ways, their ratio (the actor's cost per batch, Ray Data included, against the plain call), and the
Ray run's wall time outside the batches (its start, the actor's model load). The first batch of each run is reported
apart (warm-up). Scores are compared row for row.

    python benchmarks/bench_ray_actor.py --sizes paper --n 24 --batch-size 8 --json out/bench_ray_actor.json

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one thread in both runs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import build_models  # noqa: E402
from bench_ray import machine, wow_rows  # noqa: E402


def _config(models: dict[str, Path], qg_length: int) -> Any:
    from q2_plugins import Q2Config

    return Q2Config.from_dict({"qg_model": str(models["qg"]), "qa_model": str(models["qa"]),
                               "nli_model": str(models["nli"]), "qg_max_length": qg_length})


def in_process(rows: list[dict[str, Any]], config: Any, batch: int) -> dict[str, Any]:
    """Batch walls and scores of one scorer in this process."""
    import torch

    from q2_plugins import Q2Scorer

    torch.set_num_threads(1)
    scorer = Q2Scorer(config).load(quiet=True)
    walls, scores = [], []
    for start in range(0, len(rows), batch):
        part = rows[start:start + batch]
        t = time.perf_counter()
        res = scorer.score(responses=[r["response"] for r in part], knowledge=[r["knowledge"] for r in part])
        walls.append(time.perf_counter() - t)
        scores += [r.score for r in res.responses]
    return {"batch_wall_s": walls, "scores": scores}


def in_ray_actor(rows: list[dict[str, Any]], config: Any, batch: int) -> dict[str, Any]:
    """Batch walls (timed inside the actor) and scores of one actor of ``score_dataset``, and the run's wall."""
    import pyarrow as pa
    import ray

    from q2_plugins.jobs.ray.dataset import Q2BatchScorer, score_dataset

    class TimedBatchScorer(Q2BatchScorer):
        def __call__(self, table: pa.Table) -> pa.Table:
            t = time.perf_counter()
            out = super().__call__(table)
            wall = time.perf_counter() - t
            return out.append_column("bench_batch_wall_s", pa.array([wall] * out.num_rows))

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        t1 = time.perf_counter()
        ds = ray.data.from_items([{**r, "bench_order": i} for i, r in enumerate(rows)])
        out = score_dataset(ds, config, batch_size=batch, scorer_class=TimedBatchScorer, num_cpus=1)
        got = sorted(out.take_all(), key=lambda r: r["bench_order"])
        t2 = time.perf_counter()
    finally:
        ray.shutdown()
    walls: dict[float, int] = {}
    for r in got:  # one value per batch, repeated on its rows
        walls[r["bench_batch_wall_s"]] = walls.get(r["bench_batch_wall_s"], 0) + 1
    if sorted(walls.values()) != sorted(len(rows[s:s + batch]) for s in range(0, len(rows), batch)):
        raise SystemExit(f"the actor's batches were not of {batch} rows: {sorted(walls.values())}")
    return {"batch_wall_s": list(walls), "scores": [r["score"] for r in got], "ray_init_s": t1 - t0,
            "dataset_wall_s": t2 - t1}


def _same(a: list[Any], b: list[Any]) -> bool:
    """Equal lists of scores, NaN equal to NaN (a response with no score)."""
    return json.dumps(a) == json.dumps(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", choices=("tiny", "paper"), default="tiny")
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--qg-length", type=int, default=16, help="--qg-max-length (random weights rarely stop early)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    models = build_models(Path(args.models_dir), Path(args.data), args.sizes)
    rows = wow_rows(Path(args.data), args.n)
    config = _config(models, args.qg_length)
    local = in_process(rows, config, args.batch_size)
    gc.collect()
    actor = in_ray_actor(rows, config, args.batch_size)
    # both lists are in input order (the actor's batches are consecutive rows); the first batch of each is warm-up
    steady_local, steady_actor = sum(local["batch_wall_s"][1:]), sum(actor["batch_wall_s"][1:])
    report = {
        "machine": machine(),
        "settings": vars(args),
        "in_process": {k: v for k, v in local.items() if k != "scores"},
        "ray_actor": {k: v for k, v in actor.items() if k != "scores"},
        "batches_s": {"in_process": sum(local["batch_wall_s"]), "ray_actor": sum(actor["batch_wall_s"])},
        "actor_over_in_process": sum(actor["batch_wall_s"]) / sum(local["batch_wall_s"]),
        "ray_wall_outside_batches_s": actor["dataset_wall_s"] - sum(actor["batch_wall_s"]),
        "actor_over_in_process_after_first_batch": steady_actor / steady_local if steady_local else None,
        "scores_identical": _same(local["scores"], actor["scores"]),
    }
    print(f"{args.n} rows in batches of {args.batch_size}, {args.sizes} models, one torch thread")
    print(f"batches in one process: {' '.join(f'{w:.1f}' for w in local['batch_wall_s'])} s "
          f"(sum {report['batches_s']['in_process']:.1f} s)")
    print(f"batches in a Ray actor: {' '.join(f'{w:.1f}' for w in actor['batch_wall_s'])} s "
          f"(sum {report['batches_s']['ray_actor']:.1f} s)")
    print(f"actor / one process, all batches: {report['actor_over_in_process']:.3f}; after the first batch: "
          f"{steady_actor / steady_local if steady_local else float('nan'):.3f}")
    print(f"Ray: init {actor['ray_init_s']:.1f} s, dataset run {actor['dataset_wall_s']:.1f} s, of which outside "
          f"the batches {report['ray_wall_outside_batches_s']:.1f} s (actor start, model load)")
    print(f"scores identical: {report['scores_identical']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
