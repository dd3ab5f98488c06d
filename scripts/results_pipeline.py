"""The sections of ``docs/results.md`` on the scoring pipeline's runs and the Ray engine."""

from __future__ import annotations

from typing import Any

from scripts.results_common import (
    BF16_TORCH_TARGET,
    LINEAR,
    MAIN_RUN,
    SECOND_RUN,
    TORCH_TARGET,
    Results,
    command_of,
    commit,
    commit_of,
    cpu_of,
    met,
    pct,
    rounded,
    sec,
    shown,
    source,
    span,
    stage_share,
    table,
    torch_peaks,
    what,
    wrap,
    x,
)


def run_tables(res: Results) -> str:
    name = MAIN_RUN
    r = res.run(name)
    m, tk, s = r["modes"], r["torch_kernels"], r["settings"]
    flags = " ".join(f"--{k.replace('_', '-')}" for k in ("bf16", "int8", "torch_kernels") if s.get(k))
    head = what(f"Each mode of `q2 score`'s pipeline on {s['n']} real WoW responses (every {s['scale']}th of the "
                f"{r['scaling']['n_big']} of the scaling run) with random-weight models of the paper's sizes",
                f"python benchmarks/bench_pipeline.py --n {s['n']} --scale {s['scale']} {flags}",
                f"{source(res, name)[:-1]}, torch {r['machine']['torch'].split('+')[0].rsplit('.', 1)[0]} CPU "
                f"(`--from-json` on the file re-prints the figures with the derived ceilings).")
    rows = [("per-item, PyTorch's matmul (how the original runs)", tk["per_item"], False),
            ("per-item reference (`--per-item`)", m["per_item"], False),
            ("batched, PyTorch's matmul (`--cpu-kernels torch`)", tk["batched"], False),
            ("**batched default**", m["batched"], True),
            ("re-run from the cache", m["cached"], False),
            ("batched, bf16", r["bf16"], False),
            ("batched, dynamic int8 (on PyTorch's matmul)", r["int8"], False)]
    modes = []
    for label, run, bold in rows:
        st = run["stage_s"]
        if run is m["cached"]:
            cells = [f"{run['wall_s']:.3f}", f"{run['responses_per_s']:.0f}"] + ["-"] * 5
        else:
            wall, rps = sec(run["wall_s"]), f"{run['responses_per_s']:.3f}"
            if bold:
                wall, rps = f"**{wall}**", f"**{rps}**"
            cells = [wall, rps, pct(run["forward_share"]), sec(st["qg"]), sec(st["qa"]), sec(st["nli"]),
                     sec(st["candidates"] + st["personal"])]
        modes.append([label] + cells)

    same = r["identical_per_item_vs_batched"]
    identical = [k for k, v in (("results", same["results"]), ("raw model outputs", same["raw_model_outputs"]),
                                ("input tokens", same["input_tokens"])) if v]
    c, eff, sc, g = r["ceilings"], r["stage_efficiency_batched_fp32"], r["scaling"], r["qg_vs_library_generate"]
    low = [role.upper() for role in ("qg", "nli", "qa") if not met(r, f"{role} stage share of the fp32 matmul peak")]
    tok = sc["token_ratio"]
    targets = [
        ["fp32 batched / per-item, same kernels", ">= 2x, same scores",
         f"{x(r['speedup_batched_vs_per_item'])} (ceiling {x(c['fp32_speedup_ceiling_vs_per_item'])}); "
         f"{', '.join(identical[:-1]) + ' and ' + identical[-1] if len(identical) > 1 else ''.join(identical)} "
         f"identical", shown(met(r, 'fp32 batched / per-item speed-up'))],
        ["fp32 batched / per-item on PyTorch's matmul (as the original ran)", ">= 2x",
         x(tk['speedup_batched_vs_torch_per_item']), shown(met(r, TORCH_TARGET))],
        [f"each model stage, share of the fp32 matmul peak ({r['peak_gflops']['float32']:.0f} GFLOP/s)", ">= 80%",
         f"QA {pct(eff['qa']['share_of_peak'])}, QG {pct(eff['qg']['share_of_peak'])}, "
         f"NLI {pct(eff['nli']['share_of_peak'])}", shown(not low, ' (' + ', '.join(low) + ')')],
        ["bf16 / fp32 per-item, same kernels", ">= 4x",
         f"{x(r['bf16']['speedup_vs_fp32_per_item'])} (ceiling {x(c['bf16_speedup_ceiling_vs_per_item'])}; "
         f"{x(r['bf16']['speedup_vs_fp32_batched'])} the fp32 batched run)",
         shown(met(r, 'bf16 speed-up over the fp32 per-item reference'))],
        ["bf16 / fp32 per-item on PyTorch's matmul", ">= 4x", x(tk['per_item']['wall_s'] / r['bf16']['wall_s']),
         shown(met(r, BF16_TORCH_TARGET))],
        ["wall time inside model forward passes", ">= 75%", pct(m['batched']['forward_share']),
         shown(met(r, 'share of batched wall time inside model forwards'))],
        ["cached re-run / first run", ">= 50x", f"{rounded(r['speedup_cached_vs_first'])}x",
         shown(met(r, 'cached re-run speed-up'))],
        ["peak RSS, three fp32 paper-size models loaded", "<= 4 GB",
         f"{r['peak_rss_gb_fp32']:.2f} GB ({r['current_rss_after_loading_gb']:.2f} GB resident after loading)",
         shown(met(r, 'peak RSS with the three fp32 models, GB'))],
        [f"{sc['n_big']} / {sc['n']} responses", "<= 10.5x the time",
         f"{x(sc['time_ratio'])} (for {tok['qa']:.1f}x the QA tokens, {tok['qg']:.1f}x QG, {tok['nli']:.1f}x NLI)",
         shown(met(r, 'time for 10x the responses / time for N'))],
        ["QG questions identical to the library's `generate`", "-",
         f"{g['inputs'] - g['inputs_with_other_questions']} of {g['inputs']} inputs", ""],
    ]
    return (head + "\n" + table(["mode", "wall s", "resp/s", "in forwards", "QG s", "QA s", "NLI s", "spaCy s"],
                                modes, right=range(1, 8))
            + "\n" + table(["target", "goal", "measured", ""], targets, right=(2,)))


