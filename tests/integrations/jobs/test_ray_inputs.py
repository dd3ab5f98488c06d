"""``q2 score --engine ray`` on inputs the core tolerates (malformed JSONL and CSV records become per-row errors), its
output while the actors load the models, and two actors sharing one ``--cache-dir``: one local Ray instance for the
module, started with the workers' output forwarded to the driver (as a user's own ``ray.init()`` does)."""

from __future__ import annotations

import csv
import json
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

import pyarrow as pa  # noqa: E402
import ray  # noqa: E402

from q2_plugins import Q2Config, Q2Scorer  # noqa: E402
from q2_plugins.cli import main  # noqa: E402
from q2_plugins.jobs.ray.dataset import Q2BatchScorer, score_dataset  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
Q2_FIELDS = ("score", "score_no_nli", "status", "num_questions", "error")


pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance for the module
RAY_LOG_TO_DRIVER = True


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def flags(tiny_models) -> list[str]:
    return ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
            "--nli-model", str(tiny_models["nli"]), "--qg-max-length", "12", "--engine", "ray",
            "--concurrency", "2", "--ray-batch-size", "2"]


def core_results(config: Q2Config, rows: list[dict]) -> list[dict]:
    result = Q2Scorer(config).score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows])
    return [{f: getattr(r, f) for f in Q2_FIELDS} for r in result.responses]


def test_malformed_jsonl_records_are_row_errors(tiny_models, tiny_config, sample, tmp_path, capsys):
    good = sample[:6]
    lines = [json.dumps(r).encode() for r in good]
    lines[1:1] = [b'{"response": "cut short", ']  # line 2: not JSON
    lines[3:3] = [b'{"response": "caf\xe9", "knowledge": "bad byte"}', b""]  # line 4: not UTF-8; line 5: empty
    lines[6:6] = [b'["a list"]', json.dumps({"response": "no knowledge"}).encode()]  # lines 7, 8
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # a BOM, as the core tolerates
    out = tmp_path / "out.jsonl"
    assert main(["score", *flags(tiny_models), "--no-progress", "--format", "json", "--input", str(src),
                 "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["n"], summary["n_errors"]) == (10, 4)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == len(lines) - 1  # one row per record, in input order; the empty line is no record
    errors = {i: r["error"] for i, r in enumerate(rows) if r["status"] == "error"}
    assert list(errors) == [1, 3, 5, 6]
    assert errors[1].startswith("line 2 is not valid JSON")
    assert errors[3].startswith("line 4 is not valid UTF-8: byte 0xe9")
    assert errors[5] == "line 7 is a JSON list, expected an object"
    assert errors[6].startswith("no field(s) ['knowledge']") and rows[6]["response"] == "no knowledge"
    scored = [r for i, r in enumerate(rows) if i not in errors]
    assert [r["id"] for r in scored] == [r["id"] for r in good]  # the good rows with their columns
    assert all({k: r[k] for k in g} == g for r, g in zip(scored, good))
    assert [{f: r[f] for f in Q2_FIELDS} for r in scored] == core_results(tiny_config, good)
    # the row errors by kind, as the single-process run counts them, on the command line and in the sidecar
    local_out = tmp_path / "local.jsonl"
    local_flags = flags(tiny_models)[:flags(tiny_models).index("--engine")]
    main(["score", *local_flags, "--no-progress", "--format", "json", "--input", str(src), "--output", str(local_out)])
    local = json.loads(capsys.readouterr().out)
    meta = json.loads((tmp_path / "out.jsonl.meta.json").read_text())["summary"]
    for got in (summary, meta):
        assert got["n_error_kinds"] == local["n_error_kinds"] == 4
        assert sorted(map(str, got["errors"])) == sorted(map(str, local["errors"]))


def test_csv_with_bom_huge_field_and_bad_rows(tiny_models, tiny_config, sample, tmp_path):
    good = [{"id": r["id"], "response": r["response"], "knowledge": r["knowledge"]} for r in sample[:3]]
    good[1]["knowledge"] += " " + "x" * 3_000_000  # bigger than Arrow's CSV blocks
    src = tmp_path / "in.csv"
    with src.open("w", newline="", encoding="utf-8-sig") as f:  # utf-8-sig: a BOM before the header
        writer = csv.writer(f)
        writer.writerow(["id", "response", "knowledge"])
        writer.writerow(good[0].values())
        writer.writerow(["too", "many", "fields", "here"])
        writer.writerows(r.values() for r in good[1:])
    src.write_bytes(src.read_bytes() + b"bad,caf\xe9,x\r\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", *flags(tiny_models), "--no-progress", "--input", str(src), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("id") for r in rows] == [good[0]["id"], None, good[1]["id"], good[2]["id"], None]
    assert rows[1]["error"] == "line 3 has 4 fields; the header names 3"
    assert rows[4]["error"] == "line 6 is not valid UTF-8: byte 0xe9"
    scored = [rows[i] for i in (0, 2, 3)]
    assert [r["knowledge"] for r in scored] == [r["knowledge"] for r in good]
    assert [{f: r[f] for f in Q2_FIELDS} for r in scored] == core_results(tiny_config, good)


def forwarded_output(capfd) -> str:
    """Standard error so far, once what the workers printed before now has reached the driver: a task prints a
    marker after them, and the driver's output is read until it shows."""
    marker = f"q2-test-marker-{uuid.uuid4()}"
    ray.get(ray.remote(num_cpus=0)(lambda: print(marker, file=sys.stderr, flush=True)).remote())
    seen = ""
    for _ in range(1200):
        seen += capfd.readouterr().err
        if marker in seen:
            return seen
        time.sleep(0.05)
    pytest.fail("the workers' output did not reach the driver")


def test_actors_load_models_quietly_one_line_per_run(tiny_models, sample, tmp_path, capfd):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in sample[:4]))
    args = ["score", *flags(tiny_models), "--input", str(src), "--output", str(tmp_path / "o.jsonl")]
    assert main(args) == 0
    err = forwarded_output(capfd)
    assert err.count("loading models") == 1
    assert "Loading weights" not in err  # the model library's per-file bars, once per actor without the fix
    assert main(args + ["--no-progress"]) == 0
    assert "loading models" not in forwarded_output(capfd)


