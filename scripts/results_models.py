"""The sections of ``docs/results.md`` on the models' work: GPU and int8 runs, the QA work, reranking, ONNX QA."""

from __future__ import annotations

import re
import statistics
from typing import Any

from scripts.results_common import MAIN_RUN, Results, commit, pct, sec, source, table, what, x


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