def where_time_goes(res: Results) -> str:
    r, r2, lin = res.run(MAIN_RUN), res.run(SECOND_RUN), res.linear()
    runs = (r, r2)

    def same_all(rr: dict[str, Any]) -> bool:
        same = rr["identical_per_item_vs_batched"]
        return all(same[k] for k in ("results", "raw_model_outputs", "input_tokens"))

    def need(rr: dict[str, Any]) -> float:
        """The share of the fp32 peak the batched run's FLOPs would need, on average, for 2x the per-item run."""
        cc = rr["ceilings"]
        return cc["gflop"] / (rr["modes"]["per_item"]["wall_s"] / 2 - cc["outside_model_calls_s"]) \
            / rr["peak_gflops"]["float32"]

    def g(rr: dict[str, Any]) -> dict[str, Any]:
        return rr["qg_vs_library_generate"]

    def qa_per_item(rr: dict[str, Any]) -> float:
        e = rr["stage_efficiency_batched_fp32"]["qa"]
        return e["gflop"] / rr["modes"]["per_item"]["call_s"]["qa"] / rr["peak_gflops"]["float32"]

    facts = [
        ("fp32 matmul peak, GFLOP/s", lambda rr: f"{rr['peak_gflops']['float32']:.0f}"),
        ("bf16 matmul peak, GFLOP/s", lambda rr: f"{rr['peak_gflops']['bfloat16']:.0f}"),
        ("per-item s", lambda rr: sec(rr["modes"]["per_item"]["wall_s"])),
        ("batched s (batched / per-item)", lambda rr: f"{sec(rr['modes']['batched']['wall_s'])} "
                                                      f"({x(rr['speedup_batched_vs_per_item'])})"),
        ("bf16 s (fp32 per-item / bf16)", lambda rr: f"{sec(rr['bf16']['wall_s'])} "
                                                     f"({x(rr['bf16']['speedup_vs_fp32_per_item'])})"),
        ("per-item on PyTorch's matmul s (/ batched default)",
         lambda rr: f"{sec(rr['torch_kernels']['per_item']['wall_s'])} "
                    f"({x(rr['torch_kernels']['speedup_batched_vs_torch_per_item'])})"),
        ("batched run's GFLOP", lambda rr: f"{rr['ceilings']['gflop']:,.0f}"),
        ("outside model calls s", lambda rr: sec(rr["ceilings"]["outside_model_calls_s"])),
        ("fp32 at 100% of the peak: s (ceiling over per-item)",
         lambda rr: f"{sec(rr['ceilings']['fp32_seconds_at_peak'])} "
                    f"({x(rr['ceilings']['fp32_speedup_ceiling_vs_per_item'])})"),
        ("bf16 at 100% of the peak: s (ceiling over per-item)",
         lambda rr: f"{sec(rr['ceilings']['bf16_seconds_at_peak'])} "
                    f"({x(rr['ceilings']['bf16_speedup_ceiling_vs_per_item'])})"),
        ("share of the peak 2x over per-item needs", lambda rr: pct(need(rr))),
        ("QA's share of the GFLOP", lambda rr: pct(rr["stage_efficiency_batched_fp32"]["qa"]["gflop"]
                                                    / rr["ceilings"]["gflop"])),
        ("per-item QA, share of the peak", lambda rr: pct(qa_per_item(rr))),
        ("batched stage shares of the peak, QA / QG / NLI",
         lambda rr: " / ".join(pct(stage_share(rr, k)) for k in ("qa", "qg", "nli"))),
        ("QG s, our beam search / `generate`",
         lambda rr: f"{sec(g(rr)['own_call_s'])} / {sec(g(rr)['library_call_s'])}"),
        ("QG inputs with other questions than `generate`'s",
         lambda rr: f"{g(rr)['inputs_with_other_questions']} of {g(rr)['inputs']}"),
        ("results, raw outputs and input tokens identical", lambda rr: "yes" if same_all(rr) else "NO"),
        (f"{r['scaling']['n_big']} responses, time over {r['settings']['n']}",
         lambda rr: x(rr["scaling"]["time_ratio"])),
        ("peak RSS GB", lambda rr: f"{rr['peak_rss_gb_fp32']:.2f}"),
    ]
    out = [wrap(f"The two paper-size runs of the command above ({commit(MAIN_RUN)}, and {commit(SECOND_RUN)}: "
                f"`benchmarks/results/{SECOND_RUN}`, {cpu_of(SECOND_RUN, r2)}); ceilings from "
                "`scripts/results_derive.py`."), "",
           table(["", commit(MAIN_RUN), commit(SECOND_RUN)], [[label, f(r), f(r2)] for label, f in facts], (1, 2))]

    tk = r["torch_kernels"]
    d = tk["decisions_vs_onednn"]
    unchanged = not (d["qa_span_changed"] or d["nli_label_changed"] or d["qg_beams_changed"])
    five = [row for row in lin if row["rows"] == 5]
    kernels = [
        ["time on PyTorch's matmul / packed oneDNN, per-item", x(tk["speedup_onednn_vs_torch_per_item"])],
        ["time on PyTorch's matmul / packed oneDNN, batched", x(tk["speedup_onednn_vs_torch_batched"])],
        ["results identical", "yes" if tk["identical_results_vs_onednn"] else "no"],
        ["QA spans, NLI labels, QG beams changed", "none" if unchanged else "some"],
        ["2048 x 2048 float32 product, PyTorch's matmul GFLOP/s (start and end of both runs)",
         span(torch_peaks(runs, "torch"))],
        ["2048 x 2048 float32 product, oneDNN packed GFLOP/s", span(torch_peaks(runs, "onednn"))],
        ["the models' Linear shapes, PyTorch's matmul GFLOP/s (5-row beam steps)",
         f"{span([row['torch'] for row in lin])} ({span([row['torch'] for row in five])})"],
        ["the models' Linear shapes, oneDNN packed GFLOP/s", span([row["onednn"] for row in lin])],
    ]
    out += ["", "Packed oneDNN Linear layers (the default, with the one-pass GELU) against PyTorch's matmul and the "
                f"models' own activations, run {commit(MAIN_RUN)}:", "", table(["", ""], kernels, (1,))]

    lin_text = res.text(LINEAR)
    out += [what("The models' Linear shapes alone, PyTorch's `F.linear` against oneDNN with a packed weight",
                 "python benchmarks/bench_linear.py",
                 f"{source(res, LINEAR)[:-1]}; {lin_text.splitlines()[0].strip()}."),
            "\n".join(line for line in lin_text.splitlines() if line.startswith("|")) + "\n"]

    m, eff, bf = r["modes"], r["stage_efficiency_batched_fp32"], r["bf16"]["efficiency"]
    gg, w = g(r), m["batched"]["work"]
    stages = [
        ["QA (ALBERT-xlarge)", f"{eff['qa']['gflop']:,.0f}", f"{eff['qa']['gflop_per_s']:.0f}",
         pct(eff["qa"]["share_of_peak"]), f"{100 * eff['qa']['padding_share']:.1f}%",
         pct(bf["qa"]["share_of_peak"]),
         f"{eff['qa']['gflop'] / m['batched']['tokens']['qa']['real']:.1f} GFLOP per token; packed windows"],
        ["QG", f"{eff['qg']['gflop']:,.0f}", f"{eff['qg']['gflop_per_s']:.0f}", pct(eff["qg"]["share_of_peak"]),
         f"{100 * eff['qg']['padding_share']:.1f}%", pct(bf["qg"]["share_of_peak"]),
         f"{pct(eff['qg']['gflop'] / gg['library_call_s'] / r['peak_gflops']['float32'])} of the peak with "
         f"`generate`; encoder per length-sorted batch"],
        ["NLI", f"{eff['nli']['gflop']:,.0f}", f"{eff['nli']['gflop_per_s']:.0f}", pct(eff["nli"]["share_of_peak"]),
         f"{100 * eff['nli']['padding_share']:.1f}%", pct(bf["nli"]["share_of_peak"]),
         f"{w['nli_inputs']} pairs, {m['batched']['tokens']['nli']['real']} input tokens, "
         f"{sec(eff['nli']['call_s'])} s"],
    ]
    out += ["", f"Model stages of the batched run {commit(MAIN_RUN)}:", "",
            table(["stage", "GFLOP", "GFLOP/s", "share of fp32 peak", "padding", "bf16: share of bf16 peak", ""],
                  stages, (1, 2, 3, 4, 5))]

    b, i = r["bf16"]["decisions_vs_fp32"], r["int8"]["decisions_vs_fp32"]
    decisions = [["QA spans changed (of questions)", pct(b["qa_span_changed"]), pct(i["qa_span_changed"])],
                 ["QG beams changed (of inputs)", pct(b["qg_beams_changed"]), pct(i["qg_beams_changed"])],
                 ["NLI labels changed", pct(b["nli_label_changed"]), pct(i["nli_label_changed"])],
                 ["Q² mean absolute difference", f"{r['bf16']['q2_abs_diff_mean']:.3f}",
                  f"{r['int8']['q2_abs_diff_mean']:.3f}"]]
    out += ["", f"Decisions changed against fp32, random-weight models, run {commit(MAIN_RUN)} (int8: `torch.ao` "
                "dynamic quantization, benchmark-only):", "", table(["", "bf16", "int8"], decisions, (1, 2))]
    return "\n".join(out)


