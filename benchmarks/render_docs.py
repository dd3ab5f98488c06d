#!/usr/bin/env python
"""Write ``docs/results.md``, the one page of measured figures, from ``benchmarks/results/``.

Every figure of a benchmark run that the docs show comes from one results file: the pipeline runs' JSON
(``bench_n16_<commit>.json``, with the ceilings and targets derived by ``bench_derive.py``, as
``bench_pipeline.py --from-json`` prints them), ``bench_linear.txt``, the Ray, lm-eval, significance, report and
training benchmarks' files. The page is generated whole (the user pages link to it and quote no figure); each
section names its results files with the CPU / GPU they ran on and the commit they measured. ``--check`` rewrites
nothing and exits 1 with a diff when the page is not what the results render, or when a results file is rendered
nowhere (and not listed in ``NOT_RENDERED`` with the reason).

    python benchmarks/render_docs.py [--check]
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_derive import derive  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "results.md"
COMMAND = "python benchmarks/render_docs.py"
# The run whose table the page shows, and the repeat of the same command it is compared with.
MAIN_RUN = "bench_n16_6f96214.json"
SECOND_RUN = "bench_n16_6806de3.json"
LINEAR = "bench_linear.txt"
WIDTH = 118  # the page's line width
# Results files the page does not render, each with the reason.
NOT_RENDERED: dict[str, str] = {
    "bench_train_recipes.md": "a generated page itself (benchmarks/train_table.py); the page links it",
    "bench_train_recipes_before_1517e70.json": "rendered into bench_train_recipes.md by benchmarks/train_table.py",
    "bench_train_recipes_after_afd2be9.json": "rendered into bench_train_recipes.md by benchmarks/train_table.py",
    "bench_train_issue41.md": "a generated page itself (benchmarks/train_table.py); the page links it",
    "bench_train_issue41_before_cfaa21f.json": "rendered into bench_train_issue41.md by benchmarks/train_table.py",
    "bench_train_issue41_after_0386f63.json": "rendered into bench_train_issue41.md by benchmarks/train_table.py",
}
# Files written before the benchmarks recorded the CPU's model: the CPU stated with the run when it was committed.
CPU_STATED: dict[str, str] = {
    "bench_n16_6f96214.json": "2-core AMD EPYC with AVX-512 BF16",
    "bench_n16_6806de3.json": "2-core AMD EPYC with AVX-512 BF16",
    "bench_linear.txt": "2-core AMD EPYC with AVX-512 BF16",
    "bench_n16_fp32_r1_6806de3.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r1_87ff5ac.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r2_6806de3.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r2_a814593.json": "2-core Intel Xeon with AMX",
    "bench_ray_startup_tiny.json": "2-core Intel(R) Xeon(R) Processor",
}
NOT_RECORDED = "not recorded"


class Results:
    """The results files, loaded once, with what was read recorded (so an unread file can be reported)."""

    def __init__(self, root: Path = RESULTS) -> None:
        self.root = root
        self.read: set[str] = set()

    def raw(self, name: str) -> dict[str, Any]:
        self.read.add(name)
        return json.loads((self.root / name).read_text())

    def run(self, name: str) -> dict[str, Any]:
        return derive(self.raw(name))

    def text(self, name: str) -> str:
        self.read.add(name)
        return (self.root / name).read_text()

    def linear(self) -> list[dict[str, Any]]:
        """``bench_linear.txt``'s table rows: model, layer, rows, F.linear and oneDNN GFLOP/s, speed-up."""
        out = []
        for line in self.text(LINEAR).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and cells[3].isdigit():
                out.append({"model": cells[0], "layer": cells[1], "rows": int(cells[3]), "torch": float(cells[4]),
                            "onednn": float(cells[5]), "speedup": float(cells[6].rstrip("x"))})
        if not out:
            raise ValueError(f"{self.root / LINEAR}: no table rows found; re-run benchmarks/bench_linear.py into it")
        return out


# ---- where a figure comes from: the CPU / GPU and the commit, as the results file records them
def cpu_of(name: str, data: Any = None, text: str = "") -> str:
    """The device a results file's figures were measured on: a GPU when its command ran on one, else the CPU."""
    record = data if isinstance(data, dict) else {}
    machine = record.get("machine", {}) if isinstance(record.get("machine"), dict) else {}
    gpu = machine.get("gpu") or record.get("gpu")
    if gpu:
        return f"GPU {gpu}"
    cpu = machine.get("cpu") or record.get("cpu")
    if not cpu and text:
        found = re.findall(r"^# CPU: ([^;\n]+)", text, flags=re.M)
        cpu = "; ".join(dict.fromkeys(found)) if found else None
    cpu = cpu or CPU_STATED.get(name)
    if not cpu:
        return f"CPU {NOT_RECORDED}"
    cores = machine.get("cpu_count") or record.get("cores")
    return f"{cores}-core {cpu}" if cores and "core" not in cpu else cpu


def commit_of(name: str, data: Any = None) -> str:
    """The commit a results file measured: its name's ``_<7 hex>`` suffix, else what the file records."""
    found = re.search(r"_([0-9a-f]{7})\.\w+$", name)
    if found:
        return found[1]
    record = data if isinstance(data, dict) else {}
    if record.get("commit"):
        return str(record["commit"])
    if record.get("before") and record.get("after"):
        return f"before {record['before']}, after {record['after']}"
    keyed = sorted({c for key in record.get("cli_s", {}) for c in re.findall(r"\(([0-9a-f]{7})\)", key)})
    return ", ".join(keyed) if keyed else NOT_RECORDED


