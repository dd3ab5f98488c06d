#!/usr/bin/env python
"""Write ``docs/results.md``, the one page of measured figures, from ``benchmarks/results/``.

Every figure of a benchmark run that the docs show comes from one results file: the pipeline runs' JSON
(``bench_n16_<commit>.json``, with the ceilings and targets derived by ``bench_derive.py``, as
``bench_pipeline.py --from-json`` prints them), ``bench_linear.txt``, the Ray, lm-eval, significance, report and
training benchmarks' files. The page is generated whole (the user pages link to it, quote no figure and say what
the figures mean); each section is one line saying what was measured, the command that reproduces it and the results
files with the CPU / GPU they ran on, the commit they measured and how many commits old that is (counted by git up
to the commit checked out when the page was rendered), then tables of the figures. ``--check`` rewrites nothing and
exits 1 with a diff when the page is not what the results render (the ages aside, which grow with every commit:
rendering again refreshes them), or when a results file is rendered nowhere (and not listed in ``NOT_RENDERED`` with
the reason).

    python scripts/render_docs.py [--check]
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import statistics
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_derive import derive  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "results.md"
COMMAND = "python scripts/render_docs.py"
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
    "bench_train_850b27a.json": "superseded by bench_train_ada72f7.json: its silver set shared evidence passages and "
                                "responses with BEGIN v1 dev, and it measured no surface floor",
    "audit_recipes_before.json": "issue 41's audit (before), superseded by audit_recipes_before_7ef3c67.json",
    "audit_recipes_after.json": "issue 41's audit (after), superseded by audit_recipes_after_ada72f7.json",
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
AGE_NOT_KNOWN = "age not known"
# what --check leaves aside: the ages, which grow with every commit (and the line breaks their digits move)
_AGE = re.compile(r"\b\d+\s+commits?\s+old\b|\bage\s+not\s+known\b")


def _ageless(page: str) -> list[str]:
    return _AGE.sub("AGE", page).split()


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


@lru_cache(maxsize=None)
def commits_since(commit: str) -> Optional[int]:
    """How many commits the checkout's HEAD is past ``commit`` (None: git does not know the commit here)."""
    done = subprocess.run(["git", "rev-list", "--count", f"{commit}..HEAD"], cwd=REPO, capture_output=True, text=True)
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else None


def age_of(name: str, data: Any = None) -> str:
    """``12 commits old``: how far the checkout is past the (newest) commit a results file measured."""
    ages = [a for c in re.findall(r"\b[0-9a-f]{7,40}\b", commit_of(name, data)) if (a := commits_since(c)) is not None]
    return f"{min(ages)} commit{'' if min(ages) == 1 else 's'} old" if ages else AGE_NOT_KNOWN


def source(res: Results, name: str) -> str:
    """One line naming a results file, its CPU / GPU, its commit and how many commits old that is."""
    path = res.root / name
    data = json.loads(path.read_text()) if name.endswith(".json") else None
    text = "" if data is not None else path.read_text()
    res.read.add(name)
    return (f"`benchmarks/results/{name}`: {cpu_of(name, data, text)}; commit {commit_of(name, data)}, "
            f"{age_of(name, data)}.")


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


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A Markdown table: ``right`` lists the columns aligned right (figures)."""
    rule = "|".join("---:" if i in right else "---" for i in range(len(head)))
    out = ["| " + " | ".join(head) + " |", f"|{rule}|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def what(measured: str, command: str | Sequence[str], where: str) -> str:
    """A section's one line: what was measured, the command(s) that reproduce it, where it ran."""
    commands = [command] if isinstance(command, str) else list(command)
    said = "Command" if len(commands) == 1 else "Commands"
    return wrap(f"{measured}. {said}: {', '.join(f'`{c}`' for c in commands)}. {where}") + "\n"


def command_of(recorded: str) -> str:
    """A recorded benchmark command, run from the checkout's root, without this machine's paths."""
    cmd = re.sub(r" --(models-dir|data|json) \S+", "", recorded.strip())
    return cmd if cmd.startswith("python ") else "python benchmarks/" + cmd


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
                f"`benchmarks/results/{SECOND_RUN}`, {cpu_of(SECOND_RUN, r2)}); ceilings from `bench_derive.py`."), "",
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