# The same fp32 command at the commit before the restructure and after it, alternating on one machine.
RESTRUCTURE_RUNS = ["bench_n16_fp32_r1_6806de3.json", "bench_n16_fp32_r1_87ff5ac.json",
                    "bench_n16_fp32_r2_6806de3.json", "bench_n16_fp32_r2_a814593.json"]


def restructure_check(res: Results) -> str:
    rows = []
    for name in RESTRUCTURE_RUNS:
        r = res.raw(name)
        m, same = r["modes"], r["identical_per_item_vs_batched"]
        rows.append([name.split("_")[3], commit(name), f"{m['per_item']['wall_s']:.1f}",
                     f"{m['batched']['wall_s']:.1f}",
                     x(r["speedup_batched_vs_per_item"]), same["results"] and same["raw_model_outputs"],
                     r["qg_vs_library_generate"]["inputs_with_other_questions"] == 0])
    head = what("The same fp32 run at the commit before a restructure and after it, alternating on one machine "
                "(a run that shared the CPU with other work shows as an outlier)",
                "python benchmarks/bench_pipeline.py --n 16 --no-flops",
                " ".join(source(res, name) for name in RESTRUCTURE_RUNS))
    return head + "\n" + table(["run", "commit", "per-item s", "batched s", "batched / per-item",
                                "identical results", "QG = `generate`"], rows, (2, 3, 4))


