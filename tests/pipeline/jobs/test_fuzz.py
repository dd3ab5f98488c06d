"""Fuzz: 2,000 seeded hostile rows plus malformed records through ``q2 score`` (JSONL and CSV, with and without
``--cache-dir``) and ``Q2Scorer.score``, on the tiny models. No crash, no row lost (every id maps back, in order),
every row a score or an error that says what is wrong. A few of the rows are enormous (a 50,000-word response,
200,000 characters of knowledge): over the default budgets, each is its own error, found before any work; the API run
truncates them instead (``over_budget="truncate"``) and scores them with a warning. The table it prints is the
issue's closing table."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.cli import main
from tests.hostile import BUDGET_ERROR, ENORMOUS_CHARS, hostile_rows, outcome, write_csv, write_jsonl

N_ROWS = 2000
N_ENORMOUS = 6


@pytest.fixture(scope="module")
def flags(tiny_models):
    return ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
            str(tiny_models["nli"]), "--qg-max-length", "4", "--no-progress", "--chunk-size", "5000",
            "--qg-num-beams", "2", "--qg-num-return", "2"]


def maps_back(row: dict, expected_id) -> bool:
    """An output row belongs to its record: the record's id, or for an unreadable record an error naming its line."""
    if expected_id is None:
        return row["status"] == "error" and row["error"].startswith("line ")
    return row.get("id") == expected_id


def tally(name: str, tried: int, crashed: int, out: list[dict], expected: list) -> dict:
    lost = sum(i >= len(out) or not maps_back(out[i], e) for i, e in enumerate(expected))
    kinds = Counter(outcome(o) for o in out)
    return {"surface": name, "rows tried": tried, "crashes": crashed, "rows lost": lost, "extra rows":
            max(0, len(out) - len(expected)), "clear errors": kinds["clear"], "unclear errors": kinds["unclear"],
            "scored": kinds["scored"], "unclear": [o["error"] for o in out if outcome(o) == "unclear"][:5]}


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except BaseException:  # noqa: BLE001 - counted as a crash, then shown by the assertion
        return -1


def test_fuzz_cli_and_api(tmp_path, flags, capsys):
    rows = hostile_rows(N_ROWS, seed=15, enormous=N_ENORMOUS)
    enormous = {r["id"] for r in rows if _enormous(r)}
    table = []
    outputs = {}

    cache = ["--cache-dir", str(tmp_path / "cache")]
    jl, cv = tmp_path / "hostile.jsonl", tmp_path / "hostile.csv"
    expected = {"jsonl": write_jsonl(rows, jl, seed=15), "csv": write_csv(rows, cv, seed=15)}
    # the cached JSONL run fills the cache the CSV and API runs then read; the last run computes everything again
    for name, path, kind, extra in (("CLI JSONL --cache-dir", jl, "jsonl", cache),
                                    ("CLI CSV --cache-dir", cv, "csv", cache), ("CLI JSONL", jl, "jsonl", [])):
        out = tmp_path / f"{len(outputs)}.jsonl"
        code = run_cli(["score", "--input", str(path), "--output", str(out), *flags, *extra])
        outputs[name] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if code >= 0 else []
        table.append(tally(name, len(expected[kind]), int(code not in (0, 1)), outputs[name], expected[kind]))

    api_rows = hostile_rows(N_ROWS, seed=16, api=True, enormous=N_ENORMOUS)
    cfg = Q2Config(qg_model=flags[1], qa_model=flags[3], nli_model=flags[5], qg_max_length=4, qg_num_beams=2,
                   qg_num_return=2, cache_dir=str(tmp_path / "cache"), over_budget="truncate")
    crashed = 0
    try:
        res = Q2Scorer(cfg).score(responses=[r.get("response") for r in api_rows],
                                  knowledge=[r.get("knowledge") for r in api_rows])
        api_out = [dict(r.to_dict(), id=api_rows[r.index]["id"]) for r in res.responses]
    except BaseException:  # noqa: BLE001
        crashed, api_out = 1, []
    table.append(tally("API Q2Scorer.score (cache)", N_ROWS, crashed, api_out, [r["id"] for r in api_rows]))

    capsys.readouterr()
    with capsys.disabled():
        cols = ["surface", "rows tried", "crashes", "rows lost", "clear errors", "unclear errors", "scored"]
        print("\n" + " | ".join(cols))
        for t in table:
            print(" | ".join(str(t[c]) for c in cols))
    for t in table:
        assert (t["crashes"], t["rows lost"], t["extra rows"], t["unclear errors"]) == (0, 0, 0, 0), t
        assert t["scored"] > 200 and t["clear errors"] > 200, t  # the fuzz reaches both outcomes
    # every enormous row: over a budget, its own error (the CLI runs), or scored on a truncation with a warning (API)
    assert len(enormous) >= N_ENORMOUS
    for name, out in outputs.items():
        big = [o for o in out if o.get("id") in enormous]
        assert len(big) == len(enormous) and all(BUDGET_ERROR.match(o["error"] or "") for o in big), name
    big = [o for o, r in zip(api_out, api_rows) if _enormous(r)]
    assert len(big) >= N_ENORMOUS and all("truncated to its first" in (o.get("warning") or "") for o in big)
    assert sum(o["status"] != "error" for o in big) >= N_ENORMOUS // 2
    # the cache changes nothing
    plain = [(o["status"], o["score"], o["error"]) for o in outputs["CLI JSONL"]]
    assert plain == [(o["status"], o["score"], o["error"]) for o in outputs["CLI JSONL --cache-dir"]]
    assert not any(isinstance(o["score"], float) and math.isnan(o["score"]) for o in api_out)


