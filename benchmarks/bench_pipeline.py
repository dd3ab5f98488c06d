#!/usr/bin/env python
"""Benchmark the Q² pipeline at paper size on CPU: per-item reference vs batched vs cached re-run.

Models have exactly the default architectures and sizes (T5-base QG, ALBERT-xlarge QA, RoBERTa-large NLI) with
random weights (a forward pass costs the same whatever the weights) and tokenizers trained on the WoW / BEGIN text.
The workload is real WoW responses and knowledge from ``q2_wow``; the amount of work per stage follows what the real
models did in ``q2_original_run``: every real model runs on every input, but the *decisions* (which question passes
the filter, what the knowledge answers) are taken from the recorded run where it has them, so random weights do not
make the benchmark do less (or more) work than a real run. Questions are generated with a fixed length. The QG
model has T5-base's 32,128 embedding rows but its tokenizer far fewer pieces: a generated id the tokenizer lacks is
decoded as one of its ordinary pieces (:class:`InRangeQuestions`), so every beam is a question of that length, as a
real model's would be, and costs the filter what a real question costs (``bench_qg_vocab.py`` checks this against
a QG whose rows match its tokenizer).

    python benchmarks/bench_pipeline.py --n 16 --json out/bench.json [--bf16] [--int8] [--scale 10]

Prints a table and writes JSON. Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.in_range import in_range_questions  # noqa: E402
from benchmarks.machine import cpu_name, current_rss_gb, matmul_peaks, peak_rss_gb  # noqa: E402
from q2_plugins import Q2Config, Q2Scorer  # noqa: E402
from q2_plugins.backends import accel  # noqa: E402
from q2_plugins.backends.accel.onednn import bf16_supported, flop_formulas  # noqa: E402
from q2_plugins.backends.hf.tiny import build_albert_qa, build_roberta_nli, build_t5_qg  # noqa: E402
from q2_plugins.backends.hf.transformers_models import (  # noqa: E402
    HFNLI,
    HFQuestionAnswerer,
    HFQuestionGenerator,
    load_model,
)
from q2_plugins.jobs.replay import RecordedResponse, load_original_steps  # noqa: E402
from q2_plugins.metric.components import Answer  # noqa: E402
from q2_plugins.metric.normalize import answers_match  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy  # noqa: E402
from scripts.results_derive import derive, efficiency  # noqa: E402

SUBSETS = ["dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent"]

PAPER_SIZES = {
    "qg": dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12, num_heads=12,
               relative_attention_num_buckets=32, relative_attention_max_distance=128, model_vocab=32128),
    "qa": dict(embedding_size=128, hidden_size=2048, num_hidden_layers=24, num_attention_heads=16,
               intermediate_size=8192, model_vocab=30000),
    "nli": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                model_vocab=50265),
}


def corpus(data: Path) -> list[str]:
    lines: list[str] = []
    for name in SUBSETS + ["cross_annotation"]:
        with open(data / "q2_wow" / f"{name}.csv", newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                lines += [v for k, v in row.items() if k in ("message", "response", "knowledge", "gold",
                                                              "dodeca_response", "memnet_response") and v]
    with open(data / "begin_dev" / "dev_05_24_21.tsv", newline="", encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t"):
            lines += [c for c in row[:3] if c]
    return lines


def build_models(root: Path, data: Path, sizes: str) -> dict[str, Path]:
    root = root / sizes
    marker = root / "BUILT"
    paths = {"qg": root / "qg", "qa": root / "qa", "nli": root / "nli"}
    if marker.exists():
        return paths
    text = corpus(data)
    t0 = time.perf_counter()
    dims = PAPER_SIZES if sizes == "paper" else {"qg": {}, "qa": {}, "nli": {}}
    build_t5_qg(paths["qg"], corpus=text, tokenizer_vocab=8000, **dims["qg"])
    build_albert_qa(paths["qa"], corpus=text, tokenizer_vocab=8000, **dims["qa"])
    build_roberta_nli(paths["nli"], corpus=text, tokenizer_vocab=8000, **dims["nli"])
    marker.write_text(f"built in {time.perf_counter() - t0:.0f}s\n")
    return paths


def load_workload(data: Path, n: int, every: int = 1) -> list[RecordedResponse]:
    """n responses spread evenly over the four annotated subsets, in file order; with ``every`` > 1, each subset's
    every-th of them (the N responses of a scaling run are then a systematic sample of its N x every)."""
    per = [load_original_steps(data / "q2_original_run" / s / f"{s}_out.steps.csv") for s in SUBSETS]
    picked: list[list[RecordedResponse]] = [[] for _ in per]
    i = total = 0
    while total < n * every:
        for k, recs in enumerate(per):
            if i < len(recs) and total < n * every:
                picked[k].append(recs[i])
                total += 1
        i += 1
    sampled = [recs[::every] for recs in picked]
    return [g[i] for i in range(max(map(len, sampled))) for g in sampled if i < len(g)]  # round robin again


class Oracle:
    """The recorded run's decisions: valid (candidate, question) per response, knowledge answers per question."""

    def __init__(self, records: Sequence[RecordedResponse]) -> None:
        self.cands: dict[str, list[str]] = {}
        self.question: dict[tuple[str, str], str] = {}
        self.valid: dict[tuple[str, str], str] = {}
        self.knowledge: dict[tuple[str, str], Answer] = {}
        for r in records:
            self.cands.setdefault(r.response, [])
            for q in r.questions:
                if q.candidate not in self.cands[r.response]:
                    self.cands[r.response].append(q.candidate)
                self.question[(q.candidate, r.response)] = q.question
                self.valid[(q.question, r.response)] = q.candidate
                self.knowledge[(q.question, r.knowledge)] = q.knowledge_answer


