"""A run in a folder others can write (tiny models): a link planted at any file a run writes beside its output is
refused in one line naming it, and the file it points to (outside the folder) is never written; a cache folder others
can write (or that another user owns) is refused before any model loads unless named trusted; values that are not
text are per-row errors alike; and a run stopped part-way keeps what it scored, whatever the input's size."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.metric.cache import Q2Cache
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD, jsonl

model_flags = base.model_flags  # the fixture: tiny models' flags


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# -- 1. planted links ------------------------------------------------------------------------------------------------
PLANTED = ["out.jsonl.partial", "out.jsonl.lock", "out.jsonl.resume.json.tmp", "out.jsonl.meta.json.tmp",
           "r.html.tmp", ".r.html.{pid}.tmp"]


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_link_is_refused_naming_it_and_its_target_is_untouched(tmp_path, capsys, model_flags, name):
    outside, run = tmp_path / "outside", tmp_path / "shared"
    outside.mkdir()
    run.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious\n")
    src = jsonl(run / "in.jsonl", [dict(GOOD, id=i) for i in range(3)])
    link = run / name.format(pid=os.getpid())
    link.symlink_to(victim)
    argv = ["score", "--input", str(src), "--output", str(run / "out.jsonl"), "--html", str(run / "r.html"),
            *model_flags]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert str(link) in line and "link" in line, line
    assert victim.read_text() == "precious\n" and link.is_symlink()
    assert not (run / "out.jsonl").exists()


def test_a_resume_through_a_planted_partial_link_truncates_nothing(tmp_path, capsys, model_flags):
    outside, run = tmp_path / "outside", tmp_path / "shared"
    outside.mkdir()
    run.mkdir()
    victim = outside / "victim.jsonl"
    victim.write_text("precious\n" * 50)
    src = jsonl(run / "in.jsonl", [dict(GOOD, id=i) for i in range(3)])
    out = run / "out.jsonl"
    assert main(["score", "--input", str(src), "--output", str(out), *model_flags]) == 0
    (run / "out.jsonl.partial").symlink_to(victim)
    assert main(["score", "--input", str(src), "--output", str(out), "--resume", *model_flags]) == 2
    assert "out.jsonl.partial" in one_line(capsys.readouterr().err)
    assert victim.read_text() == "precious\n" * 50


def test_another_users_file_beside_the_output_is_refused(tmp_path, capsys, model_flags):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    src = jsonl(tmp_path / "in.jsonl", [GOOD])
    lock = tmp_path / "out.jsonl.lock"
    lock.write_text("theirs\n")
    os.chown(lock, 65534, 65534)
    assert main(["score", "--input", str(src), "--output", str(tmp_path / "out.jsonl"), *model_flags]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(lock) in line and "another user" in line
    assert lock.read_text() == "theirs\n"


def test_the_dropped_output_and_html_are_locked(tmp_path, model_flags):
    from q2_plugins.jobs import ScoreJob, check_job_outputs
    from q2_plugins.jobs.partial import OutputLockedError, lock_output

    src = jsonl(tmp_path / "in.jsonl", [GOOD])
    job = ScoreJob(input=str(src), output=str(tmp_path / "o.jsonl"), html=str(tmp_path / "r.html"))
    check_job_outputs(job)
    from q2_plugins.jobs import output_locks

    with lock_output(tmp_path / "r.html", setting="html"):
        with pytest.raises(OutputLockedError, match="r.html"):
            with output_locks(job):
                pass
    with output_locks(job):  # both held: a second run is refused on either
        with pytest.raises(OutputLockedError):
            lock_output(tmp_path / "r.html", setting="html")


# -- 2. a cache others can write -------------------------------------------------------------------------------------
def _forge(folder: Path, score: str) -> int:
    """Every NLI entry of the cache in ``folder`` rewritten to ``score``, with the check recomputed as the code does
    (what anyone who can write the folder can do)."""
    db = sqlite3.connect(folder / "q2-cache-v2.sqlite")
    rows = db.execute("SELECT key, value FROM kv").fetchall()
    n = 0
    for key, value in rows:
        if "entailment" in value or "contradiction" in value or "neutral" in value:
            db.execute("UPDATE kv SET value = ?, checksum = ? WHERE key = ?", [score, Q2Cache._check(key, score), key])
            n += 1
    db.commit()
    db.close()
    return n


def test_a_cache_folder_others_can_write_is_refused_before_any_model_loads(tmp_path, capsys, model_flags):
    src = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(3)])
    shared = tmp_path / "cache"
    shared.mkdir()
    assert main(["score", "--input", str(src), "--output", str(tmp_path / "a.jsonl"), "--cache-dir", str(shared),
                 *model_flags]) == 0
    assert _forge(shared, '"contradiction"') > 0  # a forged entry, its check recomputed
    os.chmod(shared, 0o777)
    capsys.readouterr()
    argv = ["score", "--input", str(src), "--output", str(tmp_path / "b.jsonl"), "--cache-dir", str(shared),
            *model_flags[:-1]]  # (with progress: the "loading models" line must not come)
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert str(shared) in line and "others can write" in line and "--cache-trusted" in line, line
    assert not (tmp_path / "b.jsonl").exists()
    # named trusted: used as it is (what trusting a cache means, docs/failures.md)
    assert main(argv + ["--cache-trusted", "--no-progress"]) in (0, 1)


def test_a_cache_of_another_user_is_refused(tmp_path, capsys, model_flags):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    shared = tmp_path / "cache"
    Q2Cache(shared).close()
    os.chown(shared, 65534, 65534)
    src = jsonl(tmp_path / "in.jsonl", [GOOD])
    assert main(["score", "--input", str(src), "--cache-dir", str(shared), *model_flags]) == 2
    line = one_line(capsys.readouterr().err)
    assert str(shared) in line and "another user owns it" in line
    os.chown(shared, 0, 0)
    os.chown(shared / "q2-cache-v2.sqlite", 65534, 65534)
    assert main(["score", "--input", str(src), "--cache-dir", str(shared), *model_flags]) == 2
    assert "q2-cache-v2.sqlite" in one_line(capsys.readouterr().err)


def test_cache_keys_are_unchanged():
    # the keys of entries are those of the version before the trust check: an existing cache stays valid
    assert Q2Cache._key("qa|x", ["what is paris ?", "Paris is a city."]) == \
        "64dc42bed19e7080a79982e5f27c734e3a7f5537ce15261177bac844b0985748"
    assert Q2Cache._key("nli", ["\u00e9", "\ud800"]) == \
        "4e8eb669aa0356a827f2ab231a3d3d691781989389ce5d5d57831c12f7dab53f"


# -- 5. values that are not text -------------------------------------------------------------------------------------
def test_nan_infinity_and_numbers_are_per_row_errors_alike(tmp_path, model_flags):
    lines = ['{"id": 0, "response": "paris is in france .", "knowledge": "Paris is the capital of France."}',
             '{"id": 1, "response": NaN, "knowledge": "Paris is the capital of France."}',
             '{"id": 2, "response": Infinity, "knowledge": "Paris is the capital of France."}',
             '{"id": 3, "response": -Infinity, "knowledge": "Paris is the capital of France."}',
             '{"id": 4, "response": 3.5, "knowledge": "Paris is the capital of France."}',
             '{"id": 5, "response": "paris is in france .", "knowledge": NaN}',
             '{"id": 6, "response": "paris is in france .", "knowledge": ["Paris is big.", NaN]}',
             '{"id": 7, "response": "paris is in france .", "knowledge": [Infinity]}']
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["score", "--input", str(src), "--output", str(out), *model_flags]) == 0
    got = read(out)
    assert got[0]["status"] != "error"
    where = {5: "knowledge", 6: "knowledge item 1", 7: "knowledge item 0"}  # (6, 7: knowledge as a list of passages)
    for r in got[1:]:  # NaN, Infinity and 3.5: the same error, none scored as the text "NaN"
        assert r["status"] == "error" and r["score"] is None, r
        assert r["error"] == f"{where.get(r['id'], 'response')} must be a string, got float", r
    assert got[1]["response"] == "NaN"  # (the field itself is kept as the file wrote it)


# -- 4. a stop keeps what was scored ---------------------------------------------------------------------------------
def test_ctrl_c_on_a_120_row_run_keeps_the_rows_scored_and_the_resume_scores_the_rest(tmp_path, capsys, model_flags,
                                                                                     monkeypatch):
    from q2_plugins.scorer import Q2Scorer

    rows = [dict(GOOD, id=i, response=f"paris is in france number {i} .") for i in range(120)]
    src = jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    real, scored = Q2Scorer.score, []

    def stops_after_some_rows(self, **kw):
        if sum(scored) >= 10:
            raise KeyboardInterrupt
        result = real(self, **kw)
        scored.append(len(kw["responses"]))
        return result

    monkeypatch.setattr(Q2Scorer, "score", stops_after_some_rows)
    # the default --chunk-size (1000 rows), and commits at least every 0 s: every scoring call commits
    argv = ["score", "--input", str(src), "--output", str(out), "--commit-seconds", "0", *model_flags]
    assert main(argv) == 130
    line = one_line(capsys.readouterr().err)
    kept = sum(scored)
    assert kept >= 10 and f"{kept} rows committed to {out}.partial" in line
    for hint in ("--resume", "--chunk-size", "--cache-dir"):
        assert hint in line, line
    assert len(read(Path(f"{out}.partial"))) == kept
    monkeypatch.setattr(Q2Scorer, "score", lambda self, **kw: scored.append(len(kw["responses"])) or real(self, **kw))
    scored.clear()
    assert main(argv + ["--resume"]) == 0
    assert sum(scored) == 120 - kept  # only the rest was scored
    got = read(out)
    assert [r["id"] for r in got] == list(range(120)) and [r["row"] for r in got] == list(range(120))
    once = tmp_path / "once.jsonl"
    monkeypatch.setattr(Q2Scorer, "score", real)
    assert main(["score", "--input", str(src), "--output", str(once), *model_flags]) == 0
    assert read(once) == got


def test_report_compare_and_meta_eval_refuse_ill_typed_scores_and_compare_repeated_ids(tmp_path, capsys):
    from tests.pipeline.jobs.test_long_runs import verdicts

    def result(i, **kw):
        return {"row": i, "id": f"x{i}", "status": "scored", "score": 0.5, "score_no_nli": 0.5, "num_questions": 1,
                "num_candidates": 1, "used_fallback": False, "error": None, **kw}

    good = jsonl(tmp_path / "good.jsonl", [result(i) for i in range(4)])
    files = {"string score": jsonl(tmp_path / "s.jsonl", [result(0), result(1, score="high")]),
             "dict score": jsonl(tmp_path / "d.jsonl", [result(0), result(1), result(2, score={"v": 1})]),
             "repeated id": jsonl(tmp_path / "r.jsonl", [result(0), result(1), result(2, id="x0")]),
             "word score": jsonl(tmp_path / "w.jsonl", [{"id": "x0", "score": 0.1}, {"id": "x1", "score": "high"}])}
    lines = {"string score": "line 2", "dict score": "line 3", "repeated id": "line 3", "word score": "line 2"}
    got = verdicts(files, good, capsys)
    # a repeated id: compare and meta-eval, which pair rows by id, refuse it; the report shows each row (its page
    # keys rows by place) and counts the repeat in a note
    report_ok = (0, "")
    assert report_ok in got["repeated id"]
    got["repeated id"].discard(report_ok)
    for name, seen in got.items():
        assert len(seen) == 1, (name, seen)  # the same code and message from all three (two for a repeated id)
        code, message = seen.pop()
        assert code == 2 and message.startswith(f"{files[name]} {lines[name]}: "), (name, message)
    refused = {(code, message) for code, message in verdicts({"r": files["repeated id"]}, good, capsys)["r"] if code}
    assert len(refused) == 1 and "x0" in refused.pop()[1]


# -- 7. front ends that score many rows show progress on a terminal only ---------------------------------------------
def test_front_ends_show_progress_on_a_terminal_only(monkeypatch):
    import io

    from q2_plugins.metric.progress import MANY_ROWS, on_a_terminal

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert not on_a_terminal(10 * MANY_ROWS)  # a log, a pipe: quiet
    monkeypatch.setattr("sys.stderr", Terminal())
    assert on_a_terminal(MANY_ROWS) and not on_a_terminal(MANY_ROWS - 1)
