#!/usr/bin/env python
"""What Q²'s Inspect scorer costs for samples that Inspect scores concurrently, against one batched core call.

    python benchmarks/bench_inspect.py --workdir out/inspect-bench             # tiny Q² models built here
    python benchmarks/bench_inspect.py --workdir DIR --qg-model Q2/qg --qa-model Q2/qa --nli-model Q2/nli

The samples are the first ``--n`` recorded Wizard of Wikipedia responses of the Q² paper (as ``bench_lm_eval.py``
takes them). An Inspect eval (``mockllm/model``, the ``recorded_response`` solver, ``max_samples`` = ``--n``) runs
them through ``q2_scorer``; the time measured is the scorer's span, from the first sample's call to the last
sample's return (the micro-batcher's wait included). The other side is one ``Q2Scorer.score`` call on the same
(response, knowledge) pairs with the same settings (``explain=True``, as the scorer), on the same loaded scorer.
``--repeat`` times each, in turn, the side that goes first alternating; ``ratio`` compares the fastest of each.
The run fails unless both sides give the same scores. Prints the CPU: timings compare only on one machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--n", type=int, default=64, help="samples (recorded responses)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each side, taken in turn")
    ap.add_argument("--qg-model")
    ap.add_argument("--qa-model")
    ap.add_argument("--nli-model")
    ap.add_argument("--qg-max-length", type=int, default=64)
    ap.add_argument("--window", type=float, default=0.05, help="the micro-batcher's window, seconds")
    ap.add_argument("--max-batch", type=int, default=64, help="the micro-batcher's batch cap")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    from bench_lm_eval import model_settings, write_documents
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import mean, scorer
    from machine import cpu_name

    from q2_plugins.integrations.adapters import config_from_options, shared_scorer
    from q2_plugins.integrations.inspect import q2_scorer, recorded_response

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    docs = work / "docs.jsonl"
    n = write_documents(Path(args.data), docs, args.n)
    settings = model_settings(args, work)
    core = shared_scorer(config_from_options(settings), slot="inspect")  # the scorer q2_scorer uses
    for part in ("candidate_extractor", "question_generator", "question_answerer", "personal_filter", "nli"):
        getattr(core, part)  # models loaded now: loading is not what is measured

    rows = [json.loads(line) for line in docs.read_text(encoding="utf-8").splitlines()]
    samples = [Sample(input=r["history"][-1], id=r["id"], metadata={"knowledge": r["knowledge"],
                                                                    "response": r["response"]}) for r in rows]
    inner = q2_scorer(**settings, window=args.window, max_batch=args.max_batch)
    spans: list[tuple[float, float]] = []

    @scorer(metrics={"q2": [mean()]})
    def timed():  # noqa: ANN202 - Inspect's scorer factory
        async def score(state, target):  # noqa: ANN001, ANN202
            start = time.perf_counter()
            result = await inner(state, target)
            spans.append((start, time.perf_counter()))
            return result
        return score

    def inspect_side() -> tuple[float, dict]:
        spans.clear()
        (log,) = inspect_eval(Task(dataset=samples, solver=recorded_response(), scorer=timed()),
                              model="mockllm/model", log_dir=str(work / "inspect-logs"), display="none",
                              max_samples=n, log_samples=True)
        if log.status != "success":
            raise SystemExit(f"bench_inspect: the eval failed: {log.error}")
        scores = {s.id: s.scores["timed"].value["q2"] for s in log.samples}
        return max(e for _, e in spans) - min(s for s, _ in spans), scores

    def offline_side() -> tuple[float, dict]:
        start = time.perf_counter()
        res = core.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows],
                         explain=True)
        return time.perf_counter() - start, {r["id"]: x.score for r, x in zip(rows, res.responses)}

    inspect_side()  # warm-up: Inspect's own imports and first eval
    timings: dict[str, list[float]] = {"scorer": [], "offline": []}
    batches_before = inner.batcher.batches
    scores: dict[str, dict] = {}
    for i in range(args.repeat):
        order = (("scorer", inspect_side), ("offline", offline_side))
        for name, side in order if i % 2 == 0 else reversed(order):
            seconds, scores[name] = side()
            timings[name].append(seconds)
    batches = (inner.batcher.batches - batches_before) / args.repeat
    same = all(math.isclose(scores["scorer"][k], v, abs_tol=1e-9) if v is not None and
               not math.isnan(scores["scorer"][k]) else v is None for k, v in scores["offline"].items())
    if not same:
        raise SystemExit("bench_inspect: the scorer's scores differ from the core's on the same pairs")
    best = {k: min(v) for k, v in timings.items()}
    print(f"cpu          {cpu_name()}")
    print(f"samples      {n}  (window {args.window}s, max_batch {args.max_batch}, {batches:g} core calls per eval)")
    print(f"scorer       {best['scorer']:.3f}s  (fastest of {args.repeat}: "
          + ", ".join(f"{t:.3f}" for t in timings["scorer"]) + ")")
    print(f"offline      {best['offline']:.3f}s  (fastest of {args.repeat}: "
          + ", ".join(f"{t:.3f}" for t in timings["offline"]) + ")")
    print(f"ratio        {best['scorer'] / best['offline']:.2f}x  (scorer / one Q2Scorer.score call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