class _Counted:
    """Runs the real component (its cost) and logs its real outputs; optionally counts FLOPs."""

    def __init__(self, inner: Any, oracle: Oracle) -> None:
        self.inner = inner
        self.oracle = oracle
        self.real: dict[Any, Any] = {}
        self.count_flops = False
        self.flops = 0

    @contextlib.contextmanager
    def _maybe_count(self):
        if not self.count_flops:
            yield
            return
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False, custom_mapping=flop_formulas()) as fc:
            yield
        self.flops += fc.get_total_flops()


class BenchCandidates(_Counted):
    signature = "bench-cand"

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        real = self.inner.extract(texts)
        out = []
        for t, cands in zip(texts, real):
            recorded = self.oracle.cands.get(t, [])
            extra = [c for c in cands if c.lower() not in {r.lower() for r in recorded}]
            out.append(recorded + extra)
        return out


class BenchQG(_Counted):
    signature = "bench-qg"

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        with self._maybe_count():
            real = self.inner.generate(pairs)
        out = []
        for p, qs in zip(pairs, real):
            self.real[p] = qs
            q = self.oracle.question.get(p)
            out.append([q] + qs[1:] if q is not None else qs)
        return out


class BenchQA(_Counted):
    signature = "bench-qa"

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]:
        with self._maybe_count():
            real = self.inner.answer(pairs)
        out = []
        for p, a in zip(pairs, real):
            self.real[p] = a
            if p in self.oracle.valid:
                out.append(Answer.span(self.oracle.valid[p]))
            elif p in self.oracle.knowledge:
                out.append(self.oracle.knowledge[p])
            else:
                out.append(Answer.none())  # the real run found no valid question here: next beam
        return out


class BenchNLI(_Counted):
    signature = "bench-nli"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Any]:
        with self._maybe_count():
            real = self.inner.predict(pairs)
        self.real.update(zip(pairs, real))
        return real


def make_components(paths: dict[str, Path], dtype: str, qg_len: int, int8: bool = False,
                    cpu_kernels: str = "onednn", in_range: bool = True) -> dict[str, Any]:
    """The three paper-size components; ``in_range`` off: questions decoded as the tokenizer decodes the ids (ids
    past its pieces give nothing: the benchmarks before they decoded every id)."""
    kernels = "torch" if int8 else cpu_kernels  # dynamic quantization replaces nn.Linear layers, not packed ones
    tok_qg, m_qg = load_model("qg", str(paths["qg"]), None, "cpu", dtype, "seq2seq", kernels)
    tok_qa, m_qa = load_model("qa", str(paths["qa"]), None, "cpu", dtype, "qa", kernels)
    tok_nli, m_nli = load_model("nli", str(paths["nli"]), None, "cpu", dtype, "classification", kernels)
    if int8:
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():  # torch.ao's deprecation notice; the API still works in this torch
            warnings.simplefilter("ignore")
            m_qg, m_qa, m_nli = (quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
                                 for m in (m_qg, m_qa, m_nli))
    qg = HFQuestionGenerator(tok_qg, m_qg, batch_size=1, max_length=128, generate_overrides=fixed_length(qg_len))
    if in_range:
        in_range_questions(qg)
    qa = HFQuestionAnswerer(tok_qa, m_qa, batch_size=1)
    nli = HFNLI(tok_nli, m_nli, batch_size=1, model_name="bench")
    for comp in (qg, qa, nli):
        accel.instrument(comp)  # forward clock and counters, read by run()
    return {"qg": qg, "qa": qa, "nli": nli}


