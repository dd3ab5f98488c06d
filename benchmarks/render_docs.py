#!/usr/bin/env python
"""Render the measured figures of ``docs/performance.md`` from ``benchmarks/results/``.

Every figure of a benchmark run in that page comes from one results file: the pipeline runs' JSON
(``bench_n16_<commit>.json``, with the ceilings and targets derived by ``bench_derive.py``, as
``bench_pipeline.py --from-json`` prints them) and ``bench_linear.txt``. The page holds them between markers

    <!-- generated: NAME (...) -->
    ...
    <!-- end generated -->

and this script rewrites what lies between (the prose around them is the page's own; the prose inside is the
templates below). ``--check`` rewrites nothing and exits 1 with a diff when the page is not what the results render,
or when a results file is not rendered anywhere.

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
from typing import Any, Callable, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.bench_derive import derive  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "performance.md"
# The run whose table the page shows, and the repeat of the same command it is compared with.
MAIN_RUN = "bench_n16_6f96214.json"
SECOND_RUN = "bench_n16_6806de3.json"
LINEAR = "bench_linear.txt"
WIDTH = 118  # the page's line width
# Results files the page does not render, each with the reason (none today).
NOT_RENDERED: dict[str, str] = {}

_SECTION = re.compile(r"(<!-- generated: (?P<name>[\w-]+)[^\n]*-->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


class Results:
    """The results files, loaded once, with what was read recorded (so an unread file can be reported)."""

    def __init__(self, root: Path = RESULTS) -> None:
        self.root = root
        self.read: set[str] = set()

    def run(self, name: str) -> dict[str, Any]:
        self.read.add(name)
        return derive(json.loads((self.root / name).read_text()))

    def linear(self) -> list[dict[str, Any]]:
        """``bench_linear.txt``'s table rows: model, layer, rows, F.linear and oneDNN GFLOP/s, speed-up."""
        self.read.add(LINEAR)
        out = []
        for line in (self.root / LINEAR).read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and cells[3].isdigit():
                out.append({"model": cells[0], "layer": cells[1], "rows": int(cells[3]), "torch": float(cells[4]),
                            "onednn": float(cells[5]), "speedup": float(cells[6].rstrip("x"))})
        if not out:
            raise ValueError(f"{self.root / LINEAR}: no table rows found; re-run benchmarks/bench_linear.py into it")
        return out


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
    # the CPU's model is not in the JSON (only its core count): named here
    head = (f"Figures from one run (`--n {s['n']} --scale {s['scale']} {flags}`, {r['machine']['cpu_count']}-core AMD "
            f"EPYC with AVX-512 BF16, torch {r['machine']['torch'].split('+')[0].rsplit('.', 1)[0]} CPU, at commit "
            f"{commit(name)}; its JSON is `benchmarks/results/{name}`, and `--from-json` on it re-prints the figures "
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
        res.read.add(name)
        r = json.loads((res.root / name).read_text())
        m, same = r["modes"], r["identical_per_item_vs_batched"]
        rows.append(f"| {name.split('_')[3]} | {commit(name)} | {m['per_item']['wall_s']:.1f} | "
                    f"{m['batched']['wall_s']:.1f} | {x(r['speedup_batched_vs_per_item'])} | "
                    f"{same['results'] and same['raw_model_outputs']} | "
                    f"{r['qg_vs_library_generate']['inputs_with_other_questions'] == 0} |")
    return "\n".join(rows) + "\n"


SECTIONS: dict[str, Callable[[Results], str]] = {"run-tables": run_tables, "where-time-goes": where_time_goes,
                                                 "restructure-check": restructure_check}


def render(text: str, res: Results) -> str:
    """``text`` with every generated section re-rendered; raises ValueError for an unknown or missing section."""
    found: list[str] = []

    def one(match: re.Match) -> str:
        name = match["name"]
        if name not in SECTIONS:
            raise ValueError(f"{DOC}: unknown generated section {name!r}; known: {', '.join(SECTIONS)}")
        found.append(name)
        return match[1] + SECTIONS[name](res) + match[4]

    out = _SECTION.sub(one, text)
    missing = [n for n in SECTIONS if n not in found]
    if missing:
        raise ValueError(f"{DOC}: no '<!-- generated: {missing[0]} -->' ... '<!-- end generated -->' section")
    return out


def unrendered(res: Results) -> list[str]:
    """Results files that no section read (call after :func:`render`)."""
    return [p.name for p in sorted(res.root.iterdir()) if p.name.startswith(("bench_n16_", "bench_linear"))
            and p.name not in res.read and p.name not in NOT_RENDERED]


def main(argv: Optional[Sequence[str]] = None, doc: Path = DOC, results: Path = RESULTS) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 with a diff if the page is not what the results render")
    args = ap.parse_args(argv)
    res = Results(results)
    old = doc.read_text()
    new = render(old, res)
    left = unrendered(res)
    if left:
        print(f"{results}/{left[0]} is not rendered in {doc.name}: add it to a section of benchmarks/render_docs.py "
              f"(or to NOT_RENDERED, with the reason)", file=sys.stderr)
        return 1
    if new == old:
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(doc),
                                                   "rendered from " + str(results)))
        print(f"{doc} is stale: run python benchmarks/render_docs.py", file=sys.stderr)
        return 1
    doc.write_text(new)
    print(f"rewrote {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
