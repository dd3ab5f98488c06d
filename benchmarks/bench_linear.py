#!/usr/bin/env python
"""GFLOP/s of the paper models' Linear layers: PyTorch's ``F.linear`` against a oneDNN packed weight.

Shapes are those of T5-base (QG), ALBERT-xlarge (QA) and RoBERTa-large (NLI); rows are what a pass multiplies: a
beam step of one input (5 rows) or of 32 inputs (160), one QA window or NLI pair, a full 2048-token batch.

    python benchmarks/bench_linear.py [--dtype float32|bfloat16]

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from machine import best_seconds  # noqa: E402  (this script's own folder is on the path)

from q2_plugins.backends.accel.onednn import PackedLinear, available, bf16_supported  # noqa: E402

# (model, layer, in, out, rows)
SHAPES = [
    ("T5-base", "attention q/k/v/o", 768, 768, (5, 160, 1024)),
    ("T5-base", "FFN in", 768, 3072, (5, 160, 1024)),
    ("T5-base", "FFN out", 3072, 768, (5, 160, 1024)),
    ("T5-base", "LM head", 768, 32128, (5, 160)),
    ("ALBERT-xlarge", "attention q/k/v/o", 2048, 2048, (300, 2048)),
    ("ALBERT-xlarge", "FFN in", 2048, 8192, (300, 2048)),
    ("ALBERT-xlarge", "FFN out", 8192, 2048, (300, 2048)),
    ("RoBERTa-large", "attention q/k/v/o", 1024, 1024, (100, 2048)),
    ("RoBERTa-large", "FFN in", 1024, 4096, (100, 2048)),
    ("RoBERTa-large", "FFN out", 4096, 1024, (100, 2048)),
]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args(argv)
    if not available() or (args.dtype == "bfloat16" and not bf16_supported()):
        print(f"oneDNN packed Linear layers in {args.dtype} are not available with this PyTorch build on this CPU")
        return 1
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    print(f"{args.dtype}, {torch.get_num_threads()} threads\n")
    print("| model | layer | in x out | rows | F.linear GFLOP/s | oneDNN packed GFLOP/s | speed-up |")
    print("|---|---|---|---:|---:|---:|---:|")
    with torch.inference_mode():
        for model, layer, k, n, all_rows in SHAPES:
            weight = torch.randn(n, k, dtype=dtype)
            packed = PackedLinear(weight)
            for m in all_rows:
                x = torch.randn(m, k, dtype=dtype)
                flop = 2 * m * k * n
                plain = flop / best_seconds(lambda x=x, w=weight: torch.nn.functional.linear(x, w)) / 1e9
                fast = flop / best_seconds(lambda x=x, p=packed: p(x)) / 1e9
                print(f"| {model} | {layer} | {k} x {n} | {m} | {plain:.0f} | {fast:.0f} | {fast / plain:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