class WithPid(Q2BatchScorer):
    """Adds the scoring process's id to each row; starts scoring once ``actors`` actors have loaded their models
    (files in the directory ``ready``), so that they score at the same time."""

    ready: str = ""
    actors: int = 2

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Path(self.ready, str(os.getpid())).touch()
        for _ in range(6000):
            if len(os.listdir(self.ready)) >= self.actors:
                break
            time.sleep(0.05)

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = super().__call__(batch)
        return out.append_column("pid", pa.array([os.getpid()] * out.num_rows))


def test_two_actors_share_one_cache_dir(tiny_config, sample, tmp_path):
    cfg = tiny_config.replace(cache_dir=str(tmp_path / "cache"))
    rows = [{**r, "uid": i} for i, r in enumerate(sample)]
    overlapping = rows + rows[::-1]  # every row twice, in blocks that go to both actors
    ds = ray.data.from_items(overlapping, override_num_blocks=len(overlapping) // 2)
    WithPid.ready = str(tmp_path / "ready")
    os.mkdir(WithPid.ready)
    out = score_dataset(ds, cfg, concurrency=2, batch_size=2, scorer_class=WithPid).take_all()
    assert len({r["pid"] for r in out}) == 2  # both actors wrote to the one cache
    reference = core_results(tiny_config, rows)  # no cache
    for r in out:
        assert {f: r[f] for f in Q2_FIELDS} == reference[r["uid"]]
    third = Q2Scorer(cfg)
    result = third.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows])
    assert third.cache.misses == 0 and third.cache.hits > 0  # everything the two actors computed is there
    assert [{f: getattr(r, f) for f in Q2_FIELDS} for r in result.responses] == reference


def test_rescoring_an_output_keeps_every_field_and_the_writers_keep_every_column(tiny_models, sample, tmp_path,
                                                                                  capsys):
    """Issue cases 4, 5 and -1e999: records with fields named like result fields (an output scored again) keep them
    as ``input_*``; Parquet and CSV outputs hold columns the first block lacks; a number stays a number; the
    sidecar has the local engine's keys."""
    import pyarrow.parquet as pq

    from tests.pipeline.jobs.test_no_data_lost import META_KEYS

    good = sample[:3]
    records = [dict(good[0], score=0.25), dict(good[1], extra=7, status="old", input_status="older"),
               {"id": "inf", "response": float("-inf"), "knowledge": "k"}]
    src = tmp_path / "again.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records).replace("-Infinity", "-1e999"))
    run_flags = [*flags(tiny_models)[:-1], "1", "--no-progress", "--format", "json", "--input", str(src)]
    for out in (tmp_path / "out.parquet", tmp_path / "out.csv"):
        assert main(["score", *run_flags, "--output", str(out)]) == 0
        rows = pq.read_table(out).to_pylist() if out.suffix == ".parquet" else list(csv.DictReader(out.open()))
        assert len(rows) == 3
        assert str(rows[0]["input_score"]) == "0.25" and rows[0]["status"] != "old"
        assert (str(rows[1]["extra"]), rows[1]["input_status"], rows[1]["input_input_status"]) == (
            "7", "old", "older")
        assert rows[2]["error"] == "response must be a string, got float"
        assert list(rows[0])[:2] == ["row", "id"] and [r["row"] for r in rows] in ([0, 1, 2], ["0", "1", "2"])
        meta = json.loads(Path(f"{out}.meta.json").read_text())
        assert META_KEYS <= set(meta) and (meta["engine"], meta["rows"], meta["exit_code"]) == ("ray", 3, 0)
    capsys.readouterr()


