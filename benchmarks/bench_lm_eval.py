#!/usr/bin/env python
"""What Q² costs inside an lm-eval run, against scoring the same pairs offline with the core in one call.

    python benchmarks/bench_lm_eval.py --workdir out/lm-eval-bench   # tiny Q² models built here (questions end early)
    python benchmarks/bench_lm_eval.py --workdir DIR --qg-model Q2/qg --qa-model Q2/qa --nli-model Q2/nli

The documents are the recorded Wizard of Wikipedia responses of the Q² paper (``q2_plugins/data/q2_original_run``:
``history`` = the apprentice's message, ``knowledge``, ``response`` = the dialogue model's reply), run as the bundled
``q2_wow`` task. The model is ``GoldLM``, which answers with the document's recorded response: the metric's cost does
not depend on the model (as ``repeat_label`` in ParlAI's benchmark, ``parlai_ext/benchmark.py``).

In one process, imports warmed up and the Q² models loaded once up front on both sides, ``--repeat`` times in turn:
``lm_eval.simple_evaluate`` timing what happens inside the metric (the task's one core call after its filters, and
every ``process_results``), and a :class:`Q2Scorer` scoring the same (response, knowledge) pairs in one call with
the same settings (``explain=True``, as the metric), the side that goes first alternating. ``ratio`` compares the
fastest of each (wall time; ``cpu_ratio`` in CPU time of this process). The run fails unless the logged pairs are
those pairs and the metric and the offline score agree. Measures and prints; asserts nothing else.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SUBSETS = ["dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent"]


def write_documents(data: Path, out: Path, n: int) -> int:
    """The first ``n`` recorded responses (round-robin over the four subsets) as a ``q2_wow`` JSONL."""
    tables = []
    for name in SUBSETS:
        with open(data / "q2_original_run" / name / f"{name}_out.csv", newline="", encoding="utf-8") as f:
            tables.append(list(csv.DictReader(f)))
    rows = []
    for i in range(max(len(t) for t in tables)):
        for name, table in zip(SUBSETS, tables):
            if i < len(table) and len(rows) < n:
                r = table[i]
                rows.append({"id": f"{name}-{i}", "history": [r["message"]], "knowledge": r["knowledge"],
                             "response": r["response"]})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return len(rows)


def gold_lm() -> Any:
    from lm_eval.api.model import LM

    class GoldLM(LM):
        """Answers every generation request with the document's recorded response."""

        def generate_until(self, requests: list) -> list[str]:
            return [req.doc["response"] for req in requests]

        def loglikelihood(self, requests: list) -> list:
            raise NotImplementedError("GoldLM only generates")

        def loglikelihood_rolling(self, requests: list) -> list:
            raise NotImplementedError("GoldLM only generates")

    return GoldLM()


def model_settings(args: argparse.Namespace, work: Path) -> dict:
    """The Q² model settings of the run: the models named by the flags, else tiny random-weight ones built in
    ``work`` (QG ending its questions early: random weights seldom end them)."""
    if args.qg_model:
        models = {"qg_model": args.qg_model, "qa_model": args.qa_model, "nli_model": args.nli_model}
    else:
        from q2_plugins.backends.hf.tiny import build_all, short_questions_copy

        paths = build_all(work / "q2-models")
        paths["qg"] = short_questions_copy(paths["qg"], work / "q2-models" / "qg-short")
        models = {f"{role}_model": str(path) for role, path in paths.items()}
    return {**models, "qg_max_length": args.qg_max_length}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--n", type=int, default=120, help="documents (recorded responses)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each side, taken in turn")
    ap.add_argument("--qg-model")
    ap.add_argument("--qa-model")
    ap.add_argument("--nli-model")
    ap.add_argument("--qg-max-length", type=int, default=64)
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's); 1 steadies CPU time on a busy "
                                                "machine, where idle threads spin")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    import lm_eval
    from lm_eval.api.task import ConfigurableTask

    import q2_plugins.integrations.lm_eval as ext
    from parlai_ext.benchmark import Stopwatch
    from q2_plugins import Q2Scorer
    from q2_plugins.integrations.adapters import config_from_options, shared_scorer
    from q2_plugins.integrations.lm_eval import filter_patch

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    docs = work / "docs.jsonl"
    n_docs = write_documents(Path(args.data), docs, args.n)
    settings = model_settings(args, work)
    config = config_from_options(settings)
    parts = ("candidate_extractor", "question_generator", "question_answerer", "personal_filter", "nli")
    metric_scorer, offline = shared_scorer(config, slot="lm_eval"), Q2Scorer(config)
    for scorer in (metric_scorer, offline):  # models loaded now: loading is not what is measured
        for part in parts:
            getattr(scorer, part)

    in_metric, core_calls = Stopwatch(), Stopwatch()
    filter_patch.prepare_task = in_metric.wrap(filter_patch.prepare_task)
    ConfigurableTask.process_results = in_metric.wrap(ConfigurableTask.process_results)  # type: ignore
    Q2Scorer.score = core_calls.wrap(Q2Scorer.score)  # type: ignore[method-assign]
    tm = ext.task_manager(metadata={"q2": settings, "q2_wow_data": str(docs)})
    lm = gold_lm()

    rows = [json.loads(line) for line in docs.read_text(encoding="utf-8").splitlines()]
    responses, knowledge = [r["response"] for r in rows], [r["knowledge"] for r in rows]  # what GoldLM answers

    def metric_side() -> dict:
        in_metric.seconds = in_metric.cpu_seconds = 0.0
        calls_before = core_calls.calls
        t0 = time.perf_counter()
        out = lm_eval.simple_evaluate(model=lm, tasks=["q2_wow"], task_manager=tm, log_samples=True,
                                      bootstrap_iters=0)
        metric_runs.append((in_metric.seconds, in_metric.cpu_seconds, time.perf_counter() - t0,
                            core_calls.calls - calls_before))
        logged = [(s["q2_details"]["response"], s["q2_details"]["knowledge"]) for s in out["samples"]["q2_wow"]]
        if logged != list(zip(responses, knowledge)):
            raise SystemExit("the logged pairs differ from the documents' (response, knowledge)")
        return out

    def offline_side() -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        result = offline.score(responses=responses, knowledge=knowledge, explain=True)
        offline_runs.append((time.perf_counter() - t0, time.process_time() - c0))
        return result

    metric_runs: list[tuple[float, float, float, int]] = []
    offline_runs: list[tuple[float, float]] = []
    for i in range(args.repeat):  # alternating which side goes first
        if i % 2 == 0:
            out, result = metric_side(), offline_side()
        else:
            result, out = offline_side(), metric_side()

    metric_q2 = out["results"]["q2_wow"]["q2,none"]
    same = math.isclose(metric_q2, result.score, rel_tol=1e-9)
    best_metric, best_offline = min(metric_runs), min(offline_runs)
    summary = {
        "documents": n_docs, "scored_pairs": len(responses), "repeat": args.repeat, "threads": args.threads,
        "lm_eval_run_s": round(best_metric[2], 2), "core_calls_in_metric": best_metric[3],
        "in_metric_s": [round(r[0], 2) for r in metric_runs], "offline_core_s": [round(r[0], 2) for r in offline_runs],
        "ratio": round(best_metric[0] / best_offline[0], 3),
        "cpu_ratio": round(min(r[1] for r in metric_runs) / min(r[1] for r in offline_runs), 3),
        "q2_metric": metric_q2, "q2_offline": result.score, "same_score": same,
        "signature": out["configs"]["q2_wow"]["metadata"]["q2_signature"],
    }
    print(json.dumps(summary, indent=2))
    (work / "bench_lm_eval.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
