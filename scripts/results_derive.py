"""Figures derived from a pipeline benchmark report (``bench_pipeline.py``'s JSON): ceilings and targets.

Plain arithmetic on the report, no torch: ``benchmarks/bench_pipeline.py`` (when measuring and with ``--from-json``)
and ``scripts/render_docs.py`` (the figures of ``docs/results.md``) share these derivations.
"""

from __future__ import annotations

from typing import Any


def derive(report: dict[str, Any]) -> dict[str, Any]:
    """Add the derived ``ceilings`` and ``targets`` to a report (in place) and return it."""
    report["ceilings"] = ceilings(report)
    report["targets"] = targets(report)
    return report


def ceilings(rep: dict[str, Any]) -> dict[str, Any]:
    """The most any batched run could gain over this run's per-item reference: its wall time against the batched
    run's model FLOPs at the measured matmul peak (every stage at 100%) plus the batched run's time outside model
    calls. A speed-up target above the ceiling cannot be met on this machine by batching or kernels alone."""
    eff = rep.get("stage_efficiency_batched_fp32")
    if not eff:
        return {}
    batched = rep["modes"]["batched"]
    outside = batched["wall_s"] - sum(batched["call_s"].values())
    gflop = sum(e["gflop"] for e in eff.values())
    per_item = rep["modes"]["per_item"]["wall_s"]
    out = {"gflop": gflop, "outside_model_calls_s": outside}
    for dtype, key in (("float32", "fp32"), ("bfloat16", "bf16")):
        if dtype not in rep["peak_gflops"]:  # no native bf16 on the CPU: its peak was not measured
            continue
        best = gflop / rep["peak_gflops"][dtype] + outside
        out[f"{key}_seconds_at_peak"] = best
        out[f"{key}_speedup_ceiling_vs_per_item"] = per_item / best
    return out


def efficiency(flops: dict[str, int], r: dict[str, Any], peak: float) -> dict[str, Any]:
    """FLOP rate of each model stage, and its share of the matmul ``peak``: over its time inside model calls
    (generate's beam bookkeeping included) and inside forward passes only. FLOPs are counted on the batched run, so
    they include padding; ``padding_share`` is the share of computed input positions that were padding."""
    out = {}
    for role in ("qg", "qa", "nli"):
        tok = r["tokens"][role]
        gflop, call_s, forward_s = flops[role] / 1e9, r["call_s"][role], r["forward_s"][role]
        rate = gflop / call_s if call_s else float("nan")
        rate_in_forward = gflop / forward_s if forward_s else float("nan")
        out[role] = {
            "gflop": gflop, "call_s": call_s, "forward_s": forward_s, "gflop_per_s": rate,
            "gflop_per_s_in_forward": rate_in_forward, "peak_gflop_per_s": peak, "share_of_peak": rate / peak,
            "share_of_peak_in_forward": rate_in_forward / peak,
            "padding_share": 1 - tok["real"] / tok["padded"] if tok["padded"] else 0.0,
        }
    return out


def targets(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """The performance targets, each with the measured value (None: not measured in this run)."""
    m = rep["modes"]
    eff = rep.get("stage_efficiency_batched_fp32", {})
    rows = [
        ("fp32 batched / per-item speed-up", ">= 2", rep["speedup_batched_vs_per_item"], lambda v: v >= 2),
        ("fp32 batched / per-item on PyTorch's matmul (as the original)", ">= 2",
         rep["torch_kernels"]["speedup_batched_vs_torch_per_item"] if "torch_kernels" in rep else None,
         lambda v: v >= 2),
        ("per-item and batched results identical", "yes", rep["identical_per_item_vs_batched"]["results"],
         lambda v: v is True),
        ("per-item and batched raw model outputs identical", "yes",
         rep["identical_per_item_vs_batched"]["raw_model_outputs"], lambda v: v is True),
        ("QG questions identical to the library's generate", "yes",
         rep["qg_vs_library_generate"]["inputs_with_other_questions"] == 0, lambda v: v is True),
    ]
    for role in ("qg", "qa", "nli"):
        rows.append((f"{role} stage share of the fp32 matmul peak", ">= 0.80",
                     eff[role]["share_of_peak"] if role in eff else None, lambda v: v >= 0.8))
    rows += [
        ("bf16 speed-up over the fp32 per-item reference", ">= 4",
         rep["bf16"]["speedup_vs_fp32_per_item"] if "bf16" in rep else None, lambda v: v >= 4),
        ("bf16 speed-up over the fp32 per-item reference on PyTorch's matmul", ">= 4",
         rep["torch_kernels"]["per_item"]["wall_s"] / rep["bf16"]["wall_s"]
         if "bf16" in rep and "torch_kernels" in rep else None, lambda v: v >= 4),
        ("share of batched wall time inside model forwards", ">= 0.75", m["batched"]["forward_share"],
         lambda v: v >= 0.75),
        ("cached re-run speed-up", ">= 50", rep["speedup_cached_vs_first"], lambda v: v >= 50),
        ("peak RSS with the three fp32 models, GB", "<= 4", rep["peak_rss_gb_fp32"], lambda v: v <= 4),
        ("time for 10x the responses / time for N", "<= 10.5",
         rep["scaling"]["time_ratio"] if "scaling" in rep and rep["scaling"]["n_big"] == 10 * rep["scaling"]["n"]
         else None, lambda v: v <= 10.5),
    ]
    return [{"target": name, "goal": goal, "measured": v, "met": None if v is None else bool(ok(v))}
            for name, goal, v, ok in rows]
