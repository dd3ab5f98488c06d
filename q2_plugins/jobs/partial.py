"""Long runs that survive: one writer per output, a ``.partial`` that says what it holds, resuming a stopped run,
the free-space check before the work, and the one line a stopped run leaves.

- **One writer per output.** :func:`lock_output` takes ``OUTPUT.lock`` (an advisory ``flock``, holding the pid and
  host of its run) for the whole run; a second run on the same output is refused at once, naming the first. The
  kernel drops the lock of a process that dies (``kill -9`` too), so a lock file a killed run leaves never blocks.
- **Resume.** Before its first row, a run writes ``OUTPUT.resume.json`` (:class:`RunRecord`): the input's identity
  (path, size, modification time, SHA-256), the signature and the row settings. ``--resume`` keeps the complete rows
  of ``OUTPUT.partial`` (:func:`committed_rows`: each a full line whose ``row`` is its position; a torn last line is
  cut off), scores the rest and appends them, so no row is lost or written twice whenever the run stopped. A resume
  with another input or other settings is refused in one line (:func:`check_resume`).
- **Disk space.** :func:`check_free_space`: the output's folder must have room for an estimate of the output
  (the input's size times :data:`OUTPUT_FACTOR`, or :data:`EXPLAINED_FACTOR` with explanations) before any model
  loads.
- **Stopped runs speak.** :class:`StoppedRun`, attached to the exception that stopped a run (:func:`stopped_run`),
  gives the front end one count (the rows committed to the ``.partial``) and where they are; the command line adds
  the command that resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional

from q2_plugins.io.inputs import FORMATS, format_suffix, suffixes
from q2_plugins.io.outputs import ResultFile, lock_path, open_own, partial_path, record_path, write_json_atomic
from q2_plugins.metric.errors import SettingError

__all__ = ["OutputLockedError", "ResumeError", "OutputLock", "lock_output", "RunRecord", "input_identity",
           "committed_rows", "check_resume", "StoppedRun", "stopped_run", "mark_stopped", "check_free_space",
           "OUTPUT_FACTOR", "EXPLAINED_FACTOR", "PartialRows", "RECORD_FORMAT", "resumable_on_ray", "ray_stages"]

#: the ``format`` of ``OUTPUT.resume.json``
RECORD_FORMAT = "q2-score-partial"
#: bytes of output per byte of input: the largest row's ratio on the bundled slice of the original run (x2.51; all
#: rows x1.96), rounded up (``benchmarks/bench_output_size.py``): a result row is its input fields plus the result
#: fields
OUTPUT_FACTOR = 3.0
#: the same with ``--explain`` / ``--html`` (every question, its answers and the candidates): largest row x7.40, all
#: rows x4.44
EXPLAINED_FACTOR = 8.0


class OutputLockedError(SettingError):
    """Another run is writing the same output; ``setting`` is ``output``."""


class ResumeError(SettingError):
    """``--resume`` cannot continue this ``.partial`` (another input, other settings, or no record of it)."""


# -- one writer per output ----------------------------------------------------------------------------------------
@dataclass
class OutputLock:
    """The lock of one output, held by this process until :meth:`release`."""

    path: Path
    fd: Optional[int]

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()  # unlinked before it is unlocked: a run that waits then finds another file
        except OSError:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass
        self.fd = None

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} on {info['host']}, since {info['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process whose lock cannot be read"


def lock_output(output: str | Path, setting: str = "output") -> OutputLock:
    """Take ``OUTPUT.lock`` for this process, or raise :class:`OutputLockedError` in one line naming the run that
    holds it. A lock file whose process is gone (killed, crashed, on a restarted machine) is taken over."""
    try:
        import fcntl
    except ModuleNotFoundError:  # pragma: no cover - no flock on this platform: one writer is not enforced
        return OutputLock(lock_path(output), None)

    path = lock_path(output)
    for _ in range(50):
        fd = open_own(path, append=True, read=True, setting=setting)  # (a planted link or another's file: refused)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputLockedError(setting, f"{output} is being written by another q2 score run "
                                             f"({_holder(path)}); wait for it to end, or name another output") from None
        try:  # the file may have been released (unlinked) between our open and our lock: take the one at the path
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        info = {"pid": os.getpid(), "host": socket.gethostname(), "output": str(output),
                "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        except OSError as e:  # (a full disk): no empty lock left behind, and the error names the file
            OutputLock(path, fd).release()
            e.filename = e.filename or str(path)
            raise
        return OutputLock(path, fd)
    raise OutputLockedError(setting, f"{output}: its lock {path} keeps changing hands; is another run starting?")


# -- what a .partial holds ---------------------------------------------------------------------------------------
def input_identity(path: str | Path) -> dict[str, Any]:
    """The identity of an input file: its resolved path, size, modification time and SHA-256."""
    path = Path(path)
    st = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest.hexdigest()}


@dataclass(frozen=True)
class RunRecord:
    """What a run's ``.partial`` holds rows of: the input (:func:`input_identity`), the signature, and the settings
    that shape its rows. Written as ``OUTPUT.resume.json`` before the first row."""

    input: dict[str, Any]
    signature: str
    rows: dict[str, Any]

    def write(self, output: str | Path) -> Path:
        target = record_path(output)
        write_json_atomic(target, {"format": RECORD_FORMAT, **asdict(self)})
        return target

    @classmethod
    def read(cls, output: str | Path) -> Optional["RunRecord"]:
        try:
            data = json.loads(record_path(output).read_text(encoding="utf-8"))
            if data.get("format") != RECORD_FORMAT:
                return None
            return cls(dict(data["input"]), str(data["signature"]), dict(data["rows"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


def check_resume(output: str | Path, saved: Optional[RunRecord], now: RunRecord, *, signature: bool) -> None:
    """Refuse, in one line, a resume of a ``.partial`` that another input or other settings wrote; ``signature``:
    compare the signatures too (they are known once the models load)."""
    partial = f"{output}.partial"
    if saved is None:
        raise ResumeError("resume", f"{partial} has no readable record of its run ({record_path(output).name}): it "
                                    f"cannot be continued safely; score it again from the start instead")
    was, given = saved.input, now.input
    if was.get("path") != given.get("path"):
        raise ResumeError("resume", f"{partial} holds rows of {was.get('path')}, not of {given.get('path')}; give "
                                    f"that input, or score it again from the start instead")
    if (was.get("size"), was.get("sha256")) != (given.get("size"), given.get("sha256")):
        raise ResumeError("resume", f"{given.get('path')} has changed since {partial} was begun ({was.get('size')} "
                                    f"-> {given.get('size')} bytes, other content); score it again from the start")
    if saved.rows != now.rows:
        changed = sorted(k for k in {*saved.rows, *now.rows} if saved.rows.get(k) != now.rows.get(k))
        raise ResumeError("resume", f"{partial} was begun with other row settings ({', '.join(changed)}: "
                                    f"{[saved.rows.get(k) for k in changed]}); resume with the same ones")
    if signature and saved.signature != now.signature:
        raise ResumeError("resume", f"{partial} was scored with other settings (signature {saved.signature}, now "
                                    f"{now.signature}); resume with the same ones, or score it again from the start")


def committed_rows(partial: str | Path | IO[bytes],
                   on_row: Optional[Callable[[dict[str, Any]], None]] = None) -> tuple[int, int]:
    """``(rows, bytes)``: the complete rows at the start of a ``.partial`` (a path or a binary file open at its
    start) and the bytes they take. A row counts when its line ends in a newline, holds a JSON object and its ``row``
    is its position; the first line that does not (a line torn by a kill) and all after it do not count. ``on_row``
    gets each counted row."""
    n = size = 0
    with (open(partial, "rb") if isinstance(partial, (str, Path)) else contextlib.nullcontext(partial)) as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                row = json.loads(line)
            except ValueError:
                break
            if not isinstance(row, dict) or row.get("row") != n or "status" not in row:
                break
            if on_row is not None:
                on_row(row)
            n, size = n + 1, size + len(line)
    return n, size


class PartialRows:
    """``OUTPUT.partial``, the file of a run's rows, opened once before the models load and written through that
    descriptor to the end: a link planted there meanwhile is never followed, and a link, a hard link or another
    user's file there is refused (:func:`~q2_plugins.io.outputs.open_own`) before any model loads. It is created when
    missing; one a stopped run left is kept as it is until :meth:`keep` or :meth:`begin`."""

    def __init__(self, output: str | Path, setting: str = "output") -> None:
        self.output, self.path = str(output), partial_path(output)
        self.created = not os.path.lexists(self.path)
        self.fd: Optional[int] = open_own(self.path, append=True, read=True, setting=setting)

    def committed(self, on_row: Optional[Callable[[dict[str, Any]], None]] = None) -> tuple[int, int]:
        """:func:`committed_rows` of the open file."""
        assert self.fd is not None
        with os.fdopen(os.dup(self.fd), "rb") as f:
            f.seek(0)
            return committed_rows(f, on_row)

    def keep(self, on_row: Optional[Callable[[dict[str, Any]], None]] = None) -> int:
        """Cut the file after its complete rows (:func:`committed_rows`) and return how many it keeps."""
        n, size = self.committed(on_row)
        self._cut(size)
        return n

    def begin(self) -> None:
        """Empty the file: the run writes its rows from the first."""
        self._cut(0)

    def _cut(self, size: int) -> None:
        """The file cut to ``size`` bytes, the next write at its end."""
        assert self.fd is not None
        os.ftruncate(self.fd, size)
        os.lseek(self.fd, size, os.SEEK_SET)

    def result_file(self, kept: int) -> ResultFile:
        """The :class:`~q2_plugins.io.outputs.ResultFile` that writes the rows after the ``kept`` ones through the
        open file (it owns the descriptor from here on)."""
        fd, self.fd = self.fd, None
        return ResultFile(self.output, kept=kept, fd=fd)

    def close(self) -> None:
        """The run stopped before writing a row: close the file, removing it when this run made it (empty)."""
        if self.fd is None:
            return
        try:
            if self.created and os.fstat(self.fd).st_size == 0 and os.path.samestat(os.fstat(self.fd),
                                                                                      os.lstat(self.path)):
                self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def skip(rows: Iterator[dict[str, Any]], n: int) -> int:
    """Read past the first ``n`` of ``rows``; returns how many there were (fewer when the input is shorter)."""
    done = 0
    for _ in range(n):
        if next(rows, None) is None:
            break
        done += 1
    return done


def resumable_on_ray(job: Any) -> Optional[str]:
    """Why the Ray engine cannot resume ``job`` (None when it can): every output it writes keeps its scored rows as
    it goes (:func:`ray_stages`), but only a JSONL / CSV / TSV input file has records with positions (``row``) to
    continue after."""
    if not job.output:
        return "the run writes no output"
    kind = job.input_format or FORMATS.get(format_suffix(job.input))
    if kind not in ("jsonl", "csv", "tsv") or Path(job.input).is_dir():
        return f"{job.input} is no JSONL / CSV / TSV file: score again"
    return None


def ray_stages(job: Any) -> bool:
    """Whether the Ray engine stages ``job``'s scored blocks in the folder ``OUTPUT.partial/`` (one Arrow file per
    block, the result files written from them at the end): every output but one JSONL file without filter mode,
    whose rows go to the file ``OUTPUT.partial`` as the blocks finish."""
    if not job.output:
        return False
    return job.keep_min_score is not None or Path(job.output).suffix.lower() not in suffixes("jsonl")


# -- disk space ----------------------------------------------------------------------------------------------------
def estimated_output_bytes(input_bytes: int, explain: bool) -> int:
    return int(input_bytes * (EXPLAINED_FACTOR if explain else OUTPUT_FACTOR))


def check_free_space(output: str | Path, input_bytes: int, *, explain: bool, written: int = 0,
                     setting: str = "output", copies: int = 1) -> None:
    """Refuse, before the work, an output whose folder has less free space than its estimated size (less what a
    resumed ``.partial`` already holds), in one line with both figures. ``copies``: 2 when the rows are held twice
    at the end (the Ray engine's staged blocks and the result files written from them)."""
    import shutil

    need = max(0, copies * estimated_output_bytes(input_bytes, explain) - written)
    folder = Path(output).parent if not Path(output).is_dir() else Path(output)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < need:
        factor = EXPLAINED_FACTOR if explain else OUTPUT_FACTOR
        raise SettingError(setting, f"the folder {folder} has {_mb(free)} free, and {output} needs about {_mb(need)} "
                                    f"(the input's {_mb(input_bytes)} x {factor:g}"
                                    f"{' with explanations' if explain else ''}"
                                    f"{', twice: the staged blocks and the results' if copies == 2 else ''}); free "
                                    f"some space or write elsewhere")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e5 else f"{n:,} bytes"


# -- a stopped run ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoppedRun:
    """Where a stopped run left its rows: ``rows`` committed to ``partial`` (None: written to standard output),
    ``output`` left as it was; ``failed`` names the file whose write failed (a full disk), when one did."""

    rows: int
    partial: Optional[Path]
    output: Optional[str]
    failed: Optional[str] = None
    text: Optional[str] = None  # what became of the rows, when there is nothing to resume from

    @property
    def resumable(self) -> bool:
        return self.partial is not None and self.text is None

    def where(self) -> str:
        if self.text is not None:
            return self.text
        if self.partial is None:
            return f"{self.rows} rows written to standard output"
        return f"{self.rows} rows committed to {self.partial}, {self.output} left as it was"


def mark_stopped(error: BaseException, stopped: StoppedRun) -> BaseException:
    error.q2_stopped_run = stopped  # type: ignore[attr-defined]
    return error


def stopped_run(error: BaseException) -> Optional[StoppedRun]:
    """The :class:`StoppedRun` a run attached to the exception that stopped it (None for any other exception)."""
    return getattr(error, "q2_stopped_run", None)