def per_response(res: Results) -> str:
    """What one response costs in the batched default and in bf16, over the two paper-size runs (capacity planning)."""
    rows = []
    for name in (MAIN_RUN, SECOND_RUN):
        r = res.run(name)
        n, b = r["settings"]["n"], r["modes"]["batched"]
        st = b["stage_s"]
        rows.append([commit_of(name), r["machine"]["cpu_count"], f"{b['wall_s'] / n:.2f}",
                     f"{r['bf16']['wall_s'] / n:.2f}",
                     f"{st['qa'] / n:.2f} / {st['qg'] / n:.2f} / {st['nli'] / n:.2f}"])
    return (wrap("The batched default's wall time per response, and per stage, of the two paper-size runs above.")
            + "\n\n" + table(["run", "cores", "fp32 batched s / response", "bf16 batched s / response",
                              "QA / QG / NLI s / response"], rows, (1, 2, 3)))


def before_after(res: Results) -> str:
    name = "bench_paper_before_after_27.json"
    d = res.raw(name)
    command, _, how = d["command"].partition(" (")
    rows = []
    for run in d["runs"]:
        same = run["identical"]["results"] and run["identical"]["raw_model_outputs"]
        rows.append([run["tree"], run["run"], f"{run['per_item_s']:.1f}", f"{run['batched_s']:.1f}",
                     x(run["batched_over_per_item"]), same])
    head = what(f"The same comparison for before = {d['before']}, after = {d['after']} ({how}",
                command, source(res, name))
    return head + "\n" + table(["tree", "run", "per-item s", "batched s", "batched / per-item", "identical results"],
                               rows, (1, 2, 3, 4))