def gpu_command(s: dict[str, Any]) -> str:
    """The ``bench_gpu.py`` command of a report's settings (flags left at their defaults omitted)."""
    cmd = f"python benchmarks/bench_gpu.py --device {s['device']} --sizes {s['sizes']} --n {s['n']}"
    if s.get("qg_len", 10) != 10:
        cmd += f" --qg-len {s['qg_len']}"
    if s.get("dtypes") and s["dtypes"] != ["float32"]:
        cmd += f" --dtypes {','.join(s['dtypes'])}"
    cmd += "".join(f" --{flag.replace('_', '-')}" for flag in ("no_per_item", "no_buckets", "int8", "int8_only")
                   if s.get(flag))
    cmd += f" --threads {s['threads']}" if s.get("threads") else ""
    return cmd + (f" --repeats {s['repeats']}" if s.get("repeats", 2) != 2 else "")


AUDITS = ["audit_recipes_before_7ef3c67.json", "audit_recipes_after_ada72f7.json"]


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
        if key not in ("commit", "cpu"):
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


READING52 = "recipes_reading_issue52.json"


def reading52(res: Results) -> str:
    """The antonym rows and the entity swaps read row by row, before and after issue 52's rules."""
    d = res.raw(READING52)
    rows = [source(res, READING52), "", wrap(f"`{d['command']}`; {d['how_read']}"), "",
            "| rows | wrong before | wrong after | borderline before | borderline after |", "|---|---:|---:|---:|---:|"]
    for name, v in d["counts"].items():
        rows.append(f"| {name} | {v['before']['wrong']} of {v['before']['read']} | {v['after']['wrong']} of "
                    f"{v['after']['read']} | {v['before']['borderline']} | {v['after']['borderline']} |")
    return "\n".join(rows) + "\n"


TRAIN = "bench_train_ada72f7.json"
#: the same command with six times the epochs: whether more steps lift the detector
TRAIN_LONG = "bench_train_e30_6894dad.json"


def train(res: Results) -> str:
    """The small detector beside its two floors on each split: the majority label and the surface baseline."""
    d = res.raw(TRAIN)
    removed = d["silver"]["removed"]
    rows = [source(res, TRAIN), "",
            wrap(f"Silver set: {d['silver']['n_train']} training and {d['silver']['n_held_out']} held-out rows "
                 f"(split by evidence passage), after removing {removed['grounded_rows_sharing_with_begin_v1_dev']} "
                 f"grounded rows and {removed['examples_sharing_with_begin_v1_dev']} examples sharing an evidence "
                 f"passage or a response with BEGIN v1 dev, and {removed['training_rows_sharing_with_held_out']} "
                 f"training rows sharing one with the held-out part; overlap left: {removed['overlap_left']} (the "
                 "stock generic replies repeat by design). The surface baseline is the audit's probe trained on the "
                 "same training rows."), "",
            "| evaluated on | view | n | detector accuracy | detector macro-F1 | majority label (accuracy) | "
            "surface baseline accuracy | surface baseline macro-F1 |", "|---|---|---:|---:|---:|---|---:|---:|"]
    for split, label in (("held_out_silver", "held-out silver"), ("begin_v1_dev", "BEGIN v1 dev")):
        for view in ("5way", "3way"):
            v, s = d[split][view], d["surface_baseline"][split][view]
            rows.append(f"| {label} | {view[0]}-way | {d[split]['n']} | {v['accuracy']:.2%} | "
                        f"{100 * v['macro_f1']:.1f} | {v['majority_label']} {v['majority_accuracy']:.2%} | "
                        f"{s['accuracy']:.2%} | {100 * s['macro_f1']:.1f} |")
    b = d.get("bert_base_throughput")
    rows += ["", wrap(f"Training: {d['small_train_seconds']:.0f} s, {d['small_examples_per_s']:.1f} examples/s "
                      f"({d['threads']} torch thread(s))." +
                      (f" bert-base-sized classifier: {b['examples_per_s']:.2f} examples/s, {b['gflop_per_s']:.1f} "
                       f"GFLOP/s, {pct(b['share_of_peak'])} of the matmul peak." if b else ""))]
    long = res.raw(TRAIN_LONG)
    first, last = long["curve"][0], long["curve"][-1]
    v5, v3 = long["begin_v1_dev"]["5way"], long["begin_v1_dev"]["3way"]
    rows += ["", wrap(f"More steps, `python benchmarks/bench_train.py --epochs 30 --base-steps 0`: "
                      f"{source(res, TRAIN_LONG)} {last[0]} steps in "
                      f"{long['small_train_seconds']:.0f} s, loss {first[1]:.2f} at step {first[0]} and "
                      f"{last[1]:.2f} at the last; BEGIN v1 dev {v5['accuracy']:.2%} five-way, {v3['accuracy']:.2%} "
                      f"three-way, held-out silver {long['held_out_silver']['5way']['accuracy']:.2%} five-way: still "
                      "below both floors. A transformer trained from scratch on these few hundred rows does not find "
                      "what the surface baseline uses; a pretrained base (`--base` with a hub) is the route to a "
                      "detector worth its figure.")]
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
                  "| stage | fp32 s | int8 s | int8 speed-up | CPU s fp32 / int8 (speed-up) | outputs changed |",
                  "|---|---:|---:|---:|---:|---|"]
        for stage in ("qg", "nli"):
            x = i[stage]
            changed = f"{x['changed']} of {i['qg_inputs' if stage == 'qg' else 'nli_pairs']}"
            changed += (f" question lists ({x['changed_first']} first questions)" if stage == "qg" else " labels")
            cpu = (f"{x['fp32_cpu_s']:.2f} / {x['int8_cpu_s']:.2f} ({x['int8_cpu_speedup']:.2f}x)"
                   if "fp32_cpu_s" in x else "-")
            lines.append(f"| {stage.upper()} | {x['fp32_s']:.2f} | {x['int8_s']:.2f} | {x['int8_speedup']:.2f}x | "
                         f"{cpu} | {changed} |")
    return "\n".join(lines) + "\n"