def test_fuzz_no_path_destroys_data(tmp_path, flags, capsys):
    """Every output flag of both engines pointed at every spelling of an input (the file, links to it, its
    ``.partial`` / ``.meta.json`` names, its directory): each clash stops the run (exit 2, one line) and every input
    byte stays; then records that must not be silently resolved (a JSON key twice, a CSV record short of fields)
    are error rows naming their line, and no row is lost."""
    import os

    from q2_plugins.io.outputs import check_outputs, files_written, html_files

    src = tmp_path / "in.jsonl"
    rows = hostile_rows(60, seed=29)
    expected = write_jsonl(rows, src, seed=29)
    os.link(src, tmp_path / "hard.jsonl")
    (tmp_path / "sym.jsonl").symlink_to(src)
    (tmp_path / "in.jsonl.partial").write_bytes(src.read_bytes())
    (tmp_path / "in.jsonl.meta.json").write_bytes(src.read_bytes())
    kept = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    inputs = ["in.jsonl", "hard.jsonl", "sym.jsonl", "in.jsonl.partial", "in.jsonl.meta.json"]
    outputs = ["in.jsonl", "hard.jsonl", "sym.jsonl", "in", ".", "./in.jsonl", "other.jsonl"]
    refused = 0
    for source in inputs:
        for flag in ("--output", "--html", "--dropped-output"):
            for engine in ("local", "ray"):
                for target in outputs:
                    argv = ["score", "--input", str(tmp_path / source), "--input-format", "jsonl",
                            "--engine", engine, flag, str(tmp_path / target), *flags]
                    if flag == "--dropped-output":
                        argv += ["--output", str(tmp_path / "kept.jsonl"), "--keep-min-score", "0.5"]
                    # what the run writes for that flag: an HTML page and its temporary; a result file, its .partial,
                    # ...
                    written = (html_files(tmp_path / target) if flag == "--html"
                               else files_written(tmp_path / target) + [tmp_path / target])
                    try:
                        check_outputs([tmp_path / source], [(flag[2:].replace("-", "_"), tmp_path / target, written)])
                        continue  # no clash: the run would go ahead (not run here: the first test scores)
                    except ValueError:
                        pass
                    if flag == "--dropped-output" and engine == "local":
                        continue  # filter mode is the Ray engine's
                    assert run_cli(argv) == 2, argv
                    assert capsys.readouterr().err.count("\n") == 1
                    refused += 1
    assert refused > 60
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == kept  # every input byte, no file added

    dup = tmp_path / "dup.jsonl"
    lines = src.read_bytes().split(b"\n")  # (records end at \n only)
    dup.write_bytes(b"\n".join(lines[:20] + [b'{"id": "twice", "response": "a", "knowledge": "k", "response": "b"}']
                               + lines[20:]))
    expected = expected[:20] + [None] + expected[20:]
    cv = tmp_path / "short.csv"
    cv.write_text("id,response,knowledge\n1,paris is nice .,Paris.\n2,only a response\n3\n4,a,b\n")
    got = {}
    for name, path, exp in (("JSONL, a key twice", dup, expected), ("CSV, short records", cv, ["1", None, None, "4"])):
        out = tmp_path / f"{path.stem}.out.jsonl"
        code = run_cli(["score", "--input", str(path), "--output", str(out), *flags])
        got[name] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if code >= 0 else []
        t = tally(name, len(exp), int(code not in (0, 1)), got[name], exp)
        assert (t["crashes"], t["rows lost"], t["extra rows"], t["unclear errors"]) == (0, 0, 0, 0), t
    assert got["JSONL, a key twice"][20]["error"].endswith("has the key 'response' twice; which value is meant "
                                                            "cannot be told")
    assert got["CSV, short records"][2]["error"] == "line 4 has 1 fields; the header names 3"


def _enormous(row: dict) -> bool:
    return any(isinstance(row.get(k), str) and len(row[k]) >= ENORMOUS_CHARS for k in ("response", "knowledge"))
