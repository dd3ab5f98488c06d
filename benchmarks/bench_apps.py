#!/usr/bin/env python
"""What Q² costs through DeepEval, Ragas and DSPy, against one batched core call on the same rows.

    python benchmarks/bench_apps.py --workdir out/apps-bench                 # tiny Q² models built here
    python benchmarks/bench_apps.py --workdir DIR --qg-model Q2/qg --qa-model Q2/qa --nli-model Q2/nli

Runs in .venv-apps (scripts/setup_apps.sh). The samples are the first ``--n`` recorded Wizard of Wikipedia responses
of the Q² paper (as ``bench_lm_eval.py`` takes them). Each framework scores them as its users call it, each front end
built with its defaults and the model settings: ``deepeval.evaluate`` on ``LLMTestCase`` objects with ``Q2Metric``
(``max_concurrent`` = ``--n``), ``ragas.evaluate`` on an ``EvaluationDataset`` with ``Q2`` (``max_workers`` =
``--n``), and ``dspy.Evaluate`` with ``Q2Reward`` as its metric (``num_threads`` = ``--n``, ``unscored`` = NaN) of a
``Predict`` on DSPy's DummyLM. The time is the runner call's wall time, the framework's own work included; models are
loaded before any timing. Each framework's ``floor`` is the same runner on the same samples with a metric that
returns 1.0 at once: the framework's own cost, beside Q²'s. The other side is one ``Q2Scorer.score`` call on the same
(response, knowledge) pairs (``explain=True``, as the front ends), in a worker thread as theirs are. ``--repeat``
times each, in turn; ``ratio`` compares the fastest of each. The run fails unless every side but the floors gives
the core's scores. Prints the CPU: timings compare only on one machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

FRAMEWORKS = ("deepeval", "ragas", "dspy")


def _deepeval(rows: list[dict], settings: dict) -> tuple[Callable[[], list], Any, Callable[[], list]]:
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, DisplayConfig
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase

    from q2_plugins.integrations.deepeval import Q2Metric

    class Constant(BaseMetric):
        """The floor: a metric that scores every case 1.0 at once."""

        def __init__(self) -> None:
            self.threshold, self.async_mode = 0.5, True

        def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
            self.score, self.success, self.reason = 1.0, True, "constant"
            return 1.0

        async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
            return self.measure(test_case)

        def is_successful(self) -> bool:
            return True

        @property
        def __name__(self) -> str:  # type: ignore[override]
            return "constant"

    cases = [LLMTestCase(name=r["id"], input=r["history"][-1], actual_output=r["response"],
                         retrieval_context=[r["knowledge"]]) for r in rows]
    quiet = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)

    def runner(metric: Any) -> Callable[[], list]:
        def run() -> list:
            out = evaluate(test_cases=cases, metrics=[metric], display_config=quiet,
                           async_config=AsyncConfig(max_concurrent=len(cases)))
            by_id = {t.name: t.metrics_data[0].score for t in out.test_results}
            return [by_id[r["id"]] for r in rows]

        return run

    metric = Q2Metric(**settings)
    return runner(metric), metric.scorer, runner(Constant())


def _ragas(rows: list[dict], settings: dict) -> tuple[Callable[[], list], Any, Callable[[], list]]:
    from dataclasses import dataclass, field

    from ragas import EvaluationDataset, evaluate
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics.base import MetricType, SingleTurnMetric
    from ragas.run_config import RunConfig

    from q2_plugins.integrations.ragas import Q2

    @dataclass
    class Constant(SingleTurnMetric):
        """The floor: a metric that scores every sample 1.0 at once."""

        name: str = "q2"
        _required_columns: dict = field(default_factory=lambda: {MetricType.SINGLE_TURN: {"response"}})

        def init(self, run_config: RunConfig) -> None:
            pass

        async def _single_turn_ascore(self, sample: Any, callbacks: Any) -> float:
            return 1.0

    data = EvaluationDataset(samples=[SingleTurnSample(user_input=r["history"][-1], response=r["response"],
                                                       retrieved_contexts=[r["knowledge"]]) for r in rows])

    def runner(metric: Any) -> Callable[[], list]:
        def run() -> list:
            out = evaluate(data, metrics=[metric], show_progress=False, run_config=RunConfig(max_workers=len(rows)))
            return [None if math.isnan(s["q2"]) else s["q2"] for s in out.scores]

        return run

    metric = Q2(options=settings)
    return runner(metric), metric.scorer, runner(Constant())


def _dspy(rows: list[dict], settings: dict) -> tuple[Callable[[], list], Any, Callable[[], list]]:
    import dspy
    from dspy.utils import DummyLM

    from q2_plugins.integrations.dspy import Q2Reward

    # the DummyLM answers each row with its recorded response, whichever thread asks: by the row's tag
    examples = [dspy.Example(tag=f"<<{i}>>", knowledge=r["knowledge"]).with_inputs("tag", "knowledge")
                for i, r in enumerate(rows)]
    lm = DummyLM({f"<<{i}>>": {"response": r["response"]} for i, r in enumerate(rows)})
    program = dspy.Predict("tag, knowledge -> response")

    def runner(metric: Callable[..., float]) -> Callable[[], list]:
        def run() -> list:
            with dspy.context(lm=lm):
                out = dspy.Evaluate(devset=examples, metric=metric, num_threads=len(rows), display_progress=False)(
                    program)
            return [None if math.isnan(score) else score for _, _, score in out.results]

        return run

    # unscored: NaN, so that an answer Q² cannot score reads as the core's None
    reward = Q2Reward(answer="response", knowledge="knowledge", unscored=math.nan, **settings)
    return runner(reward), reward.scorer, runner(lambda example, prediction, trace=None: 1.0)


def _documents(args: argparse.Namespace) -> tuple[list[dict], Path]:
    """The samples (``bench_lm_eval.write_documents``, written into ``--workdir``) and the folder; torch's threads set
    first when ``--threads`` asks."""
    from bench_lm_eval import write_documents

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    docs = Path(args.workdir) / "docs.jsonl"
    write_documents(Path(args.data), docs, args.n)
    return [json.loads(line) for line in docs.read_text(encoding="utf-8").splitlines()], Path(args.workdir)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated: " + ", ".join(FRAMEWORKS))
    for flag, kind, default, what in (("--n", int, 64, "samples (recorded responses)"),
                                      ("--repeat", int, 3, "measurements of each side, taken in turn"),
                                      ("--qg-max-length", int, 64, "QG's question length cap"),
                                      ("--threads", int, None, "torch threads (default: torch's)")):
        ap.add_argument(flag, type=kind, default=default, help=what)
    for role in ("qg", "qa", "nli"):
        ap.add_argument(f"--{role}-model", help=f"the {role.upper()} model (default: tiny ones built in --workdir)")
    args = ap.parse_args(argv)
    from bench_lm_eval import model_settings
    from machine import cpu_name

    from q2_plugins.integrations.chat import ChatScorer

    rows, work = _documents(args)
    n = len(rows)
    os.chdir(work)  # the frameworks' run folders go here
    settings = model_settings(args, work)
    core = ChatScorer(**settings).scorer  # the scorer every front end's settings share (one per slot)
    for part in ("candidate_extractor", "question_generator", "question_answerer", "personal_filter", "nli"):
        getattr(core, part)  # models loaded now: loading is not what is measured

    def offline() -> list:
        with ThreadPoolExecutor(max_workers=1) as worker:  # in a worker thread, as every front end's core call
            res = worker.submit(core.score, responses=[r["response"] for r in rows],
                                knowledge=[r["knowledge"] for r in rows], explain=True).result()
        return [x.score for x in res.responses]

    makers = {"deepeval": _deepeval, "ragas": _ragas, "dspy": _dspy}
    made = {f: makers[f](rows, settings) for f in args.frameworks.split(",")}
    sides = {"offline": offline}
    for f, (run, _, floor) in made.items():
        sides.update({f: run, f"{f} floor": floor})
    chats = {f: chat for f, (_, chat, _) in made.items()}
    expected = offline()
    for name, side in sides.items():  # warm-up: each framework's imports and first run; and the scores agree
        got = side()
        if name.endswith(" floor"):
            continue
        if not all((a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9))
                   for a, b in zip(got, expected)) or len(got) != len(expected):
            raise SystemExit(f"bench_apps: {name}'s scores differ from the core's on the same pairs")
    timings: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(args.repeat):
        for name in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            calls = chats[name].calls if name in chats else 0
            start = time.perf_counter()
            sides[name]()
            timings[name].append(time.perf_counter() - start)
            timings.setdefault(f"{name} calls", []).append((chats[name].calls if name in chats else 0) - calls)
    best = {name: min(timings[name]) for name in sides}
    print(f"cpu            {cpu_name()}")
    print(f"samples        {n}  ({'given' if args.qg_model else 'tiny random-weight'} models; each front end with "
          f"its default window; floor: the same runner with a metric that returns 1.0 at once)")
    for name in sides:
        calls = f"  {timings[f'{name} calls'][-1]} core calls" if name in chats else ""
        print(f"{name:<14} {best[name]:.3f}s  {best[name] / best['offline']:.2f}x  (fastest of {args.repeat}: "
              + ", ".join(f"{t:.3f}" for t in timings[name]) + f"){calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