def test_the_result_columns_are_the_local_rows_fields():
    """Every result column of a Ray row holds the local engine's value (``rows.result_fields``); the explanations
    as JSON text."""
    from q2_plugins.io.rows import result_fields
    from q2_plugins.jobs.ray.dataset import EXPLANATION_COLUMNS, OUTPUT_COLUMNS, _result_columns
    from q2_plugins.metric.results import ResponseResult, ResponseStatus

    results = [ResponseResult(index=0, status=ResponseStatus.SCORED, score=0.5, score_no_nli=0.25, num_questions=2,
                              label="generic", label3="neutral", warning="truncated to 8 tokens", questions=[]),
               ResponseResult(index=1, status=ResponseStatus.ERROR, error="no field(s) ['response']")]
    columns = _result_columns(results, explain=True)
    assert list(columns) == [*OUTPUT_COLUMNS, *EXPLANATION_COLUMNS]
    for i, res in enumerate(results):
        row = result_fields(res, explain=True)
        assert {name: values[i] if name in OUTPUT_COLUMNS else values[i] and json.loads(values[i])
                for name, (_, values) in columns.items()} == row


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_no_input_name_crashes_a_run_or_drops_a_field(tiny_models, tmp_path, kind):
    """Every name of the readers, the engines and the row layout as an input field: the Ray rows keep them all (those
    named like ours under input_<name>), as the local engine's rows do."""
    from tests.pipeline.jobs.test_long_runs import every_name

    extra = {k: v if isinstance(v, str) else json.dumps(v) for k, v in every_name().items()}
    rows = [{"id": f"r{i}", "response": "paris is in france .", "knowledge": "Paris is in France.", **extra}
            for i in range(3)]
    src = tmp_path / f"in.{kind}"
    if kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), src)
    elif kind == "csv":
        with src.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    else:
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    # (two actors hold both CPUs of this module's cluster: a read task that needs a CPU would wait for ever)
    assert main(["score", *flags(tiny_models), "--no-progress", "--input", str(src), "--output", str(out)]) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in got] == ["r0", "r1", "r2"]
    for r in got:
        assert r["status"] != "error" and r["error"] is None, r
        assert set(extra.values()) <= {v for k, v in r.items() if k not in ("row", "status", "score", "error")}
    if kind != "parquet":  # the local engine writes the same field names
        local_out = tmp_path / "local.jsonl"
        local_flags = flags(tiny_models)[:flags(tiny_models).index("--engine")]
        assert main(["score", *local_flags, "--no-progress", "--input", str(src), "--output", str(local_out)]) == 0
        local = [json.loads(line) for line in local_out.read_text().splitlines()]
        assert [sorted(r) for r in local] == [sorted(r) for r in got]


def test_a_stopped_ray_run_says_in_one_line_what_it_kept(tiny_models, tmp_path):
    """SIGTERM while the actors score: our one line (no stack dump of Ray's) with the rows kept in the .partial (the
    blocks written so far) and the command that resumes, exit 143 (the resume itself: test_ray_failures.py)."""
    import signal
    import subprocess

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "response": "paris is in france .", "knowledge": "Paris is in France."})
                           + "\n" for i in range(3000)))
    out = tmp_path / "out.jsonl"
    argv = [sys.executable, "-m", "q2_plugins.cli", "score", *flags(tiny_models), "--input", str(src), "--output",
            str(out)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:  # the run is under way once it says it loads the models
        lines.append(line)
        if line.startswith("q2: loading models"):
            break
    time.sleep(20)
    proc.send_signal(signal.SIGTERM)
    err = "".join(lines) + proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + signal.SIGTERM, err
    ours = [x for x in err.splitlines() if x.startswith("q2 score: terminated (SIGTERM): ")]
    assert len(ours) == 1, err
    partial = Path(f"{out}.partial")
    kept = len(partial.read_text().splitlines()) if partial.exists() else 0
    if kept or partial.exists():
        assert f"{kept} rows committed to {partial}, {out} left as it was; to continue: " in ours[0], err
        assert " --resume (" in ours[0], err
    else:
        assert "no row was written" in ours[0], err
    assert "Traceback" not in err and not out.exists()


def test_a_setting_the_tests_cannot_run_is_checked_once_and_recorded_as_the_local_engine_does(tiny_models, tmp_path,
                                                                                               capsys):
    """float16 on the CPU is due a precision check: one of the two actors scores the first rows of its first batch
    again in float32 (the other takes none), and the driver records the agreement in the sidecar and prints it, as the
    local engine does."""
    rows = [{"id": f"r{i}", "response": "paris is in france .", "knowledge": "Paris is in France."} for i in range(6)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    assert main(["score", *flags(tiny_models), "--ray-batch-size", "4", "--no-progress", "--dtype", "float16",
                 "--precision-check", "3", "--input", str(src), "--output", str(out)]) == 0
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    checked = meta["precision_check"]
    # (the rows of the first batch an actor scores, up to 3: Ray may hand it the block of 4 rows or that of 2)
    assert 1 <= checked["rows"] <= 3 and checked["scores"] <= 3 and "float32" in checked["reference"], checked
    assert "within_tolerance" in checked and "float16" in checked["checked"], checked
    assert f"precision     first {checked['rows']} rows vs {checked['reference']}" in capsys.readouterr().out
    # no check is due on the CPU's own float32: nothing recorded
    assert main(["score", *flags(tiny_models), "--no-progress", "--input", str(src), "--output", str(out)]) == 0
    assert "precision_check" not in json.loads(Path(f"{out}.meta.json").read_text())
