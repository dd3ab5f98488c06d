"""``q2 score --engine ray`` when things go wrong (tiny models, a local two-CPU Ray instance started once for the
module): a batch whose scoring raises is tried once more, then its rows are error rows naming the cause in one plain
line and the run goes on; a run stopped part-way keeps the rows of the blocks written so far (one JSONL output: in
its ``.partial`` file; every other output: staged in the folder ``OUTPUT.partial/``), and ``--resume`` scores only the
rest, with the local engine's checks, and writes what an uninterrupted run writes; no whole run is lost: a column whose
type changes between blocks (string ids, then integer ids) is scored like any other, and a batch that kills its
worker process (a segfault, the out-of-memory killer) ends as error rows of its own, the other rows scored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

from q2_plugins.cli import main  # noqa: E402
from q2_plugins.jobs.ray import engine  # noqa: E402
from q2_plugins.jobs.ray.dataset import Q2BatchScorer  # noqa: E402

GOOD = {"response": "paris is in france .", "knowledge": "Paris is the capital of France."}

pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance for the module


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


def stop_at_the_third_block(monkeypatch) -> list[int]:
    """Make the engine stop (as on Ctrl-C) when its third finished block is to be written; returns the row counts of
    the blocks it was given (the first two written). ``monkeypatch.undo()`` or a new setattr puts the writer back."""
    real, calls = engine._write_batch, []

    def stops(sink, batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(sink, batch)

    monkeypatch.setattr(engine, "_write_batch", stops)
    return calls


def test_a_stopped_ray_run_keeps_its_rows_and_the_resume_scores_only_the_rest(tmp_path, capsys, flags, monkeypatch):
    rows = [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(20)]
    src = write(tmp_path / "in.jsonl", rows)
    out, partial = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial"
    argv = ["score", "--input", str(src), "--output", str(out), *flags]
    real, calls = engine._write_batch, stop_at_the_third_block(monkeypatch)
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


# -- every other output: the scored blocks staged in OUTPUT.partial/ as they finish ------------------------------
def test_a_link_swapped_in_while_a_resumed_ray_run_loads_its_models_is_never_written_through(tmp_path, capsys, flags,
                                                                                              monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n" * 50)
    src = write(tmp_path / "in.jsonl", [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(20)])
    out, partial = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial"
    argv = ["score", "--input", str(src), "--output", str(out), *flags]
    real = engine._write_batch
    stop_at_the_third_block(monkeypatch)
    assert main(argv) == 130
    monkeypatch.setattr(engine, "_write_batch", real)
    real_scoring = engine._scoring

    def swapped_while_loading(*args, **kwargs):  # the checks are done; the models load from here on
        partial.unlink()
        partial.symlink_to(victim)
        return real_scoring(*args, **kwargs)

    monkeypatch.setattr(engine, "_scoring", swapped_while_loading)
    capsys.readouterr()
    code = main(argv + ["--resume"])
    assert victim.read_text() == "precious\n" * 50 and partial.is_symlink() and not out.exists()
    line = capsys.readouterr().err.splitlines()[-1]
    assert code == 2 and str(partial) in line and "replaced" in line, (code, line)


def results(path: Path) -> list:
    """The rows of a result file or folder, as written: Parquet as values, CSV / TSV / JSONL as their text lines (the
    header too); a folder's part files in order."""
    import pyarrow.parquet as pq

    if path.is_dir():
        parts = sorted(path.iterdir())
        assert parts and all(p.name.startswith("part-") for p in parts), parts
        return [row for p in parts for row in results(p)]
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return path.read_text(encoding="utf-8").splitlines()


#: name -> (the output, extra flags, the result paths of the run)
STAGED = {
    "parquet": ("out.parquet", [], ["out.parquet"]),
    "csv": ("out.csv", [], ["out.csv"]),
    "folder": ("out", [], ["out"]),
    "filter": ("kept.tsv", ["--keep-min-score", "0.3"], ["kept.tsv", "kept.dropped.tsv"]),
}


