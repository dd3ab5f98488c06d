"""What ``--metrics q2`` costs inside ``eval_model``, against scoring the same world logs offline with the core.

    python -m parlai_ext.benchmark --workdir out/parlai-bench             # tiny data and Q² models, built here
    python -m parlai_ext.benchmark --workdir DIR --model-file MF --datapath DP --q2-qg-model ... (real ones)

The default agent is ``repeat_label`` (it answers with the gold response): the metric's cost does not depend on
the agent, and a tiny trained model would say the same few words every time, which Q² dedupes to nothing.

In one process, imports warmed up and the Q² models loaded once up front on both sides, ``--repeat`` times in turn:
``eval_model --metrics q2 --world-logs`` timing what happens inside the metric (collecting, every core call), then a
:class:`Q2Scorer` scoring the logged (response, knowledge) pairs in one call. ``ratio`` compares the fastest of
each (wall time; ``cpu_ratio`` in CPU time of this process): on a machine shared with other jobs the minimum is the
measurement least disturbed by them. ``eval_model`` without Q² runs once, for the end-to-end difference. The run
fails unless the metric and the offline score agree. Other ``--q2-*`` options pass through.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any, Optional

__all__ = ["main", "offline_pairs", "Stopwatch"]


def offline_pairs(world_logs: str, field: str) -> tuple[list[Any], list[Any]]:
    """(responses, knowledge) from ``eval_model --world-logs`` output, as ``--metrics q2`` collected them."""
    from parlai_ext.options import NO_KNOWLEDGE

    responses, knowledge = [], []
    with open(world_logs, encoding="utf-8") as f:
        for line in f:
            for teacher, model in json.loads(line)["dialog"]:
                if teacher.get(field) == NO_KNOWLEDGE or field not in teacher:
                    continue
                responses.append(model.get("text"))
                knowledge.append(teacher[field])
    return responses, knowledge


class Stopwatch:
    """Time spent in the outermost call of the wrapped methods (nested calls are not counted twice)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.calls = 0
        self._depth = 0

    def wrap(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            self.calls += self._depth == 1
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.perf_counter() - t0
                    self.cpu_seconds += time.process_time() - c0

        return timed


def _eval(**kwargs: Any) -> tuple[float, dict[str, Any]]:
    from parlai.scripts.eval_model import EvalModel

    t0 = time.perf_counter()
    report = EvalModel.main(**kwargs)
    return time.perf_counter() - t0, {k: v.value() if hasattr(v, "value") else v for k, v in report.items()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parlai_ext.benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--model-file", help="a ParlAI model file (default: the repeat_label agent)")
    parser.add_argument("--datapath", help="default: a tiny WoW data set written here")
    parser.add_argument("--task", default="wizard_of_wikipedia:Generator")
    parser.add_argument("--episodes", type=int, default=60, help="validation episodes of the tiny data set")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each side, taken in turn")
    args, extra = parser.parse_known_args(argv)
    import parlai_ext

    parlai_ext.enable()
    from parlai.core.params import ParlaiParser

    from parlai_ext.options import config_from_opt, knowledge_field
    from parlai_ext.testing import write_wow_data
    from q2_plugins import Q2Scorer
    from q2_plugins.metric.spacy_parts import load_spacy

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    datapath = args.datapath or str(work / "data")
    if not args.datapath:
        write_wow_data(datapath, n_valid=args.episodes)
    agent = {"model_file": args.model_file, "inference": "beam", "beam_size": 3} if args.model_file else {
        "model": "repeat_label"}
    q2_flags = list(extra)
    if "--q2-qg-model" not in q2_flags:
        from q2_plugins.backends.hf.tiny import build_all

        paths = build_all(work / "q2-models")
        q2_flags += ["--q2-qg-model", str(paths["qg"]), "--q2-qa-model", str(paths["qa"]),
                     "--q2-nli-model", str(paths["nli"]), "--q2-qg-max-length", "64"]
    opt = ParlaiParser(True, True).parse_args(q2_flags)
    config = config_from_opt(opt)
    load_spacy(config.spacy_model)  # warm: imports and spaCy are not what is measured
    common = dict(task=args.task, datapath=datapath, **agent)
    common.update({k: v for k, v in opt.items() if k.startswith("q2_") and v is not None})

    from parlai_ext.metric import Q2TeacherMetrics
    from parlai_ext.options import scorer_for

    in_metric, core_calls = Stopwatch(), Stopwatch()
    for name in ("add_q2_example", "score_pending"):
        setattr(Q2TeacherMetrics, name, in_metric.wrap(getattr(Q2TeacherMetrics, name)))
    Q2Scorer.score = core_calls.wrap(Q2Scorer.score)  # type: ignore[method-assign]
    scorer_for(config)  # the metric's models, loaded now
    offline = Q2Scorer(config)
    for part in ("candidate_extractor", "question_generator", "question_answerer", "personal_filter", "nli"):
        getattr(offline, part)

    plain_s, _ = _eval(**common, world_logs=str(work / "plain.jsonl"))
    metric_runs, offline_runs = [], []
    for _ in range(args.repeat):
        in_metric.seconds = in_metric.cpu_seconds = 0.0
        calls_before = core_calls.calls
        q2_s, report = _eval(**common, metrics="default,q2", world_logs=str(work / "q2.jsonl"))
        metric_runs.append((in_metric.seconds, in_metric.cpu_seconds, q2_s, core_calls.calls - calls_before))
        responses, knowledge = offline_pairs(str(work / "q2.jsonl"), knowledge_field(opt))
        t0, c0 = time.perf_counter(), time.process_time()
        result = offline.score(responses=responses, knowledge=knowledge)
        offline_runs.append((time.perf_counter() - t0, time.process_time() - c0))

    same = math.isclose(report["q2"], result.score, rel_tol=1e-9) or (math.isnan(result.score) and
                                                                        math.isnan(report["q2"]))
    best_metric = min(metric_runs)
    best_offline = min(offline_runs)
    summary = {
        "examples": report["exs"], "scored_pairs": len(responses), "repeat": args.repeat,
        "eval_without_q2_s": round(plain_s, 2), "eval_with_q2_s": round(best_metric[2], 2),
        "difference_s": round(best_metric[2] - plain_s, 2), "core_calls_in_metric": best_metric[3],
        "in_metric_s": [round(r[0], 2) for r in metric_runs], "offline_core_s": [round(r[0], 2) for r in offline_runs],
        "ratio": round(best_metric[0] / best_offline[0], 3),
        "cpu_ratio": round(min(r[1] for r in metric_runs) / min(r[1] for r in offline_runs), 3),
        "q2_metric": report["q2"], "q2_offline": result.score, "same_score": same, "signature": result.signature,
    }
    print(json.dumps(summary, indent=2))
    (work / "benchmark.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if same else 1


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.exit(main())