RAY_RUNS = ["bench_ray_tiny_f79d892.json", "bench_ray_tiny.json", "bench_ray_tiny_quiet.json",
            "bench_ray_paper_n16_f79d892.json", "bench_ray_paper_n48_da79d21.json"]
RAY_KINDS = [("single_process", "`q2 score` (one process)"), ("ray_1_actor", "`--engine ray --concurrency 1`"),
             ("ray_2_actors", "`--engine ray --concurrency 2`")]


def ray_runs(res: Results) -> str:
    out, summary = [], []
    for name in RAY_RUNS:
        d = res.raw(name)
        s, sm = d["settings"], d["summary"]
        out.append(what(f"{s['sizes'].capitalize()} models, {s['n']} and {s['n_small']} rows, "
                        f"{s['ray_batch_size']} rows per scoring call", command_of(d["command"]), source(res, name)))
        rows = []
        for key, label in RAY_KINDS:
            r = d["runs"][key]
            rows.append([label, f"{r['rows_per_s']:.2f}",
                         "-" if r["marginal_rows_per_s"] is None else f"{r['marginal_rows_per_s']:.2f}",
                         "-" if r["fixed_s"] is None else f"{r['fixed_s']:.1f}",
                         f"{r['marginal_cpu_s_per_row']:.4f}", f"{r['fixed_cpu_s']:.1f}"])
        out.append(table(["run", f"rows/s, {s['n']} rows", "marginal rows/s", "fixed s", "CPU s per row",
                          "fixed CPU s"], rows, range(1, 6)))
        same = sm["results_identical_to_single_process"]
        summary.append([f"`{name}`", f"{sm['ray_overhead_end_to_end']:+.0%}", f"{sm['ray_overhead_marginal']:+.0%}",
                        f"{sm['ray_overhead_cpu_per_row']:+.0%}", x(sm["scaling_1_to_2_marginal"]),
                        x(sm["scaling_1_to_2_end_to_end"]),
                        "yes" if all(same.values()) else "NO (" + ", ".join(k for k, v in same.items() if not v) + ")"])
    out.append("The runs above side by side: one actor against one process, and 1 -> 2 actors.\n")
    out.append(table(["results file", "1 actor / process, end to end", "marginal", "CPU per row",
                      "1 -> 2 actors, marginal", "end to end", "results identical to one process"],
                     summary, range(1, 6)))
    return "\n".join(out)