def fixed_length(qg_len: int) -> dict[str, Any]:
    """``generate`` arguments that make every question ``qg_len`` tokens long (the same work in every run)."""
    return {"min_new_tokens": qg_len, "max_new_tokens": qg_len, "max_length": None}


def set_mode(hf: dict[str, Any], batched: bool, batch_sizes: dict[str, int]) -> None:
    defaults = Q2Config()
    for role, comp in hf.items():
        comp.batch_size = batch_sizes[role] if batched else 1
        comp.batch_tokens = defaults.role_batch_tokens(role) if batched else None
        comp.sort_by_length = batched
        accel.instrument(comp).reset()


def run(hf: dict[str, Any], nlp: Any, oracle: Oracle, records: Sequence[RecordedResponse], *, batched: bool,
        batch_sizes: dict[str, int], cache_dir: Optional[str] = None, count_flops: bool = False) -> dict[str, Any]:
    set_mode(hf, batched, batch_sizes)
    wrappers = {"qg": BenchQG(hf["qg"], oracle), "qa": BenchQA(hf["qa"], oracle), "nli": BenchNLI(hf["nli"], oracle)}
    for w in wrappers.values():
        w.count_flops = count_flops
    cand = BenchCandidates(SpacyCandidateExtractor(nlp), oracle)
    cfg = Q2Config(per_item=not batched, cache_dir=cache_dir, batch_size=max(batch_sizes.values()))
    scorer = Q2Scorer(cfg, candidate_extractor=cand, question_generator=wrappers["qg"],
                      question_answerer=wrappers["qa"], nli=wrappers["nli"], personal_filter=SpacyPersonalFilter(nlp))
    t0, c0 = time.perf_counter(), time.process_time()
    result = scorer.score(responses=[r.response for r in records], knowledge=[r.knowledge for r in records],
                          explain=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = {role: accel.instrument(comp) for role, comp in hf.items()}
    forward = {role: stats[role].forward_seconds for role in hf}
    calls = {role: stats[role].call_seconds for role in hf}
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "responses_per_s": len(records) / wall,
        "stage_s": dict(scorer.timings),
        "forward_s": forward,
        "call_s": calls,
        # strict: time inside the models' forward passes; calls: also generate()'s beam bookkeeping between steps
        "forward_share": sum(forward.values()) / wall,
        "call_share": sum(calls.values()) / wall,
        "tokens": {role: {"real": stats[role].tokens, "padded": stats[role].padded_tokens} for role in hf},
        "flops": {role: w.flops for role, w in wrappers.items()} if count_flops else None,
        "result": result,
        "real": {role: w.real for role, w in wrappers.items()},
        "work": {"qg_inputs": len(wrappers["qg"].real), "qa_inputs": len(wrappers["qa"].real),
                 "nli_inputs": len(wrappers["nli"].real),
                 "questions": sum(r.num_questions for r in result.responses)},
        "cache": None if scorer.cache is None else {"hits": scorer.cache.hits, "misses": scorer.cache.misses},
    }


def decision_diff(ref: dict[str, dict], other: dict[str, dict], oracle: Oracle) -> dict[str, Any]:
    """Share of real-model decisions that differ: QA span, filter outcome (span == candidate), NLI label."""
    qa_pairs = [p for p in ref["qa"] if p in other["qa"]]
    span = sum(ref["qa"][p] != other["qa"][p] for p in qa_pairs)
    filt_pairs = [p for p in qa_pairs if p in oracle.valid]
    flt = 0
    for p in filt_pairs:
        cand = oracle.valid[p]
        a, b = ref["qa"][p], other["qa"][p]
        flt += (a.has_answer and answers_match(cand, a.text)) != (b.has_answer and answers_match(cand, b.text))
    nli_pairs = [p for p in ref["nli"] if p in other["nli"]]
    nli = sum(ref["nli"][p] != other["nli"][p] for p in nli_pairs)
    qg_pairs = [p for p in ref["qg"] if p in other["qg"]]
    qg = sum(ref["qg"][p] != other["qg"][p] for p in qg_pairs)
    return {
        "qa_span_changed": span / max(1, len(qa_pairs)), "qa_pairs": len(qa_pairs),
        "filter_changed": flt / max(1, len(filt_pairs)), "filter_pairs": len(filt_pairs),
        "nli_label_changed": nli / max(1, len(nli_pairs)), "nli_pairs": len(nli_pairs),
        "qg_beams_changed": qg / max(1, len(qg_pairs)), "qg_inputs": len(qg_pairs),
    }


