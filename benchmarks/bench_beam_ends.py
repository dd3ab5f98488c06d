#!/usr/bin/env python
"""QG beam search when questions end at different steps: inputs whose beams are final leave the decoded batch.

Random weights rarely end a question, and the main benchmark fixes every question's length, so there every input
of a search finishes at the same step. Here the paper-size QG model's end-of-sequence logit is pushed up along a
seeded random direction, so that inputs close at different steps (a cost model: how a trained model's questions end
is not reproduced), with 8 to 24 new tokens per question. The benchmark's batched QG inputs
(the recorded and spaCy candidates of the same N responses) are generated three ways: inputs never leave the batch,
they leave once an eighth of it is final, and at the default share. It prints hypotheses decoded (rows x steps), the
best of ``--repeats`` wall times, and whether the questions are identical.

    python benchmarks/bench_beam_ends.py [--n 16] [--repeats 2] [--sizes tiny]

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_pipeline, also when loaded from elsewhere

import torch  # noqa: E402
from bench_pipeline import REPO, BenchCandidates, Oracle, build_models, load_workload  # noqa: E402

from q2_plugins import Q2Config  # noqa: E402
from q2_plugins.backends import accel
from q2_plugins.backends.hf.transformers_models import HFQuestionGenerator, load_model  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, load_spacy  # noqa: E402


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--sizes", choices=("paper", "tiny"), default="paper",
                    help="tiny: the test-size models, to check the script itself quickly")
    ap.add_argument("--n", type=int, default=16, help="responses (every 10th of 10N, as in the main benchmark)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)

    paths = build_models(Path(args.models_dir), Path(args.data), args.sizes)
    records = load_workload(Path(args.data), args.n, every=10)
    responses = [r.response for r in records]
    extractor = BenchCandidates(SpacyCandidateExtractor(load_spacy("en_core_web_sm")), Oracle(records))
    pairs = list(dict.fromkeys((c, r) for r, cands in zip(responses, extractor.extract(responses)) for c in cands))
    tok, model = load_model("qg", str(paths["qg"]), None, "cpu", "float32", "seq2seq", "torch")
    eos = model.generation_config.eos_token_id
    with torch.no_grad():
        weight = model.lm_head.weight
        push = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(1))
        weight[eos] += weight.std() * 4.0 * push
    accel.prepare_model(model, "onednn")  # as load_model does with the default CPU kernels
    qg = HFQuestionGenerator(tok, model, batch_size=Q2Config().role_batch_size("qg"), max_length=128,
                             generate_overrides={"min_new_tokens": 8, "max_new_tokens": 24, "max_length": None})
    qg.generate(pairs[:2])  # warm-up; builds the search
    search = qg.runner.beam_search
    if search is None:
        print("this model does not run our beam search")
        return 1
    default = search.drop_fraction
    decoded = 0
    inner = search.generate

    def counted(*a: Any, **k: Any) -> Any:
        nonlocal decoded
        out = inner(*a, **k)
        decoded += search.decoded_rows
        return out

    search.generate = counted  # type: ignore[method-assign]
    print(f"{len(pairs)} QG inputs, batch size {qg.batch_size}, 8-24 new tokens")
    print("| inputs leave the batch | hypotheses decoded | best wall s | questions as never leaving |")
    print("|---|---:|---:|---|")
    reference = None
    default_label = "as soon as one is final" if default == 0 else f"once {default:g} of it is final"
    for label, fraction in (("never", math.inf), ("once an eighth of it is final", 0.125),
                            (f"{default_label} (default)", default)):
        search.drop_fraction = fraction
        best = math.inf
        for _ in range(args.repeats):
            decoded = 0
            start = time.perf_counter()
            questions = qg.generate(pairs)
            best = min(best, time.perf_counter() - start)
        reference = reference or questions
        print(f"| {label} | {decoded} | {best:.2f} | {'identical' if questions == reference else 'DIFFERENT'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