def ray_startup(res: Results) -> str:
    name = "bench_ray_startup_tiny.json"
    d = res.raw(name)
    rows = [[f"`{key}`", ", ".join(f"{v:.1f}" for v in runs), f"{d['cli_median_s'][key]:.1f}"]
            for key, runs in d["cli_s"].items()]
    steps = d["steps_median_s"]
    return (what("`q2 score` on 2 rows with tiny models, in one process and on the Ray engine, at two commits",
                 command_of(d["command"]), source(res, name)) + "\n"
            + table(["command (commit)", "runs s", "median s"], rows, (2,)) + "\n"
            + "Steps of one `--engine ray` run, medians:\n\n"
            + table([k.replace("_", " ") + " s" for k in steps], [[f"{v:.1f}" for v in steps.values()]],
                    range(len(steps))))


RAY_ACTOR = ["bench_ray_actor_paper_8d6f2ec.json", "bench_ray_actor_tiny_8d6f2ec.json"]


def ray_actor(res: Results) -> str:
    rows, commands = [], []
    for name in RAY_ACTOR:
        d = res.raw(name)
        s = d["settings"]
        commands.append(f"`python benchmarks/bench_ray_actor.py --sizes {s['sizes']} --n {s['n']} "
                        f"--batch-size {s['batch_size']}`")
        rows.append([s["sizes"], f"{s['n']}, {s['batch_size']}", f"{d['batches_s']['in_process']:.1f}",
                     f"{d['batches_s']['ray_actor']:.1f}", f"{d['actor_over_in_process'] - 1:+.0%}",
                     f"{d['actor_over_in_process_after_first_batch'] - 1:+.0%}",
                     f"{d['ray_wall_outside_batches_s']:.1f}", d["scores_identical"], source(res, name)])
    return (wrap("The batches of one run scored by `score()` calls in this process and by the same calls inside "
                 "one Ray actor. Commands: " + ", ".join(commands) + ".") + "\n\n"
            + table(["models", "rows, rows per call", "one process s", "Ray actor s", "actor / process",
                     "without the first batch", "outside the batches s", "scores identical", "source"],
                    rows, range(2, 7)))