def render_rerank(rep: dict[str, Any]) -> str:
    """The tables the script prints (and ``docs/results.md`` shows)."""
    gen = rep["generation"]
    lines = [f"CPU: {rep['machine']['cpu']}; torch threads {rep['machine']['torch_threads']}; "
             f"{len(rep['turns'])} turns, response lengths {[t['length'] for t in rep['turns']]} tokens", "",
             "| row | rerank CPU s / turn | wall s / turn | rerank / generation (median, range) | batched: rerank / "
             "generation | QA / QG / NLI / spaCy | QA calls / tokens per turn | same best as fp32 |",
             "|---|---:|---:|---:|---:|---|---:|---|"]
    g_cpu = statistics.mean(g["cpu_s"] for g in gen["per_turn"])
    lines.append(f"| generation (beam 5) | {g_cpu:.2f} | {statistics.mean(g['wall_s'] for g in gen['per_turn']):.2f} "
                 f"| 1 | 1 | - | - | - |")
    for name, r in rep["rows"].items():
        if not r["available"]:
            reason = re.sub(r"(?<=[':])/\S+?/(qa|qg|nli)\b", "MODEL", r["reason"]).split("; ")[0]
            lines.append(f"| {name} | not available: {reason} | | | | | | |")
            continue
        n = len(r["per_turn"])
        ratio = r["rerank_over_generation_cpu"]
        share = " / ".join(f"{100 * r['stage_share'][s]:.0f}%" for s in ("qa", "qg", "nli", "spacy"))
        same = r.get("same_best_as_fp32_default")
        lines.append(
            f"| {name} | {r['cpu_s_per_turn_mean']:.2f} | {sum(p['wall_s'] for p in r['per_turn']) / n:.2f} | "
            f"{ratio['median']:.1f}x ({min(ratio['per_turn']):.1f}-{max(ratio['per_turn']):.1f}) | "
            f"{ratio['batched']:.1f}x | {share} | {sum(p['qa_calls'] for p in r['per_turn']) / n:.0f} / "
            f"{sum(p['qa_tokens'] for p in r['per_turn']) / n:.0f} | "
            f"{'-' if same is None else f'{sum(same)} of {len(same)}'} |")
    saved = [(name, r["work_saved_vs_full"]) for name, r in rep["rows"].items() if r.get("work_saved_vs_full")]
    for name, s in saved:
        lines.append(f"\n{name}: work saved against full scoring: QA calls {100 * s['qa_calls']:.0f}%, QA tokens "
                     f"{100 * s['qa_tokens']:.0f}%, QG inputs {100 * s['qg_inputs']:.0f}%, NLI pairs "
                     f"{100 * s['nli_pairs']:.0f}%")
    lines += ["", "| target | goal | measured |", "|---|---|---:|"]
    for t in rep["targets"]:
        v = t["measured"]
        extra = "" if t.get("same_best") is None else f", same best: {'yes' if t['same_best'] else 'NO'}"
        lines.append(f"| {t['target']} | {t['goal']} | {'not measured' if v is None else f'{v:.2f}'}{extra} |")
    return "\n".join(lines)


