#!/usr/bin/env python
"""The bench_pipeline workload on any device: per-item, batched with the device's defaults, fp32 / TF32 / bf16, the
decisions each precision changes, and (on the CPU) int8 through the ct2 backend.

Same models and workload as ``bench_pipeline.py`` (random weights of the default architectures, real WoW responses,
the recorded run's decisions so random weights do not change the amount of work, questions of a fixed length whose
generated ids all decode to pieces). The
components are built the way a run builds them (:mod:`q2_plugins.backends`), so the batched modes use the device's
default batch sizes, token caps and window layout. Every stage is timed with the device synchronised after each of
its calls (CUDA runs asynchronously); each batched mode runs twice, first pass and steady state apart (a GPU pays
for the first sight of each input shape). Per stage: seconds, and FLOP/s as a share of the device's measured matmul
peak in that precision (FLOPs counted once in an extra, untimed fp32 pass). CPU stages: the seconds the run waits on
spaCy (on a GPU the personal filter works beside the question answerer, so only its wait counts), and the items each
stage was given. Decisions: how many QA spans, filter
outcomes, NLI labels and QG beams of the real models differ from the batched fp32 run's.

    python benchmarks/bench_gpu.py --device cuda --sizes paper --n 256 \
        --json benchmarks/results/bench_gpu_h200_<commit>.json
    python benchmarks/bench_gpu.py --device cpu --sizes tiny --n 8 --int8

Prints a table and writes JSON. Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.bench_pipeline import (  # noqa: E402
    BenchCandidates,
    BenchNLI,
    BenchQA,
    BenchQG,
    Oracle,
    build_models,
    decision_diff,
    fixed_length,
    load_workload,
)
from benchmarks.in_range import in_range_questions  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins import Q2Config, Q2Scorer, backends  # noqa: E402
from q2_plugins.backends.accel import device as devices  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, load_spacy  # noqa: E402
from scripts.render_docs import render_gpu as render  # noqa: E402

ROLES = ("qg", "qa", "nli")


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak(device: str, dtype: str, n: int) -> float:
    """TFLOP/s of an n x n x n product on ``device`` in ``dtype`` (tf32: float32 with TF32 allowed), best of 5 after
    a warm-up, the device synchronised."""
    torch_dtype = torch.float32 if dtype in ("float32", "tf32") else getattr(torch, dtype)
    a = torch.randn(n, n, dtype=torch_dtype, device=device)
    b = torch.randn(n, n, dtype=torch_dtype, device=device)
    with devices.matmul_precision(dtype == "tf32"), torch.inference_mode():
        a @ b
        synchronize(device)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            a @ b
            synchronize(device)
            best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


class Synced:
    """A component whose calls end with the device synchronised (so a stage's time is its own work)."""

    def __init__(self, inner: Any, device: str) -> None:
        self.inner, self.device = inner, device

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("generate", "answer", "predict"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            synchronize(self.device)
            return out

        return call


def components(paths: dict[str, Path], device: str, dtype: str, qg_len: int, buckets: bool = True) -> dict[str, Any]:
    """The three components as a run with these settings builds them (device defaults included); ``buckets`` off:
    each batch padded to its longest input instead of its length bucket (the default off the CPU)."""
    cfg = Q2Config(qg_model=str(paths["qg"]), qa_model=str(paths["qa"]), nli_model=str(paths["nli"]), device=device,
                   dtype=dtype, precision_check=0)
    comps = {role: backends.load(role, cfg) for role in ROLES}
    comps["qg"].runner.generate_overrides = fixed_length(qg_len)
    in_range_questions(comps["qg"])  # every generated id decodes to a piece (see bench_pipeline's docstring)
    if not buckets:
        for role in ROLES:
            comps[role].runner.bucket = False
    return comps


def set_batching(comps: dict[str, Any], batched: bool, defaults: dict[str, tuple[int, Optional[int]]]) -> None:
    for role, comp in comps.items():
        comp.batch_size, comp.batch_tokens = defaults[role] if batched else (1, None)
        comp.sort_by_length = batched


def run(comps: dict[str, Any], device: str, nlp: Any, oracle: Oracle, records: Sequence[Any], *, batched: bool,
        count_flops: bool = False) -> dict[str, Any]:
    wrappers = {"qg": BenchQG(Synced(comps["qg"], device), oracle), "qa": BenchQA(Synced(comps["qa"], device), oracle),
                "nli": BenchNLI(Synced(comps["nli"], device), oracle)}
    for w in wrappers.values():
        w.count_flops = count_flops
    most = max(getattr(c, "batch_size", 1) for c in comps.values())  # stage chunks as large as the largest batch
    # the scorer's own personal filter on the models' device: on a GPU it runs beside the question answerer
    cfg = Q2Config(per_item=not batched, precision_check=0, batch_size=most if batched else None, device=device)
    scorer = Q2Scorer(cfg, candidate_extractor=BenchCandidates(SpacyCandidateExtractor(nlp), oracle),
                      question_generator=wrappers["qg"], question_answerer=wrappers["qa"], nli=wrappers["nli"])
    synchronize(device)
    t0 = time.perf_counter()
    scorer.score(responses=[r.response for r in records], knowledge=[r.knowledge for r in records], explain=True)
    synchronize(device)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "responses_per_s": len(records) / wall, "stage_s": dict(scorer.timings),
            "stage_items": dict(scorer.stage_items),
            "flops": {role: w.flops for role, w in wrappers.items()} if count_flops else None,
            "real": {role: w.real for role, w in wrappers.items()},
            "work": {"qg_inputs": len(wrappers["qg"].real), "qa_inputs": len(wrappers["qa"].real),
                     "nli_inputs": len(wrappers["nli"].real)}}


def peak_shares(r: dict[str, Any], flops: dict[str, int], peak_tflops: float) -> dict[str, Optional[float]]:
    """Per model stage: its FLOPs over its seconds, as a share of the measured peak."""
    out: dict[str, Optional[float]] = {}
    for role in ROLES:
        s = r["stage_s"].get(role)
        out[role] = flops[role] / s / (peak_tflops * 1e12) if s and flops.get(role) and peak_tflops else None
    return out


def int8_on_cpu(paths: dict[str, Path], records: Sequence[Any], oracle: Oracle, nlp: Any, qg_len: int,
                repeats: int) -> dict[str, Any]:
    """QG and NLI on the workload's inputs: the project's fp32 (transformers, its CPU fast paths) against the ct2
    backend's int8, same batching, best of ``repeats`` in wall time and in the process's CPU time (the figure that
    holds on a machine shared with other work); and how many returned questions / labels differ."""
    fp32 = Q2Config(qg_model=str(paths["qg"]), nli_model=str(paths["nli"]), precision_check=0)
    int8 = fp32.replace(qg_model=f"ct2:{paths['qg']}", nli_model=f"ct2:{paths['nli']}")
    qg_pairs = list(dict.fromkeys((c, r.response) for r in records for c in oracle.cands.get(r.response, [])))
    nli_pairs = list(dict.fromkeys((r.knowledge, r.response) for r in records))
    out: dict[str, Any] = {"qg_inputs": len(qg_pairs), "nli_pairs": len(nli_pairs)}
    made = {}
    for name, cfg in (("fp32", fp32), ("int8", int8)):
        qg, nli = in_range_questions(backends.load("qg", cfg)), backends.load("nli", cfg)
        if name == "fp32":
            qg.runner.generate_overrides = fixed_length(qg_len)
        else:
            qg.generate_overrides = {"min_new_tokens": qg_len, "max_new_tokens": qg_len}
        made[name] = (qg, nli)
    for stage, pairs, call in (("qg", qg_pairs, lambda c: c[0].generate), ("nli", nli_pairs, lambda c: c[1].predict)):
        outputs, seconds, cpu = {}, {}, {}
        for name in ("fp32", "int8"):
            best = best_cpu = float("inf")
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                outputs[name] = call(made[name])(pairs)
                best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
            seconds[name], cpu[name] = best, best_cpu
        out[stage] = {"fp32_s": seconds["fp32"], "int8_s": seconds["int8"],
                      "int8_speedup": seconds["fp32"] / seconds["int8"], "fp32_cpu_s": cpu["fp32"],
                      "int8_cpu_s": cpu["int8"], "int8_cpu_speedup": cpu["fp32"] / cpu["int8"],
                      "changed": sum(a != b for a, b in zip(outputs["fp32"], outputs["int8"])),
                      "changed_first": sum(a[:1] != b[:1] for a, b in zip(outputs["fp32"], outputs["int8"]))
                      if stage == "qg" else None}
    return out


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--sizes", choices=("paper", "tiny"), default="paper")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=32, help="responses (default: %(default)s)")
    ap.add_argument("--qg-len", type=int, default=10, help="tokens of every generated question (default: %(default)s, "
                                                           "the recorded run's median question in the QG tokenizer)")
    ap.add_argument("--dtypes", default="", help="comma-separated: float32,tf32,bfloat16 (default: float32, and "
                                                 "tf32 and bfloat16 on a GPU that has them)")
    ap.add_argument("--no-per-item", action="store_true", help="skip the per-item reference")
    ap.add_argument("--no-buckets", action="store_true", help="batches padded to their longest input, not to its "
                                                               "length bucket (a GPU's default)")
    ap.add_argument("--int8", action="store_true", help="on the CPU: QG and NLI in fp32 vs the ct2 backend's int8")
    ap.add_argument("--int8-only", action="store_true", help="only the int8 comparison (no pipeline modes)")
    ap.add_argument("--repeats", type=int, default=2, help="int8 comparison: best of this many (default: 2)")
    ap.add_argument("--peak-n", type=int, default=0, help="matmul size of the peak (default: 8192 GPU, 2048 CPU)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (ct2 takes as many; default: torch's)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    device, data = args.device, Path(args.data)
    if args.threads:
        torch.set_num_threads(args.threads)
    props = devices.probe(device)
    gpu = props.name if props.kind == "cuda" else None
    if args.dtypes:
        dtypes = args.dtypes.split(",")
    else:
        dtypes = ["float32"] + (["tf32"] if devices.supports_tf32(props) else []) + \
                 (["bfloat16"] if props.kind == "cuda" and torch.cuda.is_bf16_supported() else [])
    paths = build_models(Path(args.models_dir), data, args.sizes)
    records = load_workload(data, args.n)
    oracle, nlp = Oracle(records), load_spacy("en_core_web_sm")
    peak_n = args.peak_n or (8192 if props.kind == "cuda" else 2048)
    report: dict[str, Any] = {
        "benchmark": "bench_gpu", "commit": commit(), "settings": vars(args) | {"dtypes": dtypes},
        "machine": {"gpu": gpu, "cpu": cpu_name(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "torch_threads": torch.get_num_threads(),
                    "free_gb": None if props.free_bytes is None else props.free_bytes / 2**30},
        "peak_tflops": {d: matmul_peak(device, d, peak_n) for d in dtypes}, "modes": {},
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    ref_real = None
    for dtype in [] if args.int8_only else dtypes:
        comps = components(paths, device, dtype, args.qg_len, buckets=not args.no_buckets)
        defaults = {role: (c.batch_size, c.batch_tokens) for role, c in comps.items()}
        if dtype == "float32" and not args.no_per_item:
            set_batching(comps, False, defaults)
            r = run(comps, device, nlp, oracle, records, batched=False)
            report["modes"]["per-item float32"] = {k: v for k, v in r.items() if k != "real"}
        set_batching(comps, True, defaults)
        first = run(comps, device, nlp, oracle, records, batched=True)
        steady = run(comps, device, nlp, oracle, records, batched=True)
        mode = {"defaults": {role: {"batch_size": s, "batch_tokens": t} for role, s, t in
                             ((role, *defaults[role]) for role in ROLES)},
                "first": {k: v for k, v in first.items() if k != "real"},
                **{k: v for k, v in steady.items() if k != "real"}}
        if dtype == "float32":
            ref_real = steady["real"]
            flops = run(comps, device, nlp, oracle, records, batched=True, count_flops=True)["flops"]
            report["flops"] = flops
        else:
            mode["decisions_vs_float32"] = decision_diff(ref_real, steady["real"], oracle) if ref_real else None
        if report.get("flops"):
            mode["peak_share"] = peak_shares(steady, report["flops"], report["peak_tflops"][dtype])
        report["modes"][f"batched {dtype}"] = mode
        del comps
        if props.kind == "cuda":
            torch.cuda.empty_cache()
    if args.int8:
        report["int8"] = int8_on_cpu(paths, records, oracle, nlp, args.qg_len, args.repeats)
    print(render(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
