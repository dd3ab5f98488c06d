#!/usr/bin/env python
"""Benchmark the QA stage at paper size on the CPU: the float32 default against the ``onnx:`` int8 backend.

The QA model has ALBERT-xlarge's sizes with random weights (a forward pass costs the same whatever the weights) and
a tokenizer trained on the WoW / BEGIN text (``bench_pipeline.py``'s models). The work is the recorded run's: each
recorded question of ``q2_original_run`` asked of its response (the filter's QA) and of its knowledge. Both rows
answer the same pairs with one thread; the figures are CPU time (``time.process_time``), best of ``--trials``.
Also prints how many answers the two agree on (random weights: a check of the export, not of accuracy).
``--nli`` also times the paper-size RoBERTa-large NLI model on each response's (knowledge, response) pair and as many
answer-comparison pairs: fp32, the ``ct2:`` int8 backend, and the same ONNX export and int8 quantisation as QA's
(whether the onnx backend should take NLI too).

    python benchmarks/bench_onnx_qa.py --n 24 --json out/onnx_qa.json [--sizes tiny] [--nli]

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.bench_pipeline import build_models, load_workload  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins import Q2Config, backends  # noqa: E402
from q2_plugins.backends import accel  # noqa: E402


def pairs_of(n: int) -> list[tuple[str, str]]:
    """The recorded questions of ``n`` responses, asked of the response and of the knowledge."""
    data = REPO / "q2_plugins" / "data"
    out = []
    for rec in load_workload(data, n):
        for q in rec.questions:
            out += [(q.question, rec.response), (q.question, rec.knowledge)]
    return list(dict.fromkeys(out))


def cpu_seconds(qa: Any, pairs: Sequence[tuple[str, str]], trials: int) -> tuple[float, list[Any]]:
    best, answers = float("inf"), []
    for _ in range(trials):
        t0 = time.process_time()
        answers = qa.answer(list(pairs))
        best = min(best, time.process_time() - t0)
    return best, answers


def nli_pairs(n: int) -> list[tuple[str, str]]:
    """Each response's fallback pair, then answer-comparison pairs built from its recorded questions."""
    recs = load_workload(REPO / "q2_plugins" / "data", n)
    compare = [(f"{q.question} {r.knowledge[:60]}.", f"{q.question} {r.response[:40]}.") for r in recs
               for q in r.questions]
    return [(r.knowledge, r.response) for r in recs] + compare[:n]


def onnx_classifier(nli_dir: Path, out: Path) -> Any:
    """An ONNX Runtime session of the NLI model, exported and quantised as the onnx backend does QA models."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from q2_plugins.backends import onnx

    if not (out / "model.onnx").exists():
        out.mkdir(parents=True, exist_ok=True)
        model = AutoModelForSequenceClassification.from_pretrained(nli_dir).eval()

        class Logits(torch.nn.Module):
            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                return model(input_ids=input_ids, attention_mask=attention_mask).logits

        ex = AutoTokenizer.from_pretrained(nli_dir)(["a b"], ["c d"], return_tensors="pt")
        dims = {"input_ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("tokens")}}
        dims["attention_mask"] = dims["input_ids"]
        with onnx._quiet():
            torch.onnx.export(Logits(), (ex["input_ids"], ex["attention_mask"]), str(out / "f.onnx"), dynamo=True,
                              input_names=list(dims), dynamic_shapes=dims, external_data=False)
            onnx._fold_weight_transposes(out / "f.onnx")
            quantize_dynamic(str(out / "f.onnx"), str(out / "model.onnx"), weight_type=QuantType.QInt8)
    return onnx._session(out / "model.onnx")


def nli_rows(nli_dir: Path, n: int, models: Path) -> dict[str, float]:
    """CPU seconds of the NLI pairs of ``n`` responses: fp32 default, ct2 int8, onnx int8 (one window at a time)."""
    import numpy as np

    pairs = nli_pairs(n)
    fp32 = backends.load("nli", Q2Config(nli_model=str(nli_dir)))
    ct2 = backends.load("nli", Q2Config(nli_model=f"ct2:{nli_dir}"))
    session = onnx_classifier(nli_dir, models / "nli_onnx")
    windows = fp32._windows(pairs).features

    def by_onnx() -> None:
        for f in windows:
            session.run(None, {k: np.asarray([f[k]], dtype=np.int64) for k in ("input_ids", "attention_mask")})

    out = {"nli_pairs": len(pairs), "nli_tokens": sum(len(f["input_ids"]) for f in windows)}
    for name, fn in (("fp32", lambda: fp32.predict(pairs)), ("ct2_int8", lambda: ct2.predict(pairs)),
                     ("onnx_int8", by_onnx)):
        t0 = time.process_time()
        fn()
        out[f"nli_{name}_cpu_s"] = time.process_time() - t0
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=24, help="responses of the recorded run (default 24)")
    ap.add_argument("--sizes", choices=["paper", "tiny"], default="paper")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--models", default=os.path.join(tempfile.gettempdir(), "q2_bench_models"),
                    help="where the random-weight models are built once")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--nli", action="store_true", help="also time NLI: fp32, ct2 int8, onnx int8")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    paths = build_models(Path(args.models), REPO / "q2_plugins" / "data", args.sizes)
    qa_dir = paths["qa"]
    pairs = pairs_of(args.n)
    t0 = time.perf_counter()
    onnx = backends.load("qa", Q2Config(qa_model=f"onnx:{qa_dir}"))
    export_s = time.perf_counter() - t0
    fp32 = backends.load("qa", Q2Config(qa_model=str(qa_dir)))
    rows = {}
    for name, qa in (("fp32 (default)", fp32), ("onnx int8", onnx)):
        stats = accel.instrument(qa)
        stats.reset()
        seconds, answers = cpu_seconds(qa, pairs, args.trials)
        rows[name] = {"cpu_s": seconds, "answers": [a.to_dict() for a in answers],
                      "tokens": stats.tokens // args.trials}
    ref, new = rows["fp32 (default)"], rows["onnx int8"]
    same = sum(a == b for a, b in zip(ref["answers"], new["answers"]))
    report = {"cpu": cpu_name(), "threads": 1, "sizes": args.sizes, "responses": args.n, "pairs": len(pairs),
              "tokens": ref["tokens"], "export_and_load_s": export_s,
              "fp32_cpu_s": ref["cpu_s"], "int8_cpu_s": new["cpu_s"], "speedup": ref["cpu_s"] / new["cpu_s"],
              "same_answers": same}
    print(f"CPU {report['cpu']}, 1 thread, {args.sizes}-size ALBERT QA, {len(pairs)} (question, context) pairs "
          f"({ref['tokens']} tokens) from {args.n} recorded responses")
    print(f"  fp32 default : {ref['cpu_s']:8.2f} s CPU")
    print(f"  onnx int8    : {new['cpu_s']:8.2f} s CPU   ({report['speedup']:.2f}x; export + load "
          f"{export_s:.0f} s, once per machine)")
    print(f"  same answers : {same}/{len(pairs)}")
    if args.nli:
        report.update(nli_rows(paths["nli"], args.n, Path(args.models) / args.sizes))
        print(f"NLI, {report['nli_pairs']} pairs ({report['nli_tokens']} tokens): fp32 {report['nli_fp32_cpu_s']:.2f} "
              f"s, ct2 int8 {report['nli_ct2_int8_cpu_s']:.2f} s, onnx int8 {report['nli_onnx_int8_cpu_s']:.2f} s CPU")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
