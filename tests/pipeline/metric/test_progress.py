"""Progress of a run: one bar over the rows with the run's total, one bar per stage across chunks and rounds, nothing
with ``--no-progress``, and the same scores either way."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io.inputs import count_records, read_rows
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.progress import Progress
from q2_plugins.scorer import Q2Scorer
from tests.fakes import FakeCandidates, FakeNLI, FakePersonal, FakeQA, FakeQG

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@contextlib.contextmanager
def recorded_bars():
    """Every tqdm bar made while it runs (``tqdm.auto.tqdm``, as the package makes them), in order of creation."""
    import tqdm.auto

    made: list = []

    class Recorded(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tqdm.auto, "tqdm", Recorded)
        yield made


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run_cli(argv: list[str], terminal: bool = True) -> tuple[str, list]:
    """``q2 <argv>`` in this process: its standard error (a terminal, or a file as in a log) and the bars it made."""
    err = Terminal() if terminal else io.StringIO()
    with recorded_bars() as bars, contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return err.getvalue(), bars


@pytest.fixture(scope="module")
def model_config(tiny_models) -> dict:
    return {"qg_model": str(tiny_models["qg_short"]), "qa_model": str(tiny_models["qa"]),
            "nli_model": str(tiny_models["nli"]), "qg_max_length": 6}


@pytest.fixture(scope="module")
def seven_rows(tmp_path_factory) -> Path:
    """Seven sample records, with a blank line among them (no row)."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:7]
    path = tmp_path_factory.mktemp("progress") / "rows.jsonl"
    path.write_text("\n".join(lines[:3] + ["   "] + lines[3:]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs(seven_rows, model_config, tmp_path_factory) -> dict:
    """The same multi-chunk run (``--chunk-size 2``: four chunks) with and without progress."""
    out = tmp_path_factory.mktemp("progress-runs")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in model_config.items()]
    found = {}
    for name, extra in (("on", []), ("off", ["--no-progress"]), ("log", [])):
        argv = ["score", "--input", str(seven_rows), "--output", str(out / f"{name}.jsonl"), "--chunk-size", "2",
                "--explain", *flags, *extra]
        err, bars = run_cli(argv, terminal=name != "log")
        found[name] = {"stderr": err, "bars": bars, "rows": (out / f"{name}.jsonl").read_text(encoding="utf-8")}
    return found


def stages_with_work(rows_file: Path, model_config: dict) -> set[str]:
    """The bar names of the stages that compute something when all rows are scored in one call."""
    rows = list(read_rows(rows_file))
    with contextlib.redirect_stderr(Terminal()):  # (bars on a terminal; a log gets plain lines)
        scorer = Q2Scorer(Q2Config(**model_config)).load()  # (the model library's own loading bars: not counted)
        with recorded_bars() as bars:
            scorer.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows],
                         progress=True)
    return {b.desc for b in bars}


def test_a_run_of_several_chunks_has_one_row_bar_and_one_bar_per_stage(runs, seven_rows, model_config):
    made = [b.desc for b in runs["on"]["bars"]]
    assert made.count("q2 rows") == 1
    stages = stages_with_work(seven_rows, model_config)
    assert {"q2 candidates", "q2 qg", "q2 qa"} <= stages
    assert sorted(made) == sorted(stages | {"q2 rows"})  # each made once, not once per chunk


def test_standard_error_that_is_no_terminal_gets_plain_lines(runs):
    assert runs["log"]["bars"] == []  # no bar: whole lines, with no redraws or cursor movements for a log to keep
    err = runs["log"]["stderr"]
    assert "\r" not in err and "\x1b[" not in err
    assert err.splitlines()[-1].startswith("q2 rows: 7/7 rows (100%) in ")
    assert "\x1b[" in runs["on"]["stderr"] and "\r" in runs["on"]["stderr"]  # (bars on a terminal redraw in place)
    assert runs["log"]["rows"] == runs["on"]["rows"]


def test_plain_lines_come_at_most_every_so_many_seconds_and_name_the_stage():
    err = io.StringIO()
    with Progress(total=4, file=err, every=0, plain=True) as progress:  # (every=0: a line per batch of rows)
        progress.stage("qg")
        progress.rows_done(1)
        progress.rows_done(3)
    lines = err.getvalue().splitlines()
    assert [line.split(" after ")[0] for line in lines[:2]] == ["q2 rows: 1/4 rows (25%)", "q2 rows: 4/4 rows (100%)"]
    assert lines[0].endswith(", stage: qg") and lines[2].startswith("q2 rows: 4/4 rows (100%) in ") and len(lines) == 3
    err = io.StringIO()
    with Progress(total=None, file=err, plain=True) as progress:  # at most one line every 30 s, and the last
        progress.rows_done(5)
    assert err.getvalue().startswith("q2 rows: 5 rows in ") and err.getvalue().count("\n") == 1