@pytest.mark.parametrize("case", list(STAGED))
def test_a_stopped_ray_run_of_any_output_keeps_its_blocks_and_the_resume_equals_an_uninterrupted_run(
        case, tmp_path, capsys, flags, monkeypatch):
    """Parquet / CSV single files, a folder of part files (in the input's format) and filter mode: stopped at its
    third block, the run keeps the first two in OUTPUT.partial/ and says so; --resume scores only the rest (another
    input refused) and writes exactly what an uninterrupted run writes, each output with its sidecar."""
    name, extra, written = STAGED[case]
    rows = [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(20)]
    for i in (3, 9, 14):
        rows[i]["response"] = ""  # (unscored rows: filter mode drops them)
    src = write(tmp_path / "in.jsonl", rows)
    out, staged = tmp_path / name, tmp_path / f"{name}.partial"
    argv = ["score", "--input", str(src), "--output", str(out), *extra, *flags]
    real, calls = engine._write_batch, stop_at_the_third_block(monkeypatch)
    assert main(argv) == 130
    kept = sum(calls[:2])
    err = capsys.readouterr().err.strip()
    assert f"interrupted: {kept} rows committed to {staged}, {out} left as it was; to continue: " in err, err
    assert "--resume" in err and len(err.splitlines()) == 1, err
    assert staged.is_dir() and sorted(p.name for p in staged.iterdir()) == ["block-000000.arrow", "block-000001.arrow"]
    assert not any((tmp_path / w).exists() for w in written)
    other = write(tmp_path / "other.jsonl", rows[:5])
    assert main(["score", "--input", str(other), "--output", str(out), *extra, "--resume", *flags]) == 2
    assert "holds rows of" in capsys.readouterr().err
    monkeypatch.setattr(engine, "_write_batch", real)
    monkeypatch.setattr(engine, "Q2BatchScorer", logged(tmp_path))
    assert main(argv + ["--resume"]) == 0
    assert f"resuming {staged} after its {kept} committed rows" in capsys.readouterr().err
    scored = [r for line in (tmp_path / "scored.log").read_text().splitlines() for r in json.loads(line)]
    assert sorted(scored) == sorted(r["response"] for r in rows[kept:])  # only the rest was scored
    assert not staged.exists() and not (tmp_path / f"{name}.resume.json").exists()
    monkeypatch.setattr(engine, "Q2BatchScorer", Q2BatchScorer)
    once = tmp_path / "once"
    once.mkdir()
    assert main(["score", "--input", str(src), "--output", str(once / name), *extra, *flags]) == 0
    capsys.readouterr()
    total = 0
    for w in written:
        got, want = results(tmp_path / w), results(once / w)
        assert got == want and got, w
        meta, want_meta = (json.loads(Path(f"{d / w}.meta.json").read_text()) for d in (tmp_path, once))
        assert meta["resumed_after"] == kept and "resumed_after" not in want_meta
        figures = [{k: v for k, v in (m.get("filter") or {}).items() if not k.endswith("_output")}
                   for m in (meta, want_meta)]
        assert (meta["rows"], figures[0], meta["summary"]) == (want_meta["rows"], figures[1], want_meta["summary"])
        total += meta["rows"]
    assert total == 20  # (filter mode: each row in exactly one of the two outputs)
    if case == "filter":
        assert json.loads(Path(f"{out}.meta.json").read_text())["filter"]["dropped"] >= 3


