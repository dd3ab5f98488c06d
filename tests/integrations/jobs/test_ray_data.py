"""Q² on Ray Data (q2_plugins.jobs.ray.dataset) on a local two-CPU Ray instance, started once for the module, with the
tiny random-weight models: same results as ``Q2Scorer.score``, every row exactly once, a killed worker, a restarted run
that reuses the cache, bad rows, a model that does not load, and ``q2 score --engine ray`` against ``q2 score``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402

from q2_plugins import Q2Config, Q2Scorer  # noqa: E402
from q2_plugins.cli import main  # noqa: E402
from q2_plugins.io.rows import RowSpec  # noqa: E402
from q2_plugins.jobs.ray.dataset import Q2BatchScorer, dataset_stats, score_dataset, split_by_score  # noqa: E402
from q2_plugins.metric.results import EXPLANATION_FIELDS  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
Q2_FIELDS = ("score", "score_no_nli", "status", "num_questions", "error")


pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance for the module


@pytest.fixture(scope="module")
def config(tiny_models) -> Q2Config:
    return Q2Config(qg_model=str(tiny_models["qg_short"]), qa_model=str(tiny_models["qa"]),
                    nli_model=str(tiny_models["nli"]), qg_max_length=12)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """The sample rows with a unique ``uid``, plus rows the core rejects (they must come out as per-row errors)."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    bad = [{**sample[0], "response": ""}, {**sample[1], "knowledge": None}, {**sample[2], "response": None}]
    return [{**r, "uid": i} for i, r in enumerate(sample + bad)]


@pytest.fixture(scope="module")
def reference(config, rows) -> dict[int, dict]:
    """uid -> the core's result row for the same rows in one ``Q2Scorer.score`` call."""
    result = Q2Scorer(config).score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows],
                                    explain=True, label=True)
    assert {r.status for r in result.responses} >= {"error"} and len({r.status for r in result.responses}) > 1
    return {row["uid"]: res.to_dict() for row, res in zip(rows, result.responses)}


def check_rows(out: list[dict], rows: list[dict], reference: dict[int, dict], explain: bool = False) -> None:
    """Every input row exactly once, its columns unchanged, the Q² columns equal to the core's."""
    assert sorted(r["uid"] for r in out) == sorted(r["uid"] for r in rows)
    by_uid = {r["uid"]: r for r in rows}
    for r in out:
        assert {k: r[k] for k in by_uid[r["uid"]]} == by_uid[r["uid"]]
        ref = reference[r["uid"]]
        assert {f: r[f] for f in Q2_FIELDS} == {f: ref[f] for f in Q2_FIELDS}
        if explain:
            assert (r["label"], r["label3"]) == (ref["label"], ref["label3"])
            assert {f: r[f] and json.loads(r[f]) for f in EXPLANATION_FIELDS} == {f: ref.get(f) for f in
                                                                                  EXPLANATION_FIELDS}


def test_one_block_one_actor_equals_core(config, rows, reference):
    scored = score_dataset(ray.data.from_items(rows, override_num_blocks=1), config,
                           rows=RowSpec(explain=True, labels=True),
                           batch_size=64).materialize()
    check_rows(scored.take_all(), rows, reference, explain=True)
    expected = Q2Scorer(config).score(responses=[r["response"] for r in rows],
                                      knowledge=[r["knowledge"] for r in rows]).stats
    got = dataset_stats(scored)
    assert vars(got) == pytest.approx(vars(expected))


class KillOnce(Q2BatchScorer):
    """Kills its own process (SIGKILL) in the middle of its second batch, once per run (a marker file says so)."""

    marker: str = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.calls += 1
        out = super().__call__(batch)
        if self.calls == 2:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return out
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
        return out


def test_worker_killed_mid_run_many_blocks_two_actors(config, rows, reference, tmp_path):
    KillOnce.marker = str(tmp_path / "killed")
    ds = ray.data.from_items(rows, override_num_blocks=len(rows))
    out = score_dataset(ds, config, concurrency=2, batch_size=2, scorer_class=KillOnce).take_all()
    assert Path(KillOnce.marker).read_text().isdigit()  # one worker process was killed mid-run
    check_rows(out, rows, reference)


