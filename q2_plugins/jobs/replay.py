"""``q2 replay``: the original pipeline's recorded per-question outputs (``*_out.steps.csv``) scored again by the
package's rules (:mod:`q2_plugins.replay`), written as result rows with their ``.meta.json`` and an optional HTML
report."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .. import metric_names as M
from ..errors import SettingError
from ..results import print_summary

__all__ = ["ReplayJob", "run_replay"]

# a replay has no Q2 with NLI, hence no interval of it (its interval is q2 compare's, on Q2 w/o NLI)
_NO_Q2 = {m.key: None for m in (M.Q2, M.Q2_STDERR, M.Q2_CI_LOW, M.Q2_CI_HIGH)}
_REPLAY_NOTE = ("Q2 n/a: the recorded steps carry no NLI labels, so the replay gives only Q2 w/o NLI (token F1; "
                "responses without questions take their recorded fallback value)")


@dataclass(frozen=True)
class ReplayJob:
    """One replay: the ``steps`` files (with, optionally, one ``scores`` file each: recorded fallback values for
    responses without questions), written to ``output`` (JSONL) and / or an ``html`` report (which implies
    ``explain``)."""

    steps: list[str]
    scores: list[str] = field(default_factory=list)
    output: Optional[str] = None
    html: Optional[str] = None
    explain: bool = False
    normalization: str = "q2-original"
    discard_unanswerable: bool = False
    summary_format: str = "text"


def run_replay(job: ReplayJob) -> int:
    """Check every path the job writes, replay the steps, write the rows, print the summary; returns the exit code."""
    from ..io import check_outputs, check_writable, files_written, html_files
    from ..replay import load_original_steps, replay
    from .local import write_report

    if job.scores and len(job.scores) != len(job.steps):
        raise SettingError("scores", "give one scores file per steps file, in the same order")
    written = [(setting, path) for setting, path in (("output", job.output), ("html", job.html)) if path]
    check_outputs([*job.steps, *job.scores], [(setting, path, (files_written if setting == "output" else
                                                                    html_files)(path)) for setting, path in written])
    for setting, path in written:
        check_writable(path, setting)  # an output file's folder must exist (as for every output flag)
    records = []
    sources: list[str] = []
    for i, steps in enumerate(job.steps):
        fallback = None
        if job.scores:
            with open(job.scores[i], newline="", encoding="utf-8") as f:
                fallback = {row["id"]: float(row["Q2_no_nli"]) for row in csv.DictReader(f)}
        loaded = load_original_steps(steps, fallback)
        records.extend(loaded)
        sources.extend([Path(steps).name.removesuffix("_out.steps.csv")] * len(loaded))
    result = replay(records, normalization=job.normalization, explain=job.explain or bool(job.html),
                    discard_unanswerable=job.discard_unanswerable)
    explain = job.explain or bool(job.html)
    rows = [_replay_row(i, rec, res, src, result.signature, explain)
            for i, (rec, res, src) in enumerate(zip(records, result.responses, sources))]
    # the recorded steps carry no NLI labels: the replayed mean is Q2 w/o NLI, never to be printed as Q2
    summary = {**result.stats.summary(), **_NO_Q2, "note": _REPLAY_NOTE}
    if job.output:
        from ..rows import write_meta

        with open(job.output, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        write_meta(job.output, engine="replay", signature=result.signature, summary=summary, rows=len(rows),
                   config={"use_nli": False, "normalization": job.normalization,
                           "discard_unanswerable": job.discard_unanswerable},
                   input=list(job.steps) + list(job.scores), spec=None, exit_code=0)
    print_summary(summary, result.signature, job.summary_format)
    if job.summary_format == "text":
        print(f"note          {_REPLAY_NOTE}")
    if job.html:
        write_report(job.html, rows, result.signature, summary, list(job.steps))
    return 0


def _replay_row(position: int, rec: Any, res: Any, source: str, signature: Any, explain: bool) -> dict[str, Any]:
    """One replay output row (:func:`~q2_plugins.rows.result_row`): its position, the response's id, source file and
    texts, its result and the signature. The original run's files are named by gold label (``<system>_consistent``
    / ``<system>_inconsistent``); such a name sets ``gold``."""
    from ..rows import result_row

    gold = next((g for g in ("inconsistent", "consistent") if source.endswith("_" + g)), None)
    return result_row(position, {"id": rec.id, "source": source, **({"gold": gold} if gold else {}),
                                 "response": rec.response, "knowledge": rec.knowledge}, res, explain,
                      signature=signature)