def test_a_stopped_ray_run_from_parquet_files_keeps_its_blocks_and_says_it_cannot_resume(tmp_path, capsys, flags,
                                                                                       monkeypatch):
    """A folder of Parquet files (one block each) has no record positions to continue after: the stop line says
    where the rows are and that the run cannot be resumed, and --resume is refused before any work."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "in"
    src.mkdir()
    for part in range(4):
        pq.write_table(pa.Table.from_pylist([dict(GOOD, id=part * 4 + i) for i in range(4)]), src / f"{part}.parquet")
    out = tmp_path / "out.parquet"
    calls = stop_at_the_third_block(monkeypatch)
    assert main(["score", "--input", str(src), "--output", str(out), *flags]) == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"q2 score: interrupted: {sum(calls[:2])} rows committed to {out}.partial, {out} left as it was; "
                   f"this run cannot be resumed ({src} is no JSONL / CSV / TSV file: score again)")
    assert main(["score", "--input", str(src), "--output", str(out), "--resume", *flags]) == 2
    assert "the ray engine resumes a run from one JSONL / CSV / TSV input file" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["file", "folder"])
def test_a_link_planted_at_the_staging_folder_is_refused_and_its_target_left_alone(target, tmp_path, capsys, flags):
    src = write(tmp_path / "in.jsonl", [GOOD])
    victim = tmp_path / "victim"
    if target == "file":
        victim.write_text("precious\n")
    else:
        victim.mkdir()
        (victim / "keep.txt").write_text("precious\n")
    out = tmp_path / "out.parquet"
    Path(f"{out}.partial").symlink_to(victim)
    for resume in ([], ["--resume"]):
        assert main(["score", "--input", str(src), "--output", str(out), *flags, *resume]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"q2 score: error: --output: refusing to write {out}.partial: it is a link (to "), err
        assert len(err.splitlines()) == 1
    if target == "file":
        assert victim.read_text() == "precious\n"
    else:
        assert [p.name for p in victim.iterdir()] == ["keep.txt"] and (victim / "keep.txt").read_text() == "precious\n"
    assert not out.exists() and Path(f"{out}.partial").is_symlink()


# -- no whole run lost: ids that change type between blocks, a batch that kills its worker ----------------------
def parquet_rows(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


@pytest.mark.parametrize("output", ["out.parquet"])  # (staged blocks of both types, one file written from them)
def test_ids_that_change_type_between_blocks_are_all_scored(tmp_path, capsys, flags, output):
    # (blocks of 20 rows: the second holds both types, the third integers alone)
    rows = [dict(GOOD, id=f"a{i}" if i < 30 else i, response=f"paris is in france {i} .") for i in range(80)]
    src = write(tmp_path / "in.jsonl", rows)
    out = tmp_path / output
    assert main(["score", "--input", str(src), "--output", str(out), *flags, "--ray-batch-size", "20"]) == 0, \
        capsys.readouterr().err
    got = parquet_rows(out)
    assert len(got) == 80 and all(r["status"] != "error" for r in got), [r.get("error") for r in got]
    assert [str(r["id"]) for r in got] == [str(r["id"]) for r in rows]


class Kills(Q2BatchScorer):
    """Ends its worker process at once (as a segfault or the out-of-memory killer does) when a batch holds a
    response with ``KILL``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        real = self.scorer.score

        def score(**kw):
            if any(isinstance(r, str) and "KILL" in r for r in kw["responses"]):
                os._exit(1)
            return real(**kw)

        self.scorer.score = score


@pytest.mark.parametrize("output", ["out.jsonl", "out.parquet"])  # (rows written as blocks come; staged blocks)
def test_a_batch_that_kills_its_worker_is_error_rows_and_the_rest_are_scored(tmp_path, capsys, flags, monkeypatch,
                                                                             output):
    rows = [dict(GOOD, id=i, response=f"paris is in france {i} .") for i in range(16)]
    rows[6]["response"] = "KILL paris"
    rows[15]["response"] = "KILL paris too"  # (the last block: lost after every block that came back)
    src = write(tmp_path / "in.jsonl", rows)
    out = tmp_path / output
    monkeypatch.setattr(engine, "Q2BatchScorer", Kills)
    code = main(["score", "--input", str(src), "--output", str(out), *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    got = read(out) if output.endswith(".jsonl") else parquet_rows(out)
    assert [r["id"] for r in got] == list(range(16))  # every row, once, in order
    lost = [r for r in got if r["status"] == "error"]
    # the killers' batches, and at most a batch that waited on their workers at each try (seen under load): whole
    # batches of 4 rows, never every row
    assert got[6] in lost and got[15] in lost and len(lost) % 4 == 0 and len(lost) <= 12, lost
    assert all("worker" in r["error"] for r in lost), lost
    assert all(r["score"] is not None for r in got if r not in lost)
    assert len(err.splitlines()) <= 2, err  # no pages of Ray traceback