def render_qg_vocab(rep: dict[str, Any]) -> str:
    """The per-response table and the summary lines."""
    lines = ["| response | raw calls | raw tokens | in-range calls | in-range tokens | matched calls | matched tokens "
             "| calls diff | tokens diff |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rep["rows"]:
        lines.append(f"| {r['response']} | {r['raw_qa_calls']} | {r['raw_qa_tokens']} | {r['in_range_qa_calls']} | "
                     f"{r['in_range_qa_tokens']} | {r['matched_qa_calls']} | {r['matched_qa_tokens']} | "
                     f"{100 * r['qa_calls_in_range_vs_matched']:+.1f}% | "
                     f"{100 * r['qa_tokens_in_range_vs_matched']:+.1f}% |")
    t, m = rep["totals"], rep["max_abs_rel_diff"]
    lines.append("")
    lines.append("totals: " + "; ".join(f"{w} {v['qa_calls']} calls / {v['qa_tokens']} tokens" for w, v in t.items()))
    lines.append(f"in-range vs matched, per response: largest difference {100 * m['qa_calls']:.1f}% in calls, "
                 f"{100 * m['qa_tokens']:.1f}% in tokens; {rep['within_5pct']} of {len(rep['rows'])} responses "
                 f"within 5% on both")
    g = rep["generated_question_qa_tokens_mean"]
    rec = rep["recorded_question_qa_tokens_mean"]
    lines.append("mean QA tokens of a generated question: " + ", ".join(
        f"{w} {v:.1f}" if v is not None else f"{w} -" for w, v in g.items()) +
        (f"; of the recorded run's questions {rec:.1f}" if rec is not None else ""))
    return "\n".join(lines)


def qa_work(res: Results) -> str:
    """The paper-size QG's questions counted where QA receives them (``bench_qg_vocab_*.json``), and the pipeline's
    QA figures before and after every generated row decodes to a piece (``bench_pipeline_n*_{before,after}_*.json``)
    beside the run the tables above show."""
    out = []
    for name in sorted(p.name for p in res.root.glob("bench_qg_vocab_*.json")):
        rep = res.raw(name)
        s = rep["settings"]
        out.append(what(f"QA calls and QA tokens per response of the paper-size QG on {s['n']} WoW responses and the "
                        "recorded run's decisions, questions of {0} tokens: `raw`, rows the tokenizer lacks decoded "
                        "to nothing (the benchmarks before); `in-range`, those rows never chosen (now); `matched`, "
                        "the same model cut to its tokenizer's {1:,} rows (the vocabulary-matched run)"
                        .format(s["qg_length"], rep["qg_pieces"]["tokenizer"]),
                        f"python benchmarks/bench_qg_vocab.py --n {s['n']}"
                        + (" --independent" if s.get("independent") else ""), source(res, name)))
        out.append(render_qg_vocab(rep) + "\n")
    pairs: dict[str, dict[str, str]] = {}
    for p in res.root.glob("bench_pipeline_n*_*.json"):
        parts = p.stem.split("_")  # bench, pipeline, nN, before|after, commit
        pairs.setdefault(parts[2], {})[parts[3]] = p.name
    for _, files in sorted(pairs.items()):
        runs = {k: res.raw(v) for k, v in files.items()}
        old = res.raw(MAIN_RUN)
        cols = [(f"{commit(MAIN_RUN)} ({old['settings']['n']} responses, {old['machine']['torch_threads']} threads)",
                 old)] + [(f"{k}: {commit(v)} ({runs[k]['settings']['n']} responses, "
                           f"{runs[k]['machine']['torch_threads']} thread)", runs[k])
                          for k, v in sorted(files.items(), key=lambda kv: kv[0] != "before")]

        def b(r: dict[str, Any]) -> dict[str, Any]:
            return r["modes"]["batched"]

        facts = [
            ("QA calls per response", lambda r: f"{b(r)['work']['qa_inputs'] / r['settings']['n']:.1f}"),
            ("QA tokens per response", lambda r: f"{b(r)['tokens']['qa']['real'] / r['settings']['n']:.0f}"),
            ("QG tokens per question", lambda r: str(r["settings"].get("qg_length", 16))),
            ("QA share of the batched wall time", lambda r: pct(b(r)["stage_s"]["qa"] / b(r)["wall_s"])),
            ("batched responses/s (wall)", lambda r: f"{b(r)['responses_per_s']:.3f}"),
            ("batched CPU s per response", lambda r: f"{b(r)['cpu_s'] / r['settings']['n']:.2f}"
             if "cpu_s" in b(r) else "-"),
            ("batched responses per CPU second", lambda r: f"{r['settings']['n'] / b(r)['cpu_s']:.3f}"
             if "cpu_s" in b(r) else "-"),
            ("per-item CPU s per response", lambda r: f"{r['modes']['per_item']['cpu_s'] / r['settings']['n']:.2f}"
             if "cpu_s" in r["modes"]["per_item"] else "-"),
            ("fp32 matmul peak at the start, GFLOP/s (low: a busy machine)",
             lambda r: f"{r['peak_gflops_start']['float32']['best']:.0f}" if "peak_gflops_start" in r else
             f"{r['peak_gflops']['float32']:.0f}"),
        ]
        out.append(what("The pipeline's batched default before and after (`--raw-questions`: rows the QG tokenizer "
                        "lacks chosen and decoded to nothing, as every run before), beside the run of the tables "
                        "above. Wall times (and so responses/s and the QA share, a share of wall time) compare only "
                        "on one idle machine: the new runs shared theirs with other work, as their matmul peak "
                        "shows; their CPU seconds, on one thread, are the figures to compare",
                        [f"python benchmarks/bench_pipeline.py --n {runs[k]['settings']['n']} --no-flops"
                         + (" --raw-questions" if k == "before" else "") for k in sorted(runs, reverse=True)],
                        " ".join(source(res, v) for v in files.values())))
        out.append(table([""] + [c for c, _ in cols], [[label] + [f(r) for _, r in cols] for label, f in facts],
                         range(1, len(cols) + 1)))
    return "\n".join(out) if out else "No results yet.\n"


def rerank_runs(res: Results) -> str:
    """Every ``bench_rerank_*.json``: reranking a turn's candidates against generating them."""
    out = []
    for name in sorted(p.name for p in res.root.glob("bench_rerank_*.json")):
        rep = res.raw(name)
        s = rep["settings"]
        cmd = f"python benchmarks/bench_rerank.py --turns {s['turns']}" + (
            f" --device {s['device']}" if s.get("device", "cpu") != "cpu" else "")
        out.append(what(f"Per turn of {s['turns']} WoW turns: generating 5 candidates (BlenderBot-400M-distill's "
                        "sizes, beam 5, stopped at the recorded response's length) against reranking them by Q² "
                        "(the recorded response and 4 light edits, paper-size models, the recorded decisions); CPU "
                        "seconds of the process, torch on one thread", cmd, source(res, name)))
        out.append(render_rerank(rep) + "\n")
    return "\n".join(out) if out else "No results yet.\n"


def onnx_qa(res: Results) -> str:
    """Every ``bench_onnx_qa_*.json``: the QA stage (and NLI) in fp32 against int8 through ONNX Runtime / ct2."""
    out = []
    for name in sorted(p.name for p in res.root.glob("bench_onnx_qa_*.json")):
        r = res.raw(name)
        cmd = f"python benchmarks/bench_onnx_qa.py --n {r['responses']}" + (" --nli" if "nli_pairs" in r else "")
        out.append(what(f"{r['pairs']} recorded question-knowledge pairs ({r['tokens']} tokens) through the "
                        f"{r['sizes']}-size QA model, CPU seconds of the process on {r['threads']} thread(s)", cmd,
                        source(res, name)))
        rows = [["QA", sec(r["fp32_cpu_s"]), "-", sec(r["int8_cpu_s"]), x(r["speedup"])]]
        if "nli_pairs" in r:
            rows.append([f"NLI ({r['nli_pairs']} pairs)", sec(r["nli_fp32_cpu_s"]), sec(r["nli_ct2_int8_cpu_s"]),
                         sec(r["nli_onnx_int8_cpu_s"]), x(r["nli_fp32_cpu_s"] / r["nli_onnx_int8_cpu_s"])])
        out.append(table(["stage", "fp32", "ct2 int8", "onnx int8", "onnx / fp32"], rows, right=(1, 2, 3, 4))
                   + f"\nSame answers as fp32 (random weights): {r['same_answers']} of {r['pairs']}.\n")
    return "\n".join(out) if out else "No results yet.\n"


def gpu_runs(res: Results) -> str:
    """Every ``bench_gpu_*.json`` results file, with its command, device and commit."""
    names = sorted(p.name for p in res.root.glob("bench_gpu_*.json"))
    if not names:
        return "No results yet.\n"
    out = []
    for name in names:
        report = res.raw(name)
        out.append(f"{source(res, name)} Command: `{gpu_command(report['settings'])}`.\n\n{render_gpu(report)}")
    return "\n".join(out)


def lm_eval(res: Results) -> str:
    name = "bench_lm_eval.json"
    d = res.raw(name)
    rows = [[i + 1, f"{a:.2f}", f"{b:.2f}"] for i, (a, b) in enumerate(zip(d["in_metric_s"], d["offline_core_s"]))]
    facts = [["documents", d["documents"]], ["core calls inside the metric", d["core_calls_in_metric"]],
             ["wall-time ratio of the fastest (inside the metric / offline)", f"{d['ratio']:.2f}"],
             ["CPU-time ratio", f"{d['cpu_ratio']:.2f}"], ["the same system score", d["same_score"]]]
    return (what("Time inside the metric during `lm_eval.simple_evaluate` against one offline core call on the same "
                 "documents", d["command"], source(res, name)) + "\n"
            + table(["repeat", "inside the metric s", "offline core call s"], rows, (0, 1, 2)) + "\n"
            + table(["", ""], facts, (1,)))


def header_of(text: str) -> tuple[list[str], list[str], list[str]]:
    """A text results file's ``$ command`` lines, ``# CPU:`` lines and other ``#`` notes, in order."""
    commands = [line[2:].split("  #")[0].strip() for line in text.splitlines() if line.startswith("$ ")]
    cpus = list(dict.fromkeys(m for m in re.findall(r"^# CPU: (.+)$", text, flags=re.M)))
    notes = [line[2:] for line in text.splitlines() if line.startswith("# ") and not line.startswith("# CPU:")]
    return commands, cpus, notes


def significance(res: Results) -> str:
    name = "bench_significance.txt"
    text = res.text(name)
    commands, cpus, _ = header_of(text)
    blocks: list[tuple[str, dict[str, str]]] = []
    speed = []
    command = ""
    for line in text.splitlines():
        if line.startswith("$ "):
            command = line[2:].split("  #")[0].strip()
        found = re.match(r"(calibration|power): (.+?); share with p < 0.05$", line)
        if found:
            blocks.append((found[2], {}))
        elif blocks and re.match(r"^  \S", line) and not line.startswith("  /"):
            test, value = line.strip().rsplit(None, 1)
            blocks[-1][1][test] = value
        spoken = re.match(r"speed: (.+?): ([\d.]+) s wall, ([\d.]+) s CPU(?: \((.+)\))?$", line)
        if spoken:
            speed.append([f"`{command}`", spoken[2], spoken[3], spoken[4] or ""])
            what_speed = spoken[1]
    tests = list(dict.fromkeys(t for _, values in blocks for t in values))
    rows = [[t] + [values.get(t, "-") for _, values in blocks] for t in tests]
    out = [what("Share of p < 0.05 for pairs of systems with no true difference (calibration) and with a true "
                "difference (power), and the time of one `q2 compare`",
                list(dict.fromkeys(commands)),
                source(res, name)), "",
           table(["test (share with p < 0.05; `mean difference`: the measured mean)"] + [b for b, _ in blocks], rows,
                 range(1, len(blocks) + 1)),
           f"Speed: {what_speed}.\n",
           table(["command", "wall s", "CPU s", "note"], speed, (1, 2))]
    return "\n".join(out)


def report_page(res: Results) -> str:
    name = "bench_report.txt"
    text = res.text(name)
    commands, cpus, _ = header_of(text)
    rows = []
    pattern = (r"(\d+) responses: ([\d.]+) MB, written in ([\d.]+) s; rendered (\d+) ms after navigation "
               r"\((\d+) ms wall, driver included\); sort (\d+) ms, filter ([\d /]+) ms, search (\d+) ms, "
               r"open a response (\d+) ms")
    for found in re.finditer(pattern, text):
        rows.append([len(rows) + 1] + [found[i] for i in range(1, 10)])
    return (what("Writing and using the HTML report of 10,000 responses (the replayed bundled slice, cycled) in "
                 "headless Chromium", commands[0], source(res, name)) + "\n"
            + table(["run", "responses", "page MB", "written s", "rendered ms", "wall ms (driver included)",
                     "sort ms", "filter ms", "search ms", "open a response ms"], rows, range(0, 10)))


def report_big(res: Results) -> str:
    name = "bench_report_big.txt"
    text = res.text(name)
    _, cpus, notes = header_of(text)
    rows, command = [], ""
    for line in text.splitlines():
        if line.startswith("$ "):
            command = line[2:]
        found = re.match(r"([\d,]+) rows, ([\d.]+) MB of results: (q2 report .+?): exit (\d+), ([\d.]+) s, peak RSS "
                         r"(\d+) MB, page ([\d.]+) MB", line)
        if found:
            cmd, _, note = command.partition("#")
            rows.append([f"`{cmd.strip()}`", note.strip(), found[3], found[4], found[5], found[6], found[7]])
    return (what("`q2 report` on 99,365 rows, 203 MB of results", "python benchmarks/bench_report_big.py",
                 f"{source(res, name)} {'; '.join(notes[-1:])}.") + "\n"
            + table(["command", "tree", "report", "exit", "s", "peak RSS MB", "page MB"], rows, (3, 4, 5, 6)))


def output_size(res: Results) -> str:
    name = "bench_output_size.txt"
    text = res.text(name)
    commands, _, _ = header_of(text)
    rows, rule = [], ""
    for line in text.splitlines():
        each = re.match(r"(\S+): (\d+) rows, input ([\d,]+) B, output x([\d.]+), with --explain x([\d.]+)$", line)
        every = re.match(r"all: input ([\d,]+) B, output x([\d.]+) \(largest row x([\d.]+)\), with --explain x([\d.]+) "
                         r"\(largest row x([\d.]+)\)$", line)
        if each:
            rows.append([f"`{each[1]}`", each[2], each[3], f"{each[4]}x", "", f"{each[5]}x", ""])
        elif every:
            rows.append(["all", "", every[1], f"{every[2]}x", f"{every[3]}x", f"{every[4]}x", f"{every[5]}x"])
        elif line.startswith("the free-space check"):
            rule = line
    return (what("Bytes written per byte of input, with and without `--explain`, on the bundled result files",
                 commands[0], source(res, name)) + "\n"
            + table(["input", "rows", "input B", "output / input", "largest row", "with --explain",
                     "largest row"], rows, range(1, 7))
            + f"\n{rule[0].upper() + rule[1:]}.\n")


def text_tables(res: Results, name: str, measured: str, command: str) -> str:
    """A results file that is a Markdown table with ``#`` / plain note lines above it: the notes, then the table."""
    text = res.text(name)
    _, cpus, notes = header_of(text)
    plain = [line.strip() for line in text.splitlines() if line.strip() and line[0] not in "#|$"]
    lines = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    where = "; ".join([part for cpu in cpus for part in cpu.split("; ")[1:]] + notes + plain)
    return what(measured, command, f"{source(res, name)} {where[0].upper() + where[1:]}.") + "\n" + lines + "\n"


def index(res: Results) -> str:
    rows = ["| results file | CPU / GPU | commit | age |", "|---|---|---|---|"]
    for path in sorted(res.root.iterdir()):
        if path.suffix == ".md":
            continue
        data = json.loads(path.read_text()) if path.suffix == ".json" else None
        text = "" if data is not None else path.read_text()
        rows.append(f"| `{path.name}` | {cpu_of(path.name, data, text)} | {commit_of(path.name, data)} | "
                    f"{age_of(path.name, data)} |")
    return "\n".join(rows) + "\n"


def page(res: Results) -> str:
    """The whole of ``docs/results.md``."""
    parts = [
        "# Measured results\n",
        wrap(f"Generated by `{COMMAND}` from the files in `benchmarks/results/`; do not edit by hand "
             f"(`{COMMAND} --check`, run by the test suite, fails when this page is not what those files render). "
             "Each section gives what was measured, the command that reproduces it, the results file with the CPU / "
             "GPU it ran on, the commit it measured and its age (commits up to the one this page was rendered at), "
             "and the figures; timings compare only within one file, or "
             "between files of one machine. What the figures mean: [performance.md](performance.md#benchmarks), "
             "[ray.md](ray.md#measuring-rays-overhead), [integrations.md](integrations.md#lm-eval), "
             "[compare.md](compare.md#calibration-of-the-tests), [report.md](report.md#scale), "
             "[training.md](training.md#does-it-learn-benchmarksbench_trainpy).") + "\n",
        index(res),
        "## Scoring pipeline: `benchmarks/bench_pipeline.py`\n",
        wrap("The runs of this section's tables made questions whose words the QG tokenizer could not decode (rows of "
             "the 32,128 it lacks), so their filter did little QA work: their QA shares and responses/s are "
             "optimistic. [The QA work counted right](#the-qa-work-counted-right) gives the figures since, beside "
             "them.") + "\n",
        run_tables(res),
        "### Where the time goes\n",
        where_time_goes(res),
        "### Per response (capacity planning)\n",
        per_response(res),
        "### Same speed after a restructure\n",
        restructure_check(res),
        before_after(res),
        "### The QA work counted right\n",
        qa_work(res),
        "## Reranking at generation time: `benchmarks/bench_rerank.py`\n",
        rerank_runs(res),
        "## int8 QA on the CPU: `benchmarks/bench_onnx_qa.py`\n",
        onnx_qa(res),
        "## Ray engine: `benchmarks/bench_ray_startup.py`, `bench_ray.py`, `bench_ray_actor.py`\n",
        "### Start-up (2 rows)\n",
        ray_startup(res),
        "### Whole commands at two row counts\n",
        ray_runs(res),
        "### The same `score()` calls in one process and inside a Ray actor\n",
        ray_actor(res),
        "## GPU, reduced precision and int8: `benchmarks/bench_gpu.py`\n",
        wrap("Each stage of the pipeline workload above through the components a run builds on the device (its "
             "default batch sizes and window layout), timed with the device synchronised; a batched mode's first "
             "pass in brackets; int8 through the ct2 backend on the CPU against the project's fp32. No GPU run is "
             "recorded yet. The int8 runs of 3716788 ran ct2 batches one at a time; later ones side by side (the same "
             "batches, so the same outputs).") + "\n",
        gpu_runs(res),
        "## lm-eval: time inside the metric against offline scoring (`benchmarks/bench_lm_eval.py`)\n",
        lm_eval(res),
        "## Significance tests: calibration and speed (`benchmarks/bench_significance.py`)\n",
        significance(res),
        "## HTML report at 10,000 rows (`benchmarks/bench_report.py`)\n",
        report_page(res),
        "## HTML report at 99,365 rows, 203 MB of results (`benchmarks/bench_report_big.py`)\n",
        report_big(res),
        "## Output size against input size: the free-space estimate (`benchmarks/bench_output_size.py`)\n",
        output_size(res),
        "## The personal-question filter's token pre-check (`benchmarks/bench_personal.py`)\n",
        text_tables(res, "bench_personal_2b1d527.txt", "Questions parsed, and the filter's time, before and after "
                    "the pre-check that parses only questions with an I / you / my / your token",
                    "python benchmarks/bench_personal.py"),
        "## spaCy beside the models: a thread or a worker process (`benchmarks/bench_overlap.py`)\n",
        text_tables(res, "bench_overlap_0075c08.txt", "A loop of small torch ops (the stand-in for the thread that "
                    "drives a GPU) alone, beside a spaCy thread and beside the spaCy worker process",
                    "python benchmarks/bench_overlap.py"),
        "## Inspect: concurrent scorer calls against one core call (`benchmarks/bench_inspect.py`)\n",
        text_tables(res, "bench_inspect_7239001.txt", "64 samples scored through the Inspect scorer (its concurrent "
                    "calls gathered into one core call) against one batched `Q2Scorer.score` call on the same rows",
                    "python benchmarks/bench_inspect.py --workdir out/inspect-bench --n 64 --repeat 3 --threads 1"),
        "## Training recipes (`benchmarks/audit_recipes.py`, `benchmarks/bench_train.py`)\n",
        "### Cues a classifier could learn besides the labels\n",
        wrap("The surface probe is logistic regression on 12 surface features (lengths, punctuation, question and "
             "exclamation marks, negation words, first and second person, overlap with the evidence both ways, new "
             "content words, length ratio), trained on 70% of the source rows and tested on the rest.") + "\n",
        audit(res),
        "### The labels read row by row\n",
        reading(res),
        "### Antonyms and entity swaps read row by row (issue 52)\n",
        reading52(res),
        "### A small BERT trained from scratch on the silver set\n",
        train(res),
        wrap("Earlier runs, with their confusion matrices, are on pages of their own (`benchmarks/train_table.py`): "
             "[benchmarks/results/bench_train_recipes.md](../benchmarks/results/bench_train_recipes.md) and "
             "[benchmarks/results/bench_train_issue41.md](../benchmarks/results/bench_train_issue41.md). Their "
             "BEGIN v1 dev figures were measured with a silver set that shared evidence passages and responses with "
             "BEGIN v1 dev, and without the surface floor: read them as an upper bound, not as a detector's "
             "accuracy.") + "\n",
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(parts))


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
        print(f"{results}/{left[0]} is not rendered in {doc.name}: add it to a section of scripts/render_docs.py "
              f"(or to NOT_RENDERED, with the reason)", file=sys.stderr)
        return 1
    old = doc.read_text() if doc.exists() else ""
    if new == old or (args.check and _ageless(new) == _ageless(old)):
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
