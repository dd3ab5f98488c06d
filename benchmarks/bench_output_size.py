#!/usr/bin/env python
"""Bytes of ``q2 score`` output per byte of input: the factors of the free-space check before a run
(``q2_plugins.jobs.partial.OUTPUT_FACTOR`` / ``EXPLAINED_FACTOR``).

The input is the bundled slice of the original run (real responses, knowledge, questions and answers), written as
``q2 score`` reads it (``id``, ``response``, ``knowledge`` per JSONL line); the output is what ``q2 score`` writes for
it (:func:`q2_plugins.io.rows.result_row`, the one row writer), with and without ``--explain``, the results replayed
from the recorded questions. Prints the ratio of each file and over all rows, and the largest row's.

    python benchmarks/bench_output_size.py

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from q2_plugins.io.outputs import json_line  # noqa: E402
from q2_plugins.io.rows import result_row  # noqa: E402
from q2_plugins.jobs.partial import EXPLAINED_FACTOR, OUTPUT_FACTOR  # noqa: E402
from q2_plugins.jobs.replay import bundled_original_run, load_original_steps, load_recorded_scores, replay  # noqa: E402


def main() -> None:
    totals = {"input": 0, "plain": 0, "explained": 0}
    largest = {"plain": 0.0, "explained": 0.0}
    for steps, scores in zip(*bundled_original_run()):
        fallback = {k: v.q2_no_nli for k, v in load_recorded_scores(scores).items()}
        records = load_original_steps(steps, fallback)
        sizes = {"input": 0, "plain": 0, "explained": 0}
        for explain in (False, True):
            result = replay(records, explain=explain)
            for i, (rec, res) in enumerate(zip(records, result.responses)):
                record = {"id": rec.id, "response": rec.response, "knowledge": rec.knowledge}
                size_in = len((json_line(record) + "\n").encode("utf-8"))
                size_out = len((json_line(result_row(i, record, res, explain)) + "\n").encode("utf-8"))
                key = "explained" if explain else "plain"
                sizes[key] += size_out
                largest[key] = max(largest[key], size_out / size_in)
                if not explain:
                    sizes["input"] += size_in
        for k, v in sizes.items():
            totals[k] += v
        print(f"{steps.name}: {len(records)} rows, input {sizes['input']:,} B, output "
              f"x{sizes['plain'] / sizes['input']:.2f}, with --explain x{sizes['explained'] / sizes['input']:.2f}")
    print(f"all: input {totals['input']:,} B, output x{totals['plain'] / totals['input']:.2f} (largest row "
          f"x{largest['plain']:.2f}), with --explain x{totals['explained'] / totals['input']:.2f} (largest row "
          f"x{largest['explained']:.2f})")
    print(f"the free-space check uses x{OUTPUT_FACTOR:g} and, with --explain, x{EXPLAINED_FACTOR:g}")


if __name__ == "__main__":
    main()