class CountCache(Q2BatchScorer):
    """Appends each batch's uids and the scorer's cache misses to a log file."""

    log: str = ""

    def __call__(self, batch: pa.Table) -> pa.Table:
        before = self.scorer.cache.misses
        out = super().__call__(batch)
        with open(self.log, "a") as f:
            f.write(json.dumps({"uids": batch.column("uid").to_pylist(),
                                "misses": self.scorer.cache.misses - before}) + "\n")
        return out


def test_restarted_run_reuses_the_cache(config, rows, reference, tmp_path):
    good = [r for r in rows if reference[r["uid"]]["status"] != "error"]
    first, cfg = good[: len(good) // 2], config.replace(cache_dir=str(tmp_path / "cache"))
    CountCache.log = str(tmp_path / "log.jsonl")

    def run(part):
        ds = ray.data.from_items(part, override_num_blocks=len(part) // 2)
        return score_dataset(ds, cfg, batch_size=2, scorer_class=CountCache).take_all()

    run(first)  # the run that stopped half-way
    Path(CountCache.log).unlink()
    check_rows(run(good), good, reference)  # the restarted run, over everything
    batches = [json.loads(line) for line in Path(CountCache.log).read_text().splitlines()]
    done = {r["uid"] for r in first}
    old = [b for b in batches if set(b["uids"]) <= done]
    new = [b for b in batches if not set(b["uids"]) & done]
    assert old and new
    assert all(b["misses"] == 0 for b in old)  # finished work comes from the cache
    assert all(b["misses"] > 0 for b in new)  # the rest is computed


def test_split_by_score_puts_every_row_on_one_side():
    items = [{"uid": i, "score": s} for i, s in enumerate([0.0, 0.49, 0.5, 1.0, None, 0.7, None])]
    ds = ray.data.from_items(items, override_num_blocks=3)
    for keep_unscored, kept_uids in ((False, {2, 3, 5}), (True, {2, 3, 4, 5, 6})):
        kept, dropped = split_by_score(ds, 0.5, keep_unscored=keep_unscored)
        assert {r["uid"] for r in kept.take_all()} == kept_uids
        assert sorted(r["uid"] for r in dropped.take_all()) == sorted(set(range(7)) - kept_uids)


def test_missing_column_fails_before_scoring(config):
    with pytest.raises(ValueError, match=r"^response_column: .*no column\(s\) \[.text.\]"):
        score_dataset(ray.data.from_items([{"response": "a", "knowledge": "b"}]), config,
                      rows=RowSpec(response_column="text"))


def tiny_flags(tiny_models) -> list[str]:
    return ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
            "--nli-model", str(tiny_models["nli"]), "--qg-max-length", "12", "--no-progress"]


def test_cli_ray_engine_equals_local(tiny_models, rows, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    flags = tiny_flags(tiny_models) + ["--input", str(src), "--format", "json"]
    assert main(["score", *flags, "--output", str(tmp_path / "local.jsonl")]) == 0
    local_summary = json.loads(capsys.readouterr().out)
    assert main(["score", *flags, "--engine", "ray", "--output", str(tmp_path / "ray.jsonl"), "--concurrency", "2",
                 "--ray-batch-size", "4"]) == 0
    ray_summary = json.loads(capsys.readouterr().out)
    local = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    out = [json.loads(line) for line in (tmp_path / "ray.jsonl").read_text().splitlines()]
    assert [r["uid"] for r in out] == [r["uid"] for r in rows]  # input order, each row once
    for row, r, loc in zip(rows, out, local):
        assert {k: r[k] for k in row} == row
        assert {f: r[f] for f in Q2_FIELDS} == {f: loc[f] for f in Q2_FIELDS}
    kinds = ("errors", "n_error_kinds")  # row errors by kind, as docs/failures.md describes
    assert [ray_summary.pop(k) for k in kinds] == [local_summary.pop(k) for k in kinds]
    assert ray_summary == pytest.approx(local_summary)
    meta = json.loads((tmp_path / "ray.jsonl.meta.json").read_text())
    local_meta = json.loads((tmp_path / "local.jsonl.meta.json").read_text())
    assert set(meta) == set(local_meta)  # one writer: the same keys from both engines, the same values but these
    differ = {"engine", "output", "summary"}
    assert ({k: v for k, v in meta.items() if k not in differ}
            == {k: v for k, v in local_meta.items() if k not in differ})
    assert (meta["engine"], local_meta["engine"], meta["rows"]) == ("ray", "local", len(rows))
    assert meta["signature"] == local_summary["signature"] and meta["summary"]["n"] == len(rows)


def test_cli_filter_mode_directories_in_and_out_parquet_and_csv(tiny_models, rows, reference, tmp_path, capsys):
    src = tmp_path / "in"
    src.mkdir()
    for i in (0, 1):
        pq.write_table(pa.Table.from_pylist(rows[i::2]), src / f"part-{i}.parquet")
    kept, dropped = tmp_path / "kept", tmp_path / "dropped.csv"  # a directory of Parquet parts, one CSV file
    assert main(["score", *tiny_flags(tiny_models), "--engine", "ray", "--input", str(src), "--output", str(kept),
                 "--keep-min-score", "0.5", "--dropped-output", str(dropped)]) == 0
    assert "filter        kept" in capsys.readouterr().out
    kept_rows = pq.read_table(kept).to_pylist()
    import csv

    with dropped.open(newline="") as f:
        dropped_rows = list(csv.DictReader(f))
    assert sorted([r["uid"] for r in kept_rows] + [int(r["uid"]) for r in dropped_rows]) == [r["uid"] for r in rows]
    want_kept = {u for u, ref in reference.items() if ref["score"] is not None and ref["score"] >= 0.5}
    assert {r["uid"] for r in kept_rows} == want_kept
    assert {int(r["uid"]) for r in dropped_rows if r["status"] == "error"} == \
        {u for u, ref in reference.items() if ref["status"] == "error"}
    check_rows(kept_rows, [r for r in rows if r["uid"] in want_kept], reference)
    for path in (kept, dropped):
        assert json.loads(Path(f"{path}.meta.json").read_text())["filter"]["kept"] == len(kept_rows)


def test_cli_model_that_cannot_load_fails_once(tiny_models, rows, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    flags = tiny_flags(tiny_models) + ["--qa-model", str(tmp_path / "missing")]
    code = main(["score", *flags, "--engine", "ray", "--input", str(src), "--output", str(tmp_path / "o.jsonl"),
                 "--concurrency", "2"])
    err = capsys.readouterr().err
    assert code != 0
    assert err.splitlines()[0].startswith("q2 score: error: Cannot load the QA model") and "--qa-model" in err
    assert err.count("Cannot load") == 1
    assert not (tmp_path / "o.jsonl").exists()


def test_missing_ray_names_the_extra():
    code = ("import sys\nsys.modules['ray'] = None\n"
            "try:\n    import q2_plugins.jobs.ray.dataset\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'q2-plugins[ray]'" in out.stdout


def test_doc_commands_parse():
    """docs/ray.md's command lines (the cluster one, which needs a cluster, and those the examples run) use flags
    that exist, with values they accept."""
    import shlex

    from q2_plugins.cli import build_parser
    from tests.conftest import _doc_blocks

    doc = Path(__file__).resolve().parents[3] / "docs" / "ray.md"
    code = "".join(c for tag in ("ray-cli", "example") for lang, c in _doc_blocks(doc, tag) if lang == "bash")
    commands = [c for c in code.replace("\\\n", " ").splitlines() if c.startswith("q2 ")]
    assert len(commands) == 3
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[1:])
        assert args.engine == "ray"


def test_worker_with_other_models_refuses_to_start(config):
    with pytest.raises(ValueError, match="differ from those the run was checked with"):
        Q2BatchScorer(config, expected_signature="q2:0.0|qg:other")