@pytest.mark.parametrize("extra", [[], ["--no-progress"]])
def test_a_log_of_a_q2_score_run_holds_only_our_lines(model_config, seven_rows, tmp_path, extra):
    """``q2 score`` with standard error to a file (as a log): no "\\r" redraws and no escape codes, and nothing of
    the libraries' own (loading bars, INFO logs); with ``--no-progress`` nothing at all."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in model_config.items()]
    with open(tmp_path / "err.log", "w") as err:
        proc = subprocess.run([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(seven_rows),
                               "--output", str(tmp_path / "out.jsonl"), *flags, *extra], stderr=err,
                              stdout=subprocess.DEVNULL, timeout=600)
    assert proc.returncode == 0
    log = (tmp_path / "err.log").read_text()
    if extra:
        assert log == ""
    else:
        assert "\r" not in log and "\x1b[" not in log, log
        assert len(log.splitlines()) == 2 and log.startswith("q2: loading models: QG "), log
        assert log.splitlines()[1].startswith("q2 rows: 7/7 rows (100%) in ")


def in_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 600,
                  size: tuple[int, int] | None = None) -> tuple[int, str]:
    """Run ``argv`` with standard error (and input) on a pseudo-terminal, as a person at a terminal does; returns
    its exit code and everything the terminal got. ``size``: its rows and columns (default: none set)."""
    import pty
    import select
    import time

    main_fd, side = pty.openpty()
    if size is not None:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    proc = subprocess.Popen(argv, stdin=side, stdout=subprocess.DEVNULL, stderr=side, env=env, close_fds=True)
    os.close(side)
    got, end = bytearray(), time.monotonic() + timeout
    while time.monotonic() < end:
        if select.select([main_fd], [], [], 0.2)[0]:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # the other side closed
                data = b""
            if not data:
                break
            got += data
        elif proc.poll() is not None:
            break
    os.close(main_fd)
    return proc.wait(timeout=60), got.decode("utf-8", "replace")


def test_on_a_terminal_one_bar_moves_through_a_call_with_rate_time_left_and_stage(model_config, seven_rows,
                                                                                 tmp_path):
    """``q2 score`` at a terminal, its seven rows in one call: the row bar redraws in place and its count moves
    before the call ends, each state with the rate, the time left and the stage running."""
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in model_config.items()]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "TQDM_MININTERVAL": "0"}
    code, shown = in_a_terminal([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(seven_rows),
                                 "--output", str(tmp_path / "out.jsonl"), *flags], env)
    assert code == 0, shown[-2000:]
    states = [part.strip() for part in shown.split("\r") if part.startswith("q2 rows:")]
    counts = [int(re.search(r"\| *(\d+)/7 \[", s).group(1)) for s in states]
    assert counts and counts == sorted(counts) and counts[0] == 0 and counts[-1] == 7, (states, shown[-3000:])
    assert len({c for c in counts if 0 < c < 7}) >= 2, states  # it moved within the one call
    for state, count in zip(states, counts):  # elapsed<left, rate, and the stage with its items done
        if 0 < count < 7:
            assert re.search(r"\[\d\d:\d\d, +[\d.]+(row/s|s/row), (estimating|\d\d:\d\d left), stage: "
                             r"[a-z]+ \d+/\d+\]", state), state
    assert "Traceback" not in shown


def test_the_row_bar_counts_to_the_runs_total_from_the_start(runs):
    rows_bar = next(b for b in runs["on"]["bars"] if b.desc == "q2 rows")
    assert (rows_bar.total, rows_bar.n) == (7, 7)
    shown = [part.strip() for part in runs["on"]["stderr"].split("\r") if part.startswith("q2 rows:")]
    assert "0/7" in shown[0] and "7/7" in shown[-1] and "100%" in shown[-1]


def test_stage_bars_count_every_item_of_the_run_without_a_total_that_would_grow(runs):
    for bar in runs["on"]["bars"]:
        assert bar.n > 0, bar.desc
        assert bar.total == 7 if bar.desc == "q2 rows" else bar.total is None, bar.desc


def test_no_progress_writes_nothing_to_standard_error(runs):
    assert runs["off"]["bars"] == []
    assert runs["off"]["stderr"] == ""
    assert "q2 rows" in runs["on"]["stderr"]  # the same run with progress does write


def test_progress_does_not_change_a_score(runs):
    on, off = (runs[k]["rows"].splitlines() for k in ("on", "off"))
    assert len(on) == 7 and on == off
    assert any(json.loads(line)["status"] != "error" for line in on)


# -- the Python API: one Progress over several score() calls ---------------------------------------------------------
KNOW = "Elvis was an American singer born in Tupelo."


def scorer_and_qa() -> tuple[Q2Scorer, FakeQA]:
    qa = FakeQA({("Who sang?", "Elvis sang ."): "Elvis", ("Who sang?", KNOW): "Elvis",
                 ("Where was he born?", "he was born in Tupelo ."): "Tupelo", ("Where was he born?", KNOW): "Tupelo"})
    scorer = Q2Scorer(
        Q2Config(),
        candidate_extractor=FakeCandidates({"Elvis sang .": ["Elvis"], "he was born in Tupelo .": ["Tupelo"]}),
        question_generator=FakeQG({("Elvis", "Elvis sang ."): ["Who sang?"],
                                   ("Tupelo", "he was born in Tupelo ."): ["Where was he born?"]}),
        question_answerer=qa, nli=FakeNLI({}), personal_filter=FakePersonal(),
    )
    return scorer, qa


def test_one_progress_over_several_calls_keeps_its_bars_and_counts_every_row():
    scorer, qa = scorer_and_qa()
    out = Terminal()  # (bars: on a terminal)
    with recorded_bars() as bars:
        with Progress(total=3, file=out) as progress:
            scorer.score(responses=["Elvis sang .", "he was born in Tupelo ."], knowledge=[KNOW] * 2,
                         progress=progress)
            scorer.score(responses=["Elvis sang ."], knowledge=[KNOW], progress=progress)
    by_name = {b.desc: b for b in bars}
    assert len(by_name) == len(bars)  # no bar made twice
    assert (by_name["q2 rows"].total, by_name["q2 rows"].n) == (3, 3)
    qa_items = sum(len(call) for call in qa.calls)  # the QA pairs computed over both calls, every round
    assert by_name["q2 qa"].total is None and by_name["q2 qa"].n == qa_items
    assert len(qa.calls) > 2  # both calls, with a round for the knowledge: the bar went on across them
    assert "q2 qa" in out.getvalue()


def test_scores_are_the_same_with_a_progress_true_or_nothing():
    scorer, _ = scorer_and_qa()
    args = {"responses": ["Elvis sang .", "he was born in Tupelo ."], "knowledge": [KNOW] * 2, "explain": True}
    with contextlib.redirect_stderr(io.StringIO()):
        shown = [scorer.score(**args, progress=p).to_dict() for p in (True, Progress(file=io.StringIO()))]
    assert shown[0] == shown[1] == scorer.score(**args).to_dict()


def test_progress_must_be_a_bool_or_an_open_progress():
    scorer, _ = scorer_and_qa()
    with pytest.raises(TypeError, match="progress"):
        scorer.score(responses=["Elvis sang ."], knowledge=[KNOW], progress="yes")
    closed = Progress(file=io.StringIO())
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        scorer.score(responses=["Elvis sang ."], knowledge=[KNOW], progress=closed)


# -- counting the rows of an input file, for the total -----------------------------------------------------------------
def test_count_records_is_the_number_of_rows_read(tmp_path):
    ok = json.dumps({"response": "a", "knowledge": "b"})
    jsonl = tmp_path / "mixed.jsonl"
    jsonl.write_bytes(b"\xef\xbb\xbf" + "\n".join([ok, "", "  \t", "{not json", "[1, 2]", ok + "\r", ok]).encode())
    csv = tmp_path / "mixed.csv"
    csv.write_text('response,knowledge\n"two\nlines",k\n\nx,y,extra\n"open,k\n', encoding="utf-8")
    header_only = tmp_path / "empty.tsv"
    header_only.write_text("response\tknowledge\n", encoding="utf-8")
    for path in (jsonl, csv, header_only):
        assert count_records(path) == len(list(read_rows(path))), path.name
    assert count_records(jsonl) == 5 and count_records(header_only) == 0


def test_count_records_is_unknown_for_a_stream(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    assert count_records(fifo) is None


def test_q2_perturb_counts_its_rows_on_a_terminal_in_plain_lines_in_a_log_and_not_with_no_progress(tmp_path):
    """``q2 perturb`` (stress pairs): the same row bar as ``q2 score`` at a terminal, moving through its stages
    (spaCy's parse, then the perturbations); a log gets plain lines; ``--no-progress`` writes nothing there."""
    sample = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
    base = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()]
    rows = [{**row, "id": f"{row['id']}-{k}"} for k in range(13) for row in base]  # 156 rows: the count moves
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = [sys.executable, "-m", "q2_plugins.cli", "perturb", "--input", str(tmp_path / "in.jsonl"),
            "--output", str(tmp_path / "pairs.jsonl")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "TQDM_MININTERVAL": "0"}
    code, shown = in_a_terminal(argv, env)
    assert code == 0, shown[-2000:]
    states = [part.strip() for part in shown.split("\r") if part.startswith("q2 rows:")]
    counts = [int(re.search(r"\| *(\d+)/156 \[", s).group(1)) for s in states]
    assert counts and counts == sorted(counts) and counts[0] == 0 and counts[-1] == 156, (states, shown[-3000:])
    assert len({c for c in counts if 0 < c < 156}) >= 2, states
    assert any("stage: parse" in s for s in states) and any("stage: perturb" in s for s in states), states
    logged = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert logged.returncode == 0, logged.stderr[-2000:]
    lines = logged.stderr.splitlines()
    assert lines and all(line.startswith("q2 rows: ") for line in lines), lines
    assert lines[-1].startswith("q2 rows: 156/156 rows (100%) in ") and "\r" not in logged.stderr
    quiet = subprocess.run(argv + ["--no-progress"], env=env, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-2000:]
    assert quiet.stdout == logged.stdout  # the same summary