def qg_against_library(qg: Any, batched: dict[str, Any], qg_len: int) -> dict[str, Any]:
    """The batched run's QG inputs again through the library's ``generate`` (a question generator on the same
    model and settings with ``search="library"``): how many inputs get other questions from our beam search, and
    the time of both."""
    real = batched["real"]["qg"]
    pairs = list(real)
    library_qg = HFQuestionGenerator(qg.tokenizer, qg.model, batch_size=qg.batch_size, max_length=qg.max_length,
                                     sort_by_length=qg.sort_by_length, batch_tokens=qg.batch_tokens,
                                     search="library", generate_overrides=fixed_length(qg_len))
    stats = accel.instrument(library_qg)
    library = library_qg.generate(pairs)
    changed = sum(real[p] != q for p, q in zip(pairs, library))
    return {"inputs": len(pairs), "inputs_with_other_questions": changed, "library_call_s": stats.call_seconds,
            "own_call_s": batched["call_s"]["qg"]}


def summarise(name: str, r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k not in ("result", "real")} | {"mode": name}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"),
                    help="paper-size random-weight models are built here once (about 2.5 GB)")
    ap.add_argument("--sizes", choices=("paper", "tiny"), default="paper",
                    help="tiny: the test-size models, to check the script itself quickly")
    ap.add_argument("--n", type=int, default=16, help="responses in the main comparison")
    ap.add_argument("--scale", type=int, default=0, help="also time the batched run on scale*N responses (e.g. 10)")
    ap.add_argument("--qg-length", type=int, default=10,
                    help="fixed generated question length in tokens (default: %(default)s, the recorded run's median "
                         "question in the QG tokenizer)")
    ap.add_argument("--batch-sizes", default="",
                    help="e.g. qg=16,qa=32,nli=32 (default: the Q2Config defaults, what a user gets)")
    ap.add_argument("--bf16", action="store_true",
                    help="also run the batched pipeline in bfloat16 (only where the CPU has native bf16: AVX-512 BF16 "
                         "or AMX; elsewhere skipped, and the report says so)")
    ap.add_argument("--int8", action="store_true", help="also run the batched pipeline with dynamic int8 Linear layers")
    ap.add_argument("--torch-kernels", action="store_true",
                    help="also run per-item and batched with PyTorch's own matmul (cpu_kernels=torch): what the "
                         "packed oneDNN Linear layers bring, and the speed-up over a reference on library defaults")
    ap.add_argument("--no-flops", action="store_true", help="skip the (untimed) FLOP-counting pass")
    ap.add_argument("--peak-size", type=int, default=2048,
                    help="n of the n x n matmul that measures the CPU's peak (smaller: quicker, lower figure)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: CPU time comparable on a shared machine)")
    ap.add_argument("--raw-questions", action="store_true",
                    help="decode questions as the tokenizer decodes the ids (how the benchmark ran before every id "
                         "decoded to a piece): QA does less work than with real models")
    ap.add_argument("--json", default=str(REPO / "out" / "bench.json"))
    ap.add_argument("--from-json", metavar="PATH",
                    help="measure nothing: recompute the derived figures of an earlier run's JSON and print them")
    args = ap.parse_args(argv)
    if args.from_json:
        print_table(derive(json.loads(Path(args.from_json).read_text())))
        return 0

    data = Path(args.data)
    torch.set_num_threads(args.threads)
    batch_sizes = {role: Q2Config().role_batch_size(role) for role in ("qg", "qa", "nli")}
    batch_sizes |= {k: int(v) for k, v in (kv.split("=") for kv in args.batch_sizes.split(",") if kv)}
    report: dict[str, Any] = {
        "machine": {"cpu": cpu_name(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "torch": torch.__version__, "python": platform.python_version(), "processor": platform.machine()},
        "settings": vars(args) | {"batch_sizes": batch_sizes},
    }
    t0 = time.perf_counter()
    paths = build_models(Path(args.models_dir), data, args.sizes)
    report["build_or_reuse_models_s"] = time.perf_counter() - t0
    report["machine"]["native_bf16"] = bf16_supported()
    if args.bf16 and not bf16_supported():
        args.bf16 = False
        report["bf16_skipped"] = "this CPU has no native bf16 (AVX-512 BF16 or AMX): bf16 runs emulated, ~1 GFLOP/s"
        print(f"--bf16 skipped: {report['bf16_skipped']}", flush=True)
    peaks_start = matmul_peaks(args.peak_size)
    report["peak_gflops"] = {k: v["best"] for k, v in peaks_start.items()}
    records = load_workload(data, args.n, every=max(1, args.scale))
    oracle = Oracle(load_workload(data, max(args.n, args.n * args.scale)))
    nlp = load_spacy("en_core_web_sm")
    hf = make_components(paths, "float32", args.qg_length, in_range=not args.raw_questions)
    report["rss_after_loading_gb"] = peak_rss_gb()
    report["current_rss_after_loading_gb"] = current_rss_gb()

    shown = ", ".join(f"{'fp32' if k == 'float32' else 'bf16'} {v['torch']:.0f} / {v.get('onednn', float('nan')):.0f}"
                      for k, v in peaks_start.items())
    native = "" if "bfloat16" in peaks_start else " (no native bf16 on this CPU: its peak not measured)"
    print(f"N={args.n} responses; peak matmul GFLOP/s (PyTorch / oneDNN packed): {shown}{native}", flush=True)
    per_item = run(hf, nlp, oracle, records, batched=False, batch_sizes=batch_sizes)
    print(f"per-item   {per_item['wall_s']:8.1f} s", flush=True)
    cache_dir = tempfile.mkdtemp(prefix="q2-bench-cache-")
    batched = run(hf, nlp, oracle, records, batched=True, batch_sizes=batch_sizes, cache_dir=cache_dir)
    print(f"batched    {batched['wall_s']:8.1f} s", flush=True)
    cached = run(hf, nlp, oracle, records, batched=True, batch_sizes=batch_sizes, cache_dir=cache_dir)
    print(f"cached     {cached['wall_s']:8.1f} s", flush=True)
    shutil.rmtree(cache_dir, ignore_errors=True)

    same_scores = per_item["result"].to_dict() == batched["result"].to_dict()
    same_real = per_item["real"] == batched["real"]
    report["modes"] = {"per_item": summarise("per_item", per_item), "batched": summarise("batched", batched),
                       "cached": summarise("cached", cached)}
    report["identical_per_item_vs_batched"] = {
        "results": same_scores, "raw_model_outputs": same_real,
        # the same work: every stage fed the models the same real tokens in both modes
        "input_tokens": all(per_item["tokens"][r]["real"] == batched["tokens"][r]["real"] for r in hf),
        "raw_diff": decision_diff(per_item["real"], batched["real"], oracle)}
    report["speedup_batched_vs_per_item"] = per_item["wall_s"] / batched["wall_s"]
    report["speedup_cached_vs_first"] = batched["wall_s"] / cached["wall_s"]
    report["peak_rss_gb_fp32"] = peak_rss_gb()
    report["current_rss_gb_fp32"] = current_rss_gb()
    # after the memory figures: the library's generate holds a per-beam copy of every input's cross-attention cache
    report["qg_vs_library_generate"] = qg_against_library(hf["qg"], batched, args.qg_length)

    flops = None
    if not args.no_flops:
        flops = run(hf, nlp, oracle, records, batched=True, batch_sizes=batch_sizes, count_flops=True)["flops"]

    if args.scale:
        big = load_workload(data, args.n * args.scale)
        scaled = run(hf, nlp, oracle, big, batched=True, batch_sizes=batch_sizes)
        report["scaling"] = {"n": len(records), "n_big": len(big), "time_n": batched["wall_s"],
                             "time_big": scaled["wall_s"], "time_ratio": scaled["wall_s"] / batched["wall_s"],
                             # how much more model input the big set really holds (responses differ in work)
                             "token_ratio": {r: scaled["tokens"][r]["real"] / max(1, batched["tokens"][r]["real"])
                                             for r in hf},
                             "big": summarise("batched_big", scaled)}
        print(f"batched x{args.scale} {scaled['wall_s']:8.1f} s", flush=True)

    runs: dict[str, dict[str, Any]] = {}
    for flag, dtype, int8 in (("bf16", "bfloat16", False), ("int8", "float32", True)):
        if not getattr(args, flag):
            continue
        del hf
        hf = make_components(paths, dtype, args.qg_length, int8=int8, in_range=not args.raw_questions)
        r = runs[flag] = run(hf, nlp, oracle, records, batched=True, batch_sizes=batch_sizes)
        report[flag] = summarise(flag, r) | {
            "speedup_vs_fp32_per_item": per_item["wall_s"] / r["wall_s"],
            "speedup_vs_fp32_batched": batched["wall_s"] / r["wall_s"],
            "decisions_vs_fp32": decision_diff(batched["real"], r["real"], oracle),
            "q2_abs_diff_mean": _mean_abs_diff(batched["result"], r["result"]),
        }
        print(f"{flag:10} {r['wall_s']:8.1f} s", flush=True)

    if args.torch_kernels:
        del hf
        hf = make_components(paths, "float32", args.qg_length, cpu_kernels="torch",
                             in_range=not args.raw_questions)
        ref = run(hf, nlp, oracle, records, batched=False, batch_sizes=batch_sizes)
        print(f"per-item, torch kernels {ref['wall_s']:8.1f} s", flush=True)
        tb = run(hf, nlp, oracle, records, batched=True, batch_sizes=batch_sizes)
        print(f"batched, torch kernels  {tb['wall_s']:8.1f} s", flush=True)
        report["torch_kernels"] = {
            "per_item": summarise("per_item_torch_kernels", ref), "batched": summarise("batched_torch_kernels", tb),
            "speedup_onednn_vs_torch_per_item": ref["wall_s"] / per_item["wall_s"],
            "speedup_onednn_vs_torch_batched": tb["wall_s"] / batched["wall_s"],
            # the default (batched, oneDNN) against a per-item run on the library's defaults, as the original ran
            "speedup_batched_vs_torch_per_item": ref["wall_s"] / batched["wall_s"],
            "identical_results_vs_onednn": tb["result"].to_dict() == batched["result"].to_dict(),
            "decisions_vs_onednn": decision_diff(batched["real"], tb["real"], oracle),
        }

    # the peak again at the end: a machine that got busier during the run shows up as two different figures
    end_peak = matmul_peaks(args.peak_size)
    report["peak_gflops_start"] = peaks_start
    report["peak_gflops_end"] = end_peak
    report["peak_gflops"] = {k: max(v["best"], end_peak[k]["best"]) for k, v in peaks_start.items()}
    if flops is not None:
        report["stage_efficiency_batched_fp32"] = efficiency(flops, batched, report["peak_gflops"]["float32"])
        if "bf16" in runs:  # the same batches as the fp32 run, so the same FLOPs
            report["bf16"]["efficiency"] = efficiency(flops, runs["bf16"], report["peak_gflops"]["bfloat16"])
    derive(report)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    print_table(report)
    print(f"\nJSON: {args.json}")
    return 0


def _mean_abs_diff(a: Any, b: Any) -> float:
    pairs = [(x.score, y.score) for x, y in zip(a.responses, b.responses)
             if x.score is not None and y.score is not None]
    return sum(abs(x - y) for x, y in pairs) / max(1, len(pairs))


def print_table(rep: dict[str, Any]) -> None:
    m = rep["modes"]
    print("\n| mode | wall s | resp/s | in forwards | in model calls | qg s | qa s | nli s | spaCy s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [(k, v) for k, v in m.items()] + [(k, rep[k]) for k in ("bf16", "int8") if k in rep]
    for name, r in rows:
        st = r["stage_s"]
        print(f"| {name} | {r['wall_s']:.1f} | {r['responses_per_s']:.3f} | {100 * r['forward_share']:.0f}% | "
              f"{100 * r['call_share']:.0f}% | "
              f"{st.get('qg', 0):.1f} | {st.get('qa', 0):.1f} | {st.get('nli', 0):.1f} | "
              f"{st.get('candidates', 0) + st.get('personal', 0):.1f} |")
    print(f"\nbatched / per-item speed-up: {rep['speedup_batched_vs_per_item']:.2f}x; identical results: "
          f"{rep['identical_per_item_vs_batched']['results']}, identical raw model outputs: "
          f"{rep['identical_per_item_vs_batched']['raw_model_outputs']}")
    print(f"cached re-run speed-up: {rep['speedup_cached_vs_first']:.0f}x; peak RSS (fp32, 3 models): "
          f"{rep['peak_rss_gb_fp32']:.2f} GB (after loading: peak {rep['rss_after_loading_gb']:.2f} GB, "
          f"resident then {rep['current_rss_after_loading_gb'] or float('nan'):.2f} GB; after the runs: resident "
          f"{rep['current_rss_gb_fp32'] or float('nan'):.2f} GB)")
    g = rep["qg_vs_library_generate"]
    print(f"QG beam search: {g['own_call_s']:.1f} s, the library's generate {g['library_call_s']:.1f} s on the same "
          f"{g['inputs']} inputs; inputs with other questions: {g['inputs_with_other_questions']}")
    effs = [("fp32", rep.get("stage_efficiency_batched_fp32"))]
    if "bf16" in rep:
        effs.append(("bf16", rep["bf16"].get("efficiency")))
    for name, eff in effs:
        for role, e in (eff or {}).items():
            print(f"{name} {role}: {e['gflop']:.0f} GFLOP in {e['call_s']:.1f} s of calls = {e['gflop_per_s']:.0f} "
                  f"GFLOP/s ({100 * e['share_of_peak']:.0f}% of the {e['peak_gflop_per_s']:.0f} GFLOP/s matmul peak; "
                  f"{100 * e['share_of_peak_in_forward']:.0f}% inside forwards), padding "
                  f"{100 * e['padding_share']:.1f}% of input positions")
    if "scaling" in rep:
        s = rep["scaling"]
        tr = ", ".join(f"{r} {v:.2f}x" for r, v in s["token_ratio"].items())
        print(f"scaling: {s['n_big']} vs {s['n']} responses costs {s['time_ratio']:.2f}x the time, for {tr} the "
              f"model input tokens")
    if "torch_kernels" in rep:
        t = rep["torch_kernels"]
        d = t["decisions_vs_onednn"]
        print(f"PyTorch's matmul instead of packed oneDNN: per-item {t['per_item']['wall_s']:.1f} s "
              f"({t['speedup_onednn_vs_torch_per_item']:.2f}x slower), batched {t['batched']['wall_s']:.1f} s "
              f"({t['speedup_onednn_vs_torch_batched']:.2f}x slower); the default is "
              f"{t['speedup_batched_vs_torch_per_item']:.2f}x a per-item run on PyTorch's matmul; identical results: "
              f"{t['identical_results_vs_onednn']}, changed decisions: QA span {100 * d['qa_span_changed']:.1f}%, "
              f"NLI label {100 * d['nli_label_changed']:.1f}%, QG beams {100 * d['qg_beams_changed']:.1f}%")
    for k in ("bf16", "int8"):
        if k in rep:
            d = rep[k]["decisions_vs_fp32"]
            print(f"{k}: {rep[k]['speedup_vs_fp32_per_item']:.2f}x the fp32 per-item reference "
                  f"({rep[k]['speedup_vs_fp32_batched']:.2f}x batched fp32); changed decisions: QA span "
                  f"{100 * d['qa_span_changed']:.1f}%, filter {100 * d['filter_changed']:.1f}%, NLI label "
                  f"{100 * d['nli_label_changed']:.1f}%; mean |dQ2| {rep[k]['q2_abs_diff_mean']:.3f}")

    c = rep.get("ceilings")
    if c:
        print(f"ceilings: the batched run's {c['gflop']:.0f} GFLOP at 100% of the matmul peak, plus its "
              f"{c['outside_model_calls_s']:.1f} s outside model calls, would take {c['fp32_seconds_at_peak']:.1f} s "
              f"in fp32 ({c['fp32_speedup_ceiling_vs_per_item']:.2f}x the per-item run)" + (
                  f" and {c['bf16_seconds_at_peak']:.1f} s in bf16 ({c['bf16_speedup_ceiling_vs_per_item']:.2f}x)"
                  if "bf16_seconds_at_peak" in c else "; bf16: no native bf16 on this CPU"))
    if "targets" in rep:
        print("\n| target | goal | measured | met |\n|---|---|---:|---|")
        for t in rep["targets"]:
            v = t["measured"]
            shown = "-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))
            met = "not measured" if t["met"] is None else ("yes" if t["met"] else "NO")
            print(f"| {t['target']} | {t['goal']} | {shown} | {met} |")

if __name__ == "__main__":
    sys.exit(main())
