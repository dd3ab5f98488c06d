"""Gzipped inputs (``.jsonl.gz``, ``.csv.gz``, ``.tsv.gz``; or any name, told by the gzip header) read as the plain
file: the same rows at the same positions, the same progress total, the same result file, and a stopped run resumes
on them; a damaged one is one line naming gzip."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io.inputs import count_records, input_columns, read_rows
from tests.conftest import optional_import
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD
from tests.pipeline.jobs.test_long_runs import dies_on_second_chunk

model_flags = base.model_flags  # the fixture: tiny models' flags

ROWS = [dict(GOOD, id=f"r{i}", response=f"{GOOD['response']} {i}") for i in range(5)]


def _csv(rows: list[dict], delimiter: str) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), delimiter=delimiter)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _plain_and_gzipped(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    text = {"jsonl": "".join(json.dumps(r) + "\n" for r in ROWS) + "\n{not json\n",
            "csv": _csv(ROWS, ","), "tsv": _csv(ROWS, "\t")}[kind]
    plain = tmp_path / f"in.{kind}"
    plain.write_text(text, encoding="utf-8")
    gz = tmp_path / f"in.{kind}.gz"
    gz.write_bytes(gzip.compress(text.encode("utf-8")))
    return plain, gz


@pytest.mark.parametrize("kind", ["jsonl", "csv", "tsv"])
def test_a_gzipped_input_reads_as_the_plain_file(tmp_path, kind):
    plain, gz = _plain_and_gzipped(tmp_path, kind)
    assert list(read_rows(gz)) == list(read_rows(plain))  # (the JSONL one's bad line: the same error, same line)
    assert count_records(gz) == count_records(plain) and input_columns(gz) == input_columns(plain)
    named = tmp_path / f"other.{kind}"  # a gzipped file under a plain name: told by its header
    named.write_bytes(gz.read_bytes())
    assert list(read_rows(named)) == list(read_rows(plain))


def test_q2_score_of_a_gzipped_input_writes_the_plain_files_result_and_resumes(tmp_path, capsys, model_flags,
                                                                             monkeypatch):
    from q2_plugins.scorer import Q2Scorer

    plain, gz = _plain_and_gzipped(tmp_path, "jsonl")
    once = tmp_path / "once.jsonl"
    assert main(["score", "--input", str(plain), "--output", str(once), "--no-progress", *model_flags]) == 0
    real = Q2Scorer.score
    monkeypatch.setattr(Q2Scorer, "score", dies_on_second_chunk(real))
    out = tmp_path / "out.jsonl"
    argv = ["score", "--input", str(gz), "--output", str(out), "--chunk-size", "2", "--no-progress", *model_flags]
    assert main(argv) == 130
    assert "2 rows committed" in capsys.readouterr().err
    monkeypatch.setattr(Q2Scorer, "score", real)
    assert main([*argv, "--resume"]) == 0
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert got == [json.loads(line) for line in once.read_text(encoding="utf-8").splitlines()]
    assert [r["row"] for r in got] == list(range(len(ROWS) + 1)) and got[-1]["status"] == "error"


def test_a_damaged_gzip_input_is_one_line_naming_gzip(tmp_path, capsys, model_flags):
    _, gz = _plain_and_gzipped(tmp_path, "jsonl")
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gz.read_bytes()[:-12])  # the stream ends before its end marker
    assert main(["score", "--input", str(cut), "--output", str(tmp_path / "o.jsonl"), "--no-progress",
                 *model_flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "damaged gzip file" in err and f"gzip -t {cut}" in err, err


def test_the_ray_engine_names_gzip_and_the_command_that_decompresses(tmp_path):
    optional_import("ray", "ray")
    from q2_plugins.jobs.ray.dataset import format_of
    from q2_plugins.metric.errors import SettingError

    _, gz = _plain_and_gzipped(tmp_path, "jsonl")
    with pytest.raises(SettingError, match=rf"gzipped, which the ray engine does not read: gunzip -k {gz} "):
        format_of(gz, None, "input_format")
