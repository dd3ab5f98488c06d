"""``q2 score --engine ray`` when things go wrong (tiny models, a local two-CPU Ray instance started once for the
module): a batch whose scoring raises is tried once more, then its rows are error rows naming the cause in one plain
line and the run goes on; a run stopped part-way keeps the rows of the blocks written so far, and ``--resume``
scores only the rest, with the local engine's checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

import ray  # noqa: E402

from q2_plugins.cli import main  # noqa: E402
from q2_plugins.jobs.ray import engine  # noqa: E402
from q2_plugins.jobs.ray.dataset import Q2BatchScorer  # noqa: E402

GOOD = {"response": "paris is in france .", "knowledge": "Paris is the capital of France."}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the scorer subclasses below, in the workers
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def flags(tiny_models) -> list[str]:
    return ["--engine", "ray", "--ray-batch-size", "4", "--qg-model", str(tiny_models["qg_short"]), "--qa-model",
            str(tiny_models["qa"]), "--nli-model", str(tiny_models["nli"]), "--qg-max-length", "4", "--no-progress"]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class Logged(Q2BatchScorer):
    """Writes the positions of every batch it is given to scoring (one line per attempt) to ``LOG``; a batch holding
    a response with ``BOOM`` raises an error wrapped in terminal colour codes, as Ray forwards them."""

    LOG = ""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        real = self.scorer.score

        def score(**kw):
            responses = kw["responses"]
            with open(self.LOG, "a", encoding="utf-8") as f:
                f.write(json.dumps([r for r in responses]) + "\n")
            if any(isinstance(r, str) and "BOOM" in r for r in responses):
                raise RuntimeError("\x1b[31mboom\x1b[0m: the batch cannot be scored\n  a second line")
            return real(**kw)

        self.scorer.score = score


def logged(tmp_path: Path) -> type:
    return type("LoggedHere", (Logged,), {"LOG": str(tmp_path / "scored.log")})


def test_a_batch_that_raises_is_retried_once_then_its_rows_are_error_rows(tmp_path, capsys, flags, monkeypatch):
    rows = [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(12)]
    rows[5]["response"] = "BOOM paris"
    src = write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    monkeypatch.setattr(engine, "Q2BatchScorer", logged(tmp_path))
    assert main(["score", "--input", str(src), "--output", str(out), *flags]) == 0
    got = read(out)
    assert [r["id"] for r in got] == list(range(12))  # every row, once, in order
    failed = [r for r in got if r["status"] == "error"]
    assert got[5] in failed and 1 <= len(failed) <= 4  # only the rows of its batch
    for r in failed:
        assert r["error"] == f"its batch of {len(failed)} rows failed twice: RuntimeError: boom: the batch cannot " \
                             f"be scored", r
    assert all(r["score"] is not None for r in got if r not in failed)
    attempts = [json.loads(line) for line in (tmp_path / "scored.log").read_text().splitlines()]
    assert sum("BOOM paris" in a for a in attempts) == 2  # tried once more, then given up
    summary = capsys.readouterr().out
    assert "\x1b" not in summary and f"{len(failed)} x  its batch of" in summary


def test_a_stopped_ray_run_keeps_its_rows_and_the_resume_scores_only_the_rest(tmp_path, capsys, flags, monkeypatch):
    rows = [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(20)]
    src = write(tmp_path / "in.jsonl", rows)
    out, partial = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial"
    argv = ["score", "--input", str(src), "--output", str(out), *flags]
    real, calls = engine._write_batch, []

    def stops_at_the_third_block(target, batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(target, batch)

    monkeypatch.setattr(engine, "_write_batch", stops_at_the_third_block)
    assert main(argv) == 130
    kept = sum(calls[:2])
    err = capsys.readouterr().err.strip()
    assert f"interrupted: {kept} rows committed to {partial}" in err and "--resume" in err, err
    assert [r["id"] for r in read(partial)] == list(range(kept))
    assert not out.exists()
    # another input is refused, as the local engine refuses it
    other = write(tmp_path / "other.jsonl", rows[:5])
    assert main(["score", "--input", str(other), "--output", str(out), "--resume", *flags]) == 2
    assert "holds rows of" in capsys.readouterr().err
    monkeypatch.setattr(engine, "_write_batch", real)
    monkeypatch.setattr(engine, "Q2BatchScorer", logged(tmp_path))
    assert main(argv + ["--resume"]) == 0
    scored = [r for line in (tmp_path / "scored.log").read_text().splitlines() for r in json.loads(line)]
    assert sorted(scored) == sorted(r["response"] for r in rows[kept:])  # only the rest was scored
    got = read(out)
    assert [r["id"] for r in got] == list(range(20)) and [r["row"] for r in got] == list(range(20))
    assert json.loads((tmp_path / "out.jsonl.meta.json").read_text())["resumed_after"] == kept
    once = tmp_path / "once.jsonl"
    monkeypatch.setattr(engine, "Q2BatchScorer", Q2BatchScorer)
    assert main(["score", "--input", str(src), "--output", str(once), *flags]) == 0
    fields = ("id", "row", "status", "score", "score_no_nli", "num_questions", "error")
    assert [{f: r[f] for f in fields} for r in read(once)] == [{f: r[f] for f in fields} for r in got]