def source(res: Results, name: str) -> str:
    """One line naming a results file, its CPU / GPU and its commit."""
    path = res.root / name
    data = json.loads(path.read_text()) if name.endswith(".json") else None
    text = "" if data is not None else path.read_text()
    res.read.add(name)
    return f"`benchmarks/results/{name}`: {cpu_of(name, data, text)}; commit {commit_of(name, data)}."


# ---- number formats: one place, so the same figure reads the same everywhere
def x(v: float) -> str:
    return f"{v:.2f}x"


def pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def sec(v: float) -> str:
    return f"{v:.1f}"


def span(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def rounded(v: float) -> str:
    """Two significant figures, thousands separated: 9494.9 -> 9,500."""
    return f"{float(f'{v:.2g}'):,.0f}"


def wrap(text: str) -> str:
    """A paragraph or a bullet wrapped at the page's width (a bullet's continuation lines indented)."""
    return textwrap.fill(text, width=WIDTH, subsequent_indent="  " if text.startswith("- ") else "",
                         break_long_words=False, break_on_hyphens=False)


def commit(name: str) -> str:
    return name.rsplit("_", 1)[-1].removesuffix(".json")


def met(rep: dict[str, Any], target: str) -> Optional[bool]:
    return next(t["met"] for t in rep["targets"] if t["target"] == target)


def shown(ok: Optional[bool], failing: str = "") -> str:
    return "not measured" if ok is None else "met" if ok else f"**not met**{failing}"


def stage_share(rep: dict[str, Any], role: str) -> float:
    return rep["stage_efficiency_batched_fp32"][role]["share_of_peak"]


def torch_peaks(reps: Sequence[dict[str, Any]], kernel: str) -> list[float]:
    """A 2048 x 2048 float32 product's GFLOP/s, measured at the start and the end of each run."""
    return [r[when]["float32"][kernel] for r in reps for when in ("peak_gflops_start", "peak_gflops_end")]


# ---- sections
# bench_derive.targets' names of the two targets against PyTorch's matmul
TORCH_TARGET = "fp32 batched / per-item on PyTorch's matmul (as the original)"
BF16_TORCH_TARGET = "bf16 speed-up over the fp32 per-item reference on PyTorch's matmul"


def run_tables(res: Results) -> str:
    name = MAIN_RUN
    r = res.run(name)
    m, tk, s = r["modes"], r["torch_kernels"], r["settings"]
    flags = " ".join(f"--{k.replace('_', '-')}" for k in ("bf16", "int8", "torch_kernels") if s.get(k))
    head = (f"Figures from one run (`--n {s['n']} --scale {s['scale']} {flags}`, {cpu_of(name, r)}, torch "
            f"{r['machine']['torch'].split('+')[0].rsplit('.', 1)[0]} CPU, at commit "
            f"{commit_of(name, r)}; its JSON is `benchmarks/results/{name}`, and `--from-json` on it re-prints the figures "
            f"with the derived ceilings). The N={s['n']} responses are every {s['scale']}th of the "
            f"{r['scaling']['n_big']} of the scaling run, spread over the four annotated subsets.")
    rows = [("per-item, PyTorch's matmul (how the original runs)", tk["per_item"], False),
            ("per-item reference (`--per-item`)", m["per_item"], False),
            ("batched, PyTorch's matmul (`--cpu-kernels torch`)", tk["batched"], False),
            ("**batched default**", m["batched"], True),
            ("re-run from the cache", m["cached"], False),
            ("batched, bf16", r["bf16"], False),
            ("batched, dynamic int8 (on PyTorch's matmul)", r["int8"], False)]
    table = ["| mode | wall s | resp/s | in forwards | QG s | QA s | NLI s | spaCy s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
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
        table.append(f"| {label} | " + " | ".join(cells) + " |")

    same = r["identical_per_item_vs_batched"]
    identical = [k for k, v in (("results", same["results"]), ("raw model outputs", same["raw_model_outputs"]),
                                ("input tokens", same["input_tokens"])) if v]
    c, eff, sc, g = r["ceilings"], r["stage_efficiency_batched_fp32"], r["scaling"], r["qg_vs_library_generate"]
    low = [role.upper() for role in ("qg", "nli", "qa") if not met(r, f"{role} stage share of the fp32 matmul peak")]
    tok = sc["token_ratio"]
    targets = [
        "| target | goal | measured | |", "|---|---|---:|---|",
        f"| fp32 batched / per-item, same kernels | >= 2x, same scores | {x(r['speedup_batched_vs_per_item'])} "
        f"(ceiling {x(c['fp32_speedup_ceiling_vs_per_item'])}, below); "
        f"{', '.join(identical[:-1]) + ' and ' + identical[-1] if len(identical) > 1 else ''.join(identical)} "
        f"identical | {shown(met(r, 'fp32 batched / per-item speed-up'))} |",
        f"| fp32 batched / per-item on PyTorch's matmul (as the original ran) | >= 2x | "
        f"{x(tk['speedup_batched_vs_torch_per_item'])} | "
        f"{shown(met(r, TORCH_TARGET))} |",
        f"| each model stage, share of the fp32 matmul peak ({r['peak_gflops']['float32']:.0f} GFLOP/s) | >= 80% | "
        f"QA {pct(eff['qa']['share_of_peak'])}, QG {pct(eff['qg']['share_of_peak'])}, "
        f"NLI {pct(eff['nli']['share_of_peak'])} | {shown(not low, ' (' + ', '.join(low) + ')')} |",
        f"| bf16 / fp32 per-item, same kernels | >= 4x | {x(r['bf16']['speedup_vs_fp32_per_item'])} (ceiling "
        f"{x(c['bf16_speedup_ceiling_vs_per_item'])}; {x(r['bf16']['speedup_vs_fp32_batched'])} the fp32 batched "
        f"run) | {shown(met(r, 'bf16 speed-up over the fp32 per-item reference'))} |",
        f"| bf16 / fp32 per-item on PyTorch's matmul | >= 4x | {x(tk['per_item']['wall_s'] / r['bf16']['wall_s'])} | "
        f"{shown(met(r, BF16_TORCH_TARGET))} |",
        f"| wall time inside model forward passes | >= 75% | {pct(m['batched']['forward_share'])} | "
        f"{shown(met(r, 'share of batched wall time inside model forwards'))} |",
        f"| cached re-run / first run | >= 50x | {rounded(r['speedup_cached_vs_first'])}x | "
        f"{shown(met(r, 'cached re-run speed-up'))} |",
        f"| peak RSS, three fp32 paper-size models loaded | <= 4 GB | {r['peak_rss_gb_fp32']:.2f} GB "
        f"({r['current_rss_after_loading_gb']:.2f} GB resident after loading) | "
        f"{shown(met(r, 'peak RSS with the three fp32 models, GB'))} |",
        f"| {sc['n_big']} / {sc['n']} responses | <= 10.5x the time | {x(sc['time_ratio'])} (for "
        f"{tok['qa']:.1f}x the QA tokens, {tok['qg']:.1f}x QG, {tok['nli']:.1f}x NLI) | "
        f"{shown(met(r, 'time for 10x the responses / time for N'))} |",
        f"| QG questions identical to the library's `generate` | - | "
        f"{g['inputs'] - g['inputs_with_other_questions']} of {g['inputs']} inputs | |",
    ]
    return wrap(head) + "\n\n" + "\n".join(table) + "\n\n" + "\n".join(targets) + "\n"


def where_time_goes(res: Results) -> str:
    r, r2, lin = res.run(MAIN_RUN), res.run(SECOND_RUN), res.linear()
    m, tk, c, eff = r["modes"], r["torch_kernels"], r["ceilings"], r["stage_efficiency_batched_fp32"]
    reach = ("out of reach" if c["fp32_speedup_ceiling_vs_per_item"] < 2 and c["bf16_speedup_ceiling_vs_per_item"] < 4
             else "within reach")
    qa_per_item = eff["qa"]["gflop"] / m["per_item"]["call_s"]["qa"] / r["peak_gflops"]["float32"]
    out = [
        f"- **The same-kernel targets are {reach} on this machine.** The batched run computes "
        f"{c['gflop']:,.0f} GFLOP; at 100% of the fp32 matmul peak, plus its {sec(c['outside_model_calls_s'])} s "
        f"outside model calls, that is {sec(c['fp32_seconds_at_peak'])} s: "
        f"{x(c['fp32_speedup_ceiling_vs_per_item'])} the per-item run. In bf16 at 100% of its peak: "
        f"{sec(c['bf16_seconds_at_peak'])} s, {x(c['bf16_speedup_ceiling_vs_per_item'])}. The per-item mode is itself "
        f"fast because QA is {pct(eff['qa']['gflop'] / c['gflop'])} of the work and one QA window is already tens of "
        f"rows of 2048-wide products (per-item QA runs at {pct(qa_per_item)} of the peak). The targets were set "
        f"against a per-item reference on PyTorch's matmul, how the original runs: against that one, batched is "
        f"{x(tk['speedup_batched_vs_torch_per_item'])} and bf16 {x(tk['per_item']['wall_s'] / r['bf16']['wall_s'])}. "
        f"Whoever owns the targets should say which reference they mean; both are printed.",
    ]
    m2, tk2, c2, g2 = r2["modes"], r2["torch_kernels"], r2["ceilings"], r2["qg_vs_library_generate"]
    pairs = [(m["per_item"], m2["per_item"]), (m["batched"], m2["batched"]), (r["bf16"], r2["bf16"]),
             (r["int8"], r2["int8"]), (tk["per_item"], tk2["per_item"]), (tk["batched"], tk2["batched"])]
    slower = [b["wall_s"] / a["wall_s"] - 1 for a, b in pairs]
    same = r2["identical_per_item_vs_batched"]
    need = c2["gflop"] / (m2["per_item"]["wall_s"] / 2 - c2["outside_model_calls_s"]) / r2["peak_gflops"]["float32"]
    again = " again" if x(r2["speedup_batched_vs_per_item"]) == x(r["speedup_batched_vs_per_item"]) else ""
    out.append(
        f"- **A second run** (same command, at {commit(SECOND_RUN)}, `benchmarks/results/{SECOND_RUN}`), in a "
        f"{'slower' if min(slower) > 0 else 'different'} hour of this shared machine: the modes took "
        f"{span([100 * v for v in slower])}% longer against a matmul peak measured about the same "
        f"({r2['peak_gflops']['float32']:.0f} GFLOP/s). Per-item {sec(m2['per_item']['wall_s'])} s, batched "
        f"{sec(m2['batched']['wall_s'])} s ({x(r2['speedup_batched_vs_per_item'])}{again}), bf16 "
        f"{sec(r2['bf16']['wall_s'])} s ({x(r2['bf16']['speedup_vs_fp32_per_item'])}), per-item on PyTorch's matmul "
        f"{sec(tk2['per_item']['wall_s'])} s (the default is {x(tk2['speedup_batched_vs_torch_per_item'])} that); "
        f"results, raw outputs and input tokens "
        f"{'identical' if all(same[k] for k in ('results', 'raw_model_outputs', 'input_tokens')) else 'NOT identical'}"
        f"; QG {sec(g2['own_call_s'])} s against `generate`'s {sec(g2['library_call_s'])} s, "
        f"{'same questions for all' if not g2['inputs_with_other_questions'] else 'other questions for some'} of its "
        f"{g2['inputs']} inputs; {r2['scaling']['n_big']} responses {x(r2['scaling']['time_ratio'])} the time; peak "
        f"RSS {r2['peak_rss_gb_fp32']:.2f} GB; stage shares QA {pct(stage_share(r2, 'qa'))}, QG "
        f"{pct(stage_share(r2, 'qg'))}, NLI {pct(stage_share(r2, 'nli'))}. Its ceilings are "
        f"{x(c2['fp32_speedup_ceiling_vs_per_item'])} (fp32) and {x(c2['bf16_speedup_ceiling_vs_per_item'])} (bf16) "
        f"because its per-item run was the slower: 2x would need the batched run's FLOPs, attention and beam "
        f"selection included, at {pct(need)} of the peak rate on average, while QA, the best-fed stage, reaches "
        f"{span([100 * stage_share(rr, 'qa') for rr in (r, r2)])}%.")
    five = [row for row in lin if row["rows"] == 5]
    d = tk["decisions_vs_onednn"]
    unchanged = not (d["qa_span_changed"] or d["nli_label_changed"] or d["qg_beams_changed"])
    out.append(
        f"- **Packed oneDNN Linear layers** (with the one-pass GELU): the same runs on PyTorch's matmul and the "
        f"models' own activations take {x(tk['speedup_onednn_vs_torch_per_item'])} longer per-item and "
        f"{x(tk['speedup_onednn_vs_torch_batched'])} longer batched, with "
        f"{'identical' if tk['identical_results_vs_onednn'] else 'different'} results and "
        f"{'no changed QA span, NLI label or QG beam' if unchanged else 'some changed decisions'}. PyTorch's float32 "
        f"matmul here reaches {span(torch_peaks((r, r2), 'torch'))} GFLOP/s on a 2048x2048 product (at the start and "
        f"end of the two runs) and {span([row['torch'] for row in lin])} on the models' Linear shapes (the 5-row steps "
        f"of a one-input beam search are the worst, {span([row['torch'] for row in five])}); oneDNN against a packed "
        f"weight reaches {span(torch_peaks((r, r2), 'onednn'))}, and {span([row['onednn'] for row in lin])} on the "
        f"same shapes, {span([row['speedup'] for row in lin], '{:.1f}')}x faster (`benchmarks/bench_linear.py`, "
        f"`benchmarks/results/{LINEAR}`). The peak and whole runs move between runs on this shared machine (the "
        f"second run above), so share figures carry several points of noise.")
    bf = r["bf16"]["efficiency"]
    qa_pad = eff["qa"]["padding_share"]
    qa_padding = f"with {pct(qa_pad)} of its positions padding" if qa_pad else "with no padding computed"
    out.append(
        f"- **QA** (ALBERT-xlarge, {eff['qa']['gflop'] / m['batched']['tokens']['qa']['real']:.1f} GFLOP per token) at "
        f"{eff['qa']['gflop_per_s']:.0f} GFLOP/s, {pct(eff['qa']['share_of_peak'])} of the peak, "
        f"{qa_padding} (packed windows). bf16 QA reaches "
        f"{pct(bf['qa']['share_of_peak'])} of the {r['peak_gflops']['bfloat16']:.0f} GFLOP/s bf16 peak.")
    g = r["qg_vs_library_generate"]
    out.append(
        f"- **QG** at {eff['qg']['gflop_per_s']:.0f} GFLOP/s, {pct(eff['qg']['share_of_peak'])} "
        f"({pct(eff['qg']['gflop'] / g['library_call_s'] / r['peak_gflops']['float32'])} with the library's "
        f"`generate`). Our beam search takes {sec(g['own_call_s'])} s where `generate` takes "
        f"{sec(g['library_call_s'])} s on the same {g['inputs']} inputs, with "
        f"{'the same' if not g['inputs_with_other_questions'] else 'other'} questions for "
        f"{'all' if not g['inputs_with_other_questions'] else 'some'} of them. The encoder runs per length-sorted "
        f"batch: {100 * eff['qg']['padding_share']:.1f}% of its input positions "
        f"are padding.")
    w = m["batched"]["work"]
    out.append(
        f"- **NLI** has {w['nli_inputs']} short pairs at this size ({eff['nli']['gflop']:.0f} GFLOP, "
        f"{sec(eff['nli']['call_s'])} s, {m['batched']['tokens']['nli']['real']} input tokens), so its share of the "
        f"peak moves most between runs (the two above); a larger run has larger NLI passes.")
    b, i = r["bf16"]["decisions_vs_fp32"], r["int8"]["decisions_vs_fp32"]

    nli = "none" if b["nli_label_changed"] == i["nli_label_changed"] == 0 else \
        f"{pct(b['nli_label_changed'])} and {pct(i['nli_label_changed'])}"
    q2 = (r["bf16"]["q2_abs_diff_mean"], r["int8"]["q2_abs_diff_mean"])
    out.append(
        f"- bf16 and int8 change model decisions through rounding. Measured here on random weights: QA spans changed "
        f"for {pct(b['qa_span_changed'])} (bf16) and {pct(i['qa_span_changed'])} (int8) of questions, QG beams for "
        f"{pct(b['qg_beams_changed'])} and {pct(i['qg_beams_changed'])} of inputs, NLI labels for "
        f"{nli}, Q² "
        f"{'not at all' if not any(q2) else f'by {q2[0]:.3f} and {q2[1]:.3f} on average'}; random-weight models have "
        f"nearly flat logits, so the span and beam figures overstate what trained models do, and the filter and NLI "
        f"figures say little (random models almost never pass the filter or move off one label). Measure on the real "
        f"models before switching a study to bf16. int8 (`torch.ao` dynamic quantization) is benchmark-only: torch "
        f"deprecates that API.")
    return "\n".join(wrap(bullet) for bullet in out) + "\n"


# The same fp32 command at the commit before the restructure and after it, alternating on one machine.
RESTRUCTURE_RUNS = ["bench_n16_fp32_r1_6806de3.json", "bench_n16_fp32_r1_87ff5ac.json",
                    "bench_n16_fp32_r2_6806de3.json", "bench_n16_fp32_r2_a814593.json"]


def restructure_check(res: Results) -> str:
    rows = ["| run | commit | per-item s | batched s | batched / per-item | identical results | QG = `generate` |",
            "|---|---|---:|---:|---:|---|---|"]
    for name in RESTRUCTURE_RUNS:
        r = res.raw(name)
        m, same = r["modes"], r["identical_per_item_vs_batched"]
        rows.append(f"| {name.split('_')[3]} | {commit(name)} | {m['per_item']['wall_s']:.1f} | "
                    f"{m['batched']['wall_s']:.1f} | {x(r['speedup_batched_vs_per_item'])} | "
                    f"{same['results'] and same['raw_model_outputs']} | "
                    f"{r['qg_vs_library_generate']['inputs_with_other_questions'] == 0} |")
    return "\n".join(rows) + "\n"




def per_response(res: Results) -> str:
    """What one response costs in the batched default and in bf16, over the two paper-size runs (capacity planning)."""
    runs = [(name, res.run(name)) for name in (MAIN_RUN, SECOND_RUN)]
    rows = ["| run | cores | fp32 batched s / response | bf16 batched s / response | QA / QG / NLI s / response |",
            "|---|---:|---:|---:|---|"]
    for name, r in runs:
        n, b = r["settings"]["n"], r["modes"]["batched"]
        st = b["stage_s"]
        rows.append(f"| {commit_of(name)} | {r['machine']['cpu_count']} | {b['wall_s'] / n:.2f} | "
                    f"{r['bf16']['wall_s'] / n:.2f} | {st['qa'] / n:.2f} / {st['qg'] / n:.2f} / {st['nli'] / n:.2f} |")
    return "\n".join(rows) + "\n"


def before_after(res: Results) -> str:
    name = "bench_paper_before_after_27.json"
    d = res.raw(name)
    rows = [f"`{d['command']}`; before = {d['before']}, after = {d['after']}.", "",
            "| tree | run | per-item s | batched s | batched / per-item | identical results |",
            "|---|---:|---:|---:|---:|---|"]
    for run in d["runs"]:
        same = run["identical"]["results"] and run["identical"]["raw_model_outputs"]
        rows.append(f"| {run['tree']} | {run['run']} | {run['per_item_s']:.1f} | {run['batched_s']:.1f} | "
                    f"{x(run['batched_over_per_item'])} | {same} |")
    return "\n".join(rows) + "\n"


RAY_RUNS = ["bench_ray_tiny_f79d892.json", "bench_ray_tiny.json", "bench_ray_tiny_quiet.json",
            "bench_ray_paper_n16_f79d892.json", "bench_ray_paper_n48_da79d21.json"]
RAY_KINDS = [("single_process", "`q2 score` (one process)"), ("ray_1_actor", "`--engine ray --concurrency 1`"),
             ("ray_2_actors", "`--engine ray --concurrency 2`")]


def ray_runs(res: Results) -> str:
    out = []
    for name in RAY_RUNS:
        d = res.raw(name)
        s, sm = d["settings"], d["summary"]
        out.append(f"**{s['sizes']} models, {s['n']} and {s['n_small']} rows, {s['ray_batch_size']} rows per scoring "
                   f"call** ({source(res, name)})")
        out.append("")
        out.append(f"| run | rows/s, {s['n']} rows | marginal rows/s | fixed s | CPU s per row | fixed CPU s |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for key, label in RAY_KINDS:
            r = d["runs"][key]
            marginal = "-" if r["marginal_rows_per_s"] is None else f"{r['marginal_rows_per_s']:.2f}"
            fixed = "-" if r["fixed_s"] is None else f"{r['fixed_s']:.1f}"
            out.append(f"| {label} | {r['rows_per_s']:.2f} | {marginal} | {fixed} | "
                       f"{r['marginal_cpu_s_per_row']:.4f} | {r['fixed_cpu_s']:.1f} |")
        same = sm["results_identical_to_single_process"]
        out.append("")
        out.append(wrap(
            f"One actor over one process: {sm['ray_overhead_end_to_end']:+.0%} end to end, "
            f"{sm['ray_overhead_marginal']:+.0%} marginally, {sm['ray_overhead_cpu_per_row']:+.0%} CPU per row; "
            f"1 -> 2 actors: {x(sm['scaling_1_to_2_marginal'])} marginal, {x(sm['scaling_1_to_2_end_to_end'])} end "
            f"to end; results identical to the single process's: "
            f"{'yes' if all(same.values()) else 'NO (' + ', '.join(k for k, v in same.items() if not v) + ')'}."))
        out.append("")
    return "\n".join(out)


def ray_startup(res: Results) -> str:
    name = "bench_ray_startup_tiny.json"
    d = res.raw(name)
    rows = [source(res, name), "", "| command (commit) | runs s | median s |", "|---|---|---:|"]
    for key, runs in d["cli_s"].items():
        rows.append(f"| `{key}` | {', '.join(f'{v:.1f}' for v in runs)} | {d['cli_median_s'][key]:.1f} |")
    steps = d["steps_median_s"]
    rows += ["", "Steps of one `--engine ray` run, medians (s): " +
             ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in steps.items()) + "."]
    return "\n".join(rows) + "\n"


RAY_ACTOR = ["bench_ray_actor_paper_8d6f2ec.json", "bench_ray_actor_tiny_8d6f2ec.json"]


def ray_actor(res: Results) -> str:
    rows = ["| models | rows, rows per call | one process s | Ray actor s | actor / process | without the first "
            "batch | outside the batches s | scores identical | source |",
            "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for name in RAY_ACTOR:
        d = res.raw(name)
        s = d["settings"]
        rows.append(f"| {s['sizes']} | {s['n']}, {s['batch_size']} | {d['batches_s']['in_process']:.1f} | "
                    f"{d['batches_s']['ray_actor']:.1f} | {d['actor_over_in_process'] - 1:+.0%} | "
                    f"{d['actor_over_in_process_after_first_batch'] - 1:+.0%} | {d['ray_wall_outside_batches_s']:.1f} | "
                    f"{d['scores_identical']} | {source(res, name)} |")
    return "\n".join(rows) + "\n"


def lm_eval(res: Results) -> str:
    name = "bench_lm_eval.json"
    d = res.raw(name)
    return wrap(
        f"`{d['command']}` ({source(res, name)[:-1]}): {d['documents']} documents, {d['core_calls_in_metric']} core "
        f"call(s) inside the metric; time inside the metric during `lm_eval.simple_evaluate` "
        f"{', '.join(f'{v:.2f}' for v in d['in_metric_s'])} s against one offline core call "
        f"{', '.join(f'{v:.2f}' for v in d['offline_core_s'])} s; wall-time ratio of the fastest {d['ratio']:.2f}, "
        f"CPU-time ratio {d['cpu_ratio']:.2f}; the same system score: {d['same_score']}.") + "\n"


def verbatim(res: Results, name: str) -> str:
    return f"{source(res, name)}\n\n```text\n{res.text(name).rstrip()}\n```\n"


AUDITS = ["audit_recipes_before.json", "audit_recipes_after.json"]


def audit(res: Results) -> str:
    before, after = (res.raw(name) for name in AUDITS)
    rows = [f"Before: {source(res, AUDITS[0])} After: {source(res, AUDITS[1])}", "",
            "| cue | before | after |", "|---|---:|---:|"]

    def cell(v: Any) -> str:
        if isinstance(v, list) and len(v) == 2:
            return f"{v[0]} of {v[1]}"
        if isinstance(v, dict):
            return ", ".join(f"{k} {n}" for k, n in v.items())
        return str(v)

    for key, value in after.items():
        if key != "commit":
            rows.append(f"| {key.replace('_', ' ')} | {cell(before.get(key, '-'))} | {cell(value)} |")
    return "\n".join(rows) + "\n"


READING = "recipes_reading_seed41.json"


def reading(res: Results) -> str:
    """The recipes read row by row: wrong labels per label, before and after, and the entity swaps."""
    d = res.raw(READING)
    before = d["before"]["wrong"]
    rows = [source(res, READING), "", wrap(f"`{d['command']}`; {d['how_read']}. Before: {d['before']['source']}."),
            "", "| recipe / label | wrong before | wrong after |", "|---|---:|---:|"]
    for label, (bad, n) in d["wrong_by_label"].items():
        was = before.get(label) or (before.get("conv-fever (three labels)") if label.startswith("conv-fever") else None)
        was_text = f"{was[0]} of {was[1]}" + (" (three labels together)" if label.startswith("conv-fever") else "") \
            if was else "-"
        rows.append(f"| {label} | {was_text} | {bad} of {n} |")
    swaps, bad_before = d["entity_swaps"], before["conv-fever entity swaps garbled or still true"]
    rows.append(f"| conv-fever entity swaps garbled or still true (all read) | {bad_before[0]} of {bad_before[1]} | "
                f"{swaps['garbled_or_still_true']} of {swaps['read']} |")
    return "\n".join(rows) + "\n"


TRAIN = "bench_train_850b27a.json"


def train(res: Results) -> str:
    d = res.raw(TRAIN)
    rows = [source(res, TRAIN), "", "| evaluated on | view | n | accuracy | macro-F1 | majority label (accuracy) |",
            "|---|---|---:|---:|---:|---|"]
    for split, label in (("held_out_silver", "held-out silver"), ("begin_v1_dev", "BEGIN v1 dev")):
        for view in ("5way", "3way"):
            v = d[split][view]
            rows.append(f"| {label} | {view[0]}-way | {d[split]['n']} | {v['accuracy']:.2%} | {100 * v['macro_f1']:.1f} | "
                        f"{v['majority_label']} {v['majority_accuracy']:.2%} |")
    b = d.get("bert_base_throughput")
    rows += ["", wrap(f"Training: {d['small_train_seconds']:.0f} s, {d['small_examples_per_s']:.1f} examples/s "
                      f"({d['threads']} torch thread(s))." +
                      (f" bert-base-sized classifier: {b['examples_per_s']:.2f} examples/s, {b['gflop_per_s']:.1f} "
                       f"GFLOP/s, {pct(b['share_of_peak'])} of the matmul peak." if b else ""))]
    return "\n".join(rows) + "\n"


def render_gpu(report: dict[str, Any]) -> str:
    """A ``bench_gpu.py`` report as Markdown tables (what the script prints, and this page shows)."""
    m, s, roles = report["machine"], report["settings"], ("qg", "qa", "nli")
    where = f"GPU {m['gpu']}" if m.get("gpu") else f"{m.get('cpu_count')}-core {m['cpu']}"
    load = report.get("load_average")
    buckets = "; batches padded to their longest input (no length buckets)" if s.get("no_buckets") else ""
    lines = [f"{where}; {s['sizes']} models, {s['n']} responses, questions of {s['qg_len']} tokens{buckets}; "
             "matmul peak "
             + ", ".join(f"{d} {v:.2f} TFLOP/s" for d, v in report["peak_tflops"].items())
             + (f"; load average {load:.1f} at the start" if load is not None else ""), ""]
    if report["modes"]:
        lines += ["| mode | wall s (first pass) | responses/s | QG s | QA s | NLI s | CPU stages s | share of peak "
                  "QG / QA / NLI | batch QG / QA / NLI | decisions changed vs fp32 (QA span, filter, NLI, QG beams) |",
                  "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for name, r in report["modes"].items():
        st = r["stage_s"]
        cpu = st.get("candidates", 0) + st.get("personal", 0)
        first = f" ({r['first']['wall_s']:.2f})" if "first" in r else ""
        share = r.get("peak_share")
        shares = " / ".join("-" if share is None or share.get(k) is None else f"{share[k]:.1%}" for k in roles)
        batch = " / ".join(f"{r['defaults'][k]['batch_size']}" for k in roles) if "defaults" in r else "1"
        d = r.get("decisions_vs_float32")
        dec = "-" if not d else (f"{d['qa_span_changed']:.1%}, {d['filter_changed']:.1%}, "
                                 f"{d['nli_label_changed']:.1%}, {d['qg_beams_changed']:.1%}")
        lines.append(f"| {name} | {r['wall_s']:.2f}{first} | {r['responses_per_s']:.1f} | {st.get('qg', 0):.2f} | "
                     f"{st.get('qa', 0):.2f} | {st.get('nli', 0):.2f} | {cpu:.2f} | {shares} | {batch} | {dec} |")
    items = next((r["stage_items"] for name, r in report["modes"].items()
                  if name.startswith("batched") and "stage_items" in r), None)
    if items:
        lines += ["", "Items each stage's component was given (a batched mode): "
                      + ", ".join(f"{k} {v}" for k, v in items.items()) + "."]
    if report.get("int8"):
        i = report["int8"]
        lines += ["", f"int8 (ct2 backend) against the project's fp32 on the CPU, {i['qg_inputs']} QG inputs and "
                      f"{i['nli_pairs']} NLI pairs:", "",
                  "| stage | fp32 s | int8 s | int8 speed-up | outputs changed |", "|---|---:|---:|---:|---|"]
        for stage in ("qg", "nli"):
            x = i[stage]
            changed = f"{x['changed']} of {i['qg_inputs' if stage == 'qg' else 'nli_pairs']}"
            changed += (f" question lists ({x['changed_first']} first questions)" if stage == "qg" else " labels")
            lines.append(f"| {stage.upper()} | {x['fp32_s']:.2f} | {x['int8_s']:.2f} | {x['int8_speedup']:.2f}x | "
                         f"{changed} |")
    return "\n".join(lines) + "\n"


def gpu_runs(res: Results) -> str:
    """Every ``bench_gpu_*.json`` results file, with its device and commit."""
    names = sorted(p.name for p in res.root.glob("bench_gpu_*.json"))
    if not names:
        return "No results yet.\n"
    return "\n".join(f"{source(res, name)}\n\n{render_gpu(res.raw(name))}" for name in names)


def index(res: Results) -> str:
    rows = ["| results file | CPU / GPU | commit |", "|---|---|---|"]
    for path in sorted(res.root.iterdir()):
        if path.suffix == ".md":
            continue
        data = json.loads(path.read_text()) if path.suffix == ".json" else None
        text = "" if data is not None else path.read_text()
        rows.append(f"| `{path.name}` | {cpu_of(path.name, data, text)} | {commit_of(path.name, data)} |")
    return "\n".join(rows) + "\n"


def page(res: Results) -> str:
    """The whole of ``docs/results.md``."""
    parts = [
        "# Measured results\n",
        wrap(f"Generated by `{COMMAND}` from the files in `benchmarks/results/`; do not edit by hand "
             f"(`{COMMAND} --check`, run by the test suite, fails when this page is not what those files render). "
             "Every figure below comes from one results file, named with the CPU / GPU it ran on and the commit it "
             "measured; timings compare only within one file, or between files of one machine. What each benchmark "
             "measures and how to run it is on the user pages: [performance.md](performance.md#benchmarks), "
             "[ray.md](ray.md#measuring-rays-overhead), [integrations.md](integrations.md#lm-eval), "
             "[compare.md](compare.md#calibration-of-the-tests), [report.md](report.md#scale), "
             "[training.md](training.md#does-it-learn-benchmarksbench_trainpy).") + "\n",
        index(res),
        "## Scoring pipeline: `benchmarks/bench_pipeline.py`\n",
        run_tables(res),
        "### Where the time goes\n",
        where_time_goes(res),
        "### Per response (capacity planning)\n",
        wrap("The batched default's wall time per response, and per stage, of the two paper-size runs above (random "
             "weights of the real sizes, real WoW responses and knowledge); multiply by the number of responses and "
             "divide by the number of such machines. Ray's cost per batch is in the Ray section below.") + "\n",
        per_response(res),
        "### Same speed after a restructure\n",
        wrap("The same fp32 command at the commit before a restructure and after it, alternating on one machine "
             "(`python benchmarks/bench_pipeline.py --n 16 --no-flops`); a run that shared the CPU with other work "
             "shows as an outlier:") + "\n",
        "\n".join(source(res, name) for name in RESTRUCTURE_RUNS) + "\n",
        restructure_check(res),
        before_after(res),
        "## Ray engine: `benchmarks/bench_ray_startup.py`, `bench_ray.py`, `bench_ray_actor.py`\n",
        "### Start-up (2 rows)\n",
        ray_startup(res),
        "### Whole commands at two row counts\n",
        ray_runs(res),
        "### The same `score()` calls in one process and inside a Ray actor\n",
        ray_actor(res),
        "## GPU, reduced precision and int8: `benchmarks/bench_gpu.py`\n",
        wrap("The pipeline workload above through the components a run builds on the device (its default batch "
             "sizes and window layout), each stage timed with the device synchronised; a batched mode's first pass "
             "in brackets; decisions of the real models against the batched fp32 run's; int8 through the ct2 "
             "backend on the CPU. No GPU run of this code is recorded yet. Tiny models time per-call overheads "
             "(Python between the beam steps, which CTranslate2 does in C++), not the kernels: their ratios say "
             "nothing of paper-size models. Each CPU run gives the machine's load average at its start (the paper-size "
             "int8 runs: an idle 2-core AMD EPYC with AVX2 and no AVX-512 or VNNI, where int8 kernels gain less than "
             "on CPUs that have them). The int8 runs of 3716788 ran each ct2 batch over all threads, one batch at "
             "a time; later ones run whole batches side by side (up to 4, the threads shared among them; the same "
             "batches, so the same outputs).") + "\n",
        gpu_runs(res),
        "## lm-eval: time inside the metric against offline scoring (`benchmarks/bench_lm_eval.py`)\n",
        lm_eval(res),
        "## Significance tests: calibration and speed (`benchmarks/bench_significance.py`)\n",
        verbatim(res, "bench_significance.txt"),
        "## HTML report at 10,000 rows (`benchmarks/bench_report.py`)\n",
        verbatim(res, "bench_report.txt"),
        "## HTML report at 99,365 rows, 203 MB of results (`benchmarks/bench_report_big.py`)\n",
        verbatim(res, "bench_report_big.txt"),
        "## Output size against input size: the free-space estimate (`benchmarks/bench_output_size.py`)\n",
        verbatim(res, "bench_output_size.txt"),
        "## The personal-question filter's token pre-check (`benchmarks/bench_personal.py`)\n",
        wrap("Only a question with an I / you / my / your token is parsed. The recorded questions passed the "
             "original's filters (few are personal); BEGIN's previous turns are chat, near the worst case. Questions "
             "of a run's beams fall between the two.") + "\n",
        verbatim(res, "bench_personal_2b1d527.txt"),
        "## spaCy beside the models: a thread or a worker process (`benchmarks/bench_overlap.py`)\n",
        wrap("With models on a GPU, spaCy's work (the next chunk's candidates, a round's personal filter) runs while "
             "the models work. The stand-in for the thread that drives a GPU is a loop of small torch ops; it is timed "
             "alone, beside a spaCy thread in its own process, and beside the worker process the run uses. Two runs "
             "of this script on the same machine gave 2.70x / 1.30x and the 3.17x / 1.62x below: on 2 cores the "
             "worker and the loop still share the machine, where a GPU host's cores would not.") + "\n",
        verbatim(res, "bench_overlap_0075c08.txt"),
        "## Training recipes (`benchmarks/audit_recipes.py`, `benchmarks/bench_train.py`)\n",
        "### Cues a classifier could learn besides the labels\n",
        wrap("The surface probe is logistic regression on 12 surface features (lengths, punctuation, question and "
             "exclamation marks, negation words, first and second person, overlap with the evidence both ways, new "
             "content words, length ratio), trained on 70% of the source rows and tested on the rest.") + "\n",
        audit(res),
        "### The labels read row by row\n",
        reading(res),
        "### A small BERT trained from scratch on the silver set\n",
        train(res),
        wrap("The before / after page of the recipes' change, with its confusion matrices, is "
             "[benchmarks/results/bench_train_recipes.md](../benchmarks/results/bench_train_recipes.md) "
             "(`benchmarks/train_table.py`); that of the recipes read row by row (issue 41's rules), "
             "[benchmarks/results/bench_train_issue41.md](../benchmarks/results/bench_train_issue41.md).") + "\n",
    ]
    return "\n".join(parts)


def unrendered(res: Results) -> list[str]:
    """Results files that no section read (call after :func:`page`)."""
    return [p.name for p in sorted(res.root.iterdir()) if p.name not in res.read and p.name not in NOT_RENDERED]


def main(argv: Optional[Sequence[str]] = None, doc: Path = DOC, results: Path = RESULTS) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 with a diff if the page is not what the results render")
    args = ap.parse_args(argv)
    res = Results(results)
    new = page(res)
    left = unrendered(res)
    if left:
        print(f"{results}/{left[0]} is not rendered in {doc.name}: add it to a section of benchmarks/render_docs.py "
              f"(or to NOT_RENDERED, with the reason)", file=sys.stderr)
        return 1
    old = doc.read_text() if doc.exists() else ""
    if new == old:
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(doc),
                                                   "rendered from " + str(results)))
        print(f"{doc} is stale: run {COMMAND}", file=sys.stderr)
        return 1
    doc.write_text(new)
    print(f"rewrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
