#!/usr/bin/env python
"""Cost per response of the coreference step (``--coref``): the F-coref backend of
:mod:`q2_plugins.backends.hf.coref` on a tiny random-weight model and on a random-weight build of the published model's
size (distilroberta: 6 layers, hidden 768, 12 heads, FFN 3072, vocabulary 50265; head ffnn_size 1024). Random
weights cost what trained ones cost: the same matrix products, the same number of candidate mentions (a fixed share of
the tokens).

The workload is the bundled sample's (history, response) pairs, repeated to ``--n``. Each model resolves them
batched (``--batch-size``) and one at a time; the script prints the best of ``--repeats`` wall times per response,
the mean tokens per pair, and whether both ways gave the same rewrites.

    python benchmarks/bench_coref.py [--n 48] [--repeats 2] [--sizes tiny,paper] [--threads N]

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.backends.hf.coref import FCoref, load_fcoref  # noqa: E402
from q2_plugins.backends.hf.tiny import build_fcoref  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PAPER_SIZE = dict(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
                  ffnn_size=1024, model_vocab=50265)


def _pairs(n: int) -> list[tuple[str, str]]:
    rows = [json.loads(x) for x in (REPO / "q2_plugins" / "data" / "sample.jsonl").read_text().splitlines()]
    pairs = [(r.get("history") or "", r["response"]) for r in rows]
    return [pairs[i % len(pairs)] for i in range(n)]


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure(size: str, path: Path, pairs: list[tuple[str, str]], args: argparse.Namespace) -> None:
    tok, model = load_fcoref(str(path))
    params = sum(p.numel() for p in model.parameters()) / 1e6
    tokens = sum(len(FCoref(tok, model)._doc(h, r).ids) for h, r in pairs) / len(pairs)
    batched_fc = FCoref(tok, model, batch_size=args.batch_size)
    single_fc = FCoref(tok, model, batch_size=1, sort_by_length=False)
    batched_fc.resolve(pairs[:2])  # warm-up
    out: dict[str, list] = {}
    t_batch = _best(lambda: out.__setitem__("b", batched_fc.resolve(pairs)), args.repeats)
    t_single = _best(lambda: out.__setitem__("s", [single_fc.resolve([p])[0] for p in pairs]), args.repeats)
    print(f"{size:5s} {params:7.1f}M params, {tokens:5.1f} tokens/pair: batched "
          f"{1000 * t_batch / len(pairs):7.2f} ms/response, one at a time {1000 * t_single / len(pairs):7.2f} "
          f"ms/response; same rewrites: {out['b'] == out['s']}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=48, help="responses resolved per measurement")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--sizes", default="tiny,paper")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    pairs = _pairs(args.n)
    print(f"CPU: {cpu_name()}; torch threads {torch.get_num_threads()}; {len(pairs)} responses")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            _measure(size, build_fcoref(Path(tmp) / size, **(PAPER_SIZE if size == "paper" else {})), pairs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
