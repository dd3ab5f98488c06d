"""What spaCy work beside a model-driving thread costs that thread: in a thread of the same process, or in the worker
process of :mod:`q2_plugins.metric.spacy_worker`.

A thread that drives a GPU issues one small op after another, each holding Python's lock while it is launched. The
stand-in here is a loop of small in-place torch ops on the CPU (one torch thread). It is timed alone, then while a
spaCy thread parses questions in the same process, then while the worker process parses them (the personal filter
of :class:`~q2_plugins.metric.spacy_worker.PersonalAhead`, the same questions). Also printed: questions the parser got
through meanwhile, per second.

    python benchmarks/bench_overlap.py [--ops 20000] [--repeats 3] > benchmarks/results/bench_overlap_<commit>.txt

Measures and prints; asserts nothing about speed. Needs 2 cores or more (the parser and the loop each take one).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyPersonalFilter, load_spacy  # noqa: E402
from q2_plugins.metric.spacy_worker import PersonalAhead  # noqa: E402

QUESTIONS = ["What do you think I should plant in my garden this year?", "Which city do you love most?",
             "What did I say about your dog?", "Where do you and I go on holiday?"] * 50


def small_ops(n: int) -> float:
    x = torch.zeros(4)
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    nlp = load_spacy("en_core_web_sm", shared=False)
    own = SpacyPersonalFilter(nlp)
    own.is_personal(QUESTIONS[:8])
    t0 = time.perf_counter()
    own.is_personal(QUESTIONS)
    parse_rate = len(QUESTIONS) / (time.perf_counter() - t0)
    alone = min(small_ops(args.ops) for _ in range(args.repeats))

    stop = threading.Event()
    parsed = [0]

    def in_thread() -> None:
        while not stop.is_set():
            own.is_personal(QUESTIONS[:20])
            parsed[0] += 20

    thread = threading.Thread(target=in_thread)
    thread.start()
    time.sleep(0.3)
    before = parsed[0]
    beside_thread = min(small_ops(args.ops) for _ in range(args.repeats))
    thread_rate = (parsed[0] - before) / (beside_thread * args.repeats)  # (roughly: the parses during the loops)
    stop.set()
    thread.join()

    ahead = PersonalAhead(own, "en_core_web_sm")
    ahead.start(["Which city do you love most?"])
    ahead.wait()  # the worker has loaded its pipeline
    times = []
    t_parse = 0.0
    for r in range(args.repeats):
        batch = [f"{q} ({r}, {i})" for i, q in enumerate(QUESTIONS * 4)]  # new texts: nothing known already
        t0 = time.perf_counter()
        ahead.start(batch)
        times.append(small_ops(args.ops))
        ahead.wait()
        t_parse += time.perf_counter() - t0
    ahead.close()
    beside_process = min(times)

    print(f"# CPU: {os.cpu_count()}-core {cpu_name()}; load average {os.getloadavg()[0]:.1f} at the end")
    print(f"# {args.ops} small torch ops, best of {args.repeats}; spaCy alone parses {parse_rate:.0f} questions/s")
    print("| the loop of small ops | seconds | vs alone |")
    print("|---|---:|---:|")
    print(f"| alone | {alone:.3f} | 1.00x |")
    print(f"| beside a spaCy thread (same process; ~{thread_rate:.0f} questions/s) | {beside_thread:.3f} | "
          f"{beside_thread / alone:.2f}x |")
    print(f"| beside the spaCy worker process ({len(QUESTIONS) * 4} questions a round, {t_parse:.2f} s for "
          f"{args.repeats} rounds) | {beside_process:.3f} | {beside_process / alone:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