@pytest.mark.parametrize("recipe", ["begin", "conv-fever"])
def test_q2_perturb_recipe_counts_its_rows_on_a_terminal_in_plain_lines_in_a_log_and_not_with_no_progress(
        tmp_path, recipe):
    """``q2 perturb --recipe``: the row bar at a terminal, through spaCy's parse and then the examples; plain lines
    in a log; nothing with ``--no-progress``; the same summary either way."""
    sample = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
    base = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()]
    rows = [{"response": f"{row['response']} ({k})", "knowledge": row["knowledge"], "topic": f"t{k % 5}"}
            for k in range(13) for row in base]
    n = len(rows)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = [sys.executable, "-m", "q2_plugins.cli", "perturb", "--recipe", recipe, "--input",
            str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "made.jsonl")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "TQDM_MININTERVAL": "0"}
    code, shown = in_a_terminal(argv, env)
    assert code == 0, shown[-2000:]
    states = [part.strip() for part in shown.split("\r") if part.startswith("q2 rows:")]
    counts = [int(re.search(rf"\| *(\d+)/{n} \[", s).group(1)) for s in states]
    assert counts and counts == sorted(counts) and counts[0] == 0 and counts[-1] == n, (states, shown[-3000:])
    assert len({c for c in counts if 0 < c < n}) >= 2, states
    assert any("stage: parse" in s for s in states) and any("stage: examples" in s for s in states), states
    logged = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert logged.returncode == 0, logged.stderr[-2000:]
    lines = logged.stderr.splitlines()
    assert lines and all(line.startswith("q2 rows: ") for line in lines), lines
    assert lines[-1].startswith(f"q2 rows: {n}/{n} rows (100%) in ") and "\r" not in logged.stderr
    quiet = subprocess.run(argv + ["--no-progress"], env=env, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-2000:]
    assert quiet.stdout == logged.stdout


@pytest.mark.parametrize("rows, columns, expected", [
    (0, 0, {"ncols": 80, "nrows": 24}),  # a pseudo-terminal nobody sized
    (0, 100, {"ncols": 100, "nrows": 24}),  # ``stty cols 100`` alone: tqdm would see 0 rows and draw nothing
    (30, 0, {"ncols": 80, "nrows": 30}),
    (30, 100, {}),  # a sized terminal is left to tqdm
])
def test_a_terminal_that_lacks_its_size_gets_what_it_lacks(rows, columns, expected):
    import fcntl
    import pty
    import struct
    import termios

    from q2_plugins.metric.progress import _size_if_unknown

    main_fd, side = pty.openpty()
    try:
        fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        with os.fdopen(os.dup(side), "w") as terminal:
            assert _size_if_unknown(terminal) == expected
    finally:
        os.close(side)
        os.close(main_fd)
