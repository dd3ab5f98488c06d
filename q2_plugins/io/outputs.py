"""Writing result files. Writing never destroys data: rows go to ``FILE.partial`` beside the target, renamed to
``FILE`` once the run is complete (see ``docs/failures.md``); every path a run writes is checked before it starts.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, Optional, Sequence

from q2_plugins.io.inputs import InputFormatError, named_errors
from q2_plugins.metric.errors import SETTING, NamesSetting, SettingError

__all__ = ["OutputClashError", "json_line", "ResultFile", "write_json_atomic", "write_jsonl_atomic",
           "write_text_atomic", "atomic_file", "meta_path", "same_file", "partial_path", "files_written",
           "check_outputs", "check_writable", "html_files", "UnwritablePathError", "lock_path", "record_path",
           "UnsafePathError", "PartialReplacedError", "open_own", "open_new", "replace_own", "check_own_files",
           "open_own_folder", "open_folders", "retire_results", "say_replaced"]


def _json_safe(value: Any) -> Any:
    """``value`` with what JSON cannot hold made representable: non-finite floats as strings, other objects as
    their ``str``."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def json_line(record: dict[str, Any]) -> str:
    """One JSON line (no newline) for any record: valid JSON and encodable as UTF-8, whatever the values hold
    (``NaN`` becomes ``"nan"``, lone surrogates are written as ``\\ud800`` escapes)."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = json.dumps(_json_safe(record), ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(json.loads(text), ensure_ascii=True)
    return text


def meta_path(output: str | Path) -> Path:
    """The sidecar of a result file: ``FILE.meta.json`` (summary, signature, config, version, rows)."""
    output = Path(output)
    return output.with_name(output.name + ".meta.json")


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file beside it, renamed when complete."""
    write_text_atomic(path, json.dumps(_json_safe(data), indent=2, allow_nan=False) + "\n")


def write_jsonl_atomic(path: str | Path, rows: Iterable[Mapping[str, Any]], *, setting: str = "output") -> int:
    """Write ``rows`` as JSON lines (:func:`json_line`) to ``path`` through :func:`atomic_file` (a link at ``path``
    is replaced, never written through); returns the number of rows."""
    count = 0
    with atomic_file(path, setting=setting) as f:
        for row in rows:
            f.write(json_line(row) + "\n")
            count += 1
    return count


def write_text_atomic(path: str | Path, text: str, *, setting: str = "output", dir_fd: Optional[int] = None) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (created new: a link or another user's file
    there is refused), renamed into place when complete (:func:`atomic_file`)."""
    with atomic_file(path, setting=setting, dir_fd=dir_fd) as f:
        f.write(text)


@contextlib.contextmanager
def atomic_file(path: str | Path, *, binary: bool = False, setting: str = "output",
                dir_fd: Optional[int] = None) -> Iterator[IO[Any]]:
    """The one way a command writes a file: a file object (text, UTF-8; ``binary``: bytes) on a temporary file
    beside ``path``, created new (a link or another user's file there is refused, :class:`UnsafePathError`), renamed
    over ``path`` when the block ends (so a link at ``path`` is replaced, never written through); removed when the
    block fails, ``path`` left as it was. ``dir_fd``: ``path``'s folder, open (:func:`open_folders`)."""
    path = Path(path)
    tmp = tmp_path(path)
    with named_errors(tmp):
        fd = open_new(tmp, setting=setting, dir_fd=dir_fd)
        try:
            with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(_at(tmp, dir_fd), dir_fd=dir_fd)
            raise
    replace_own(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


class ResultFile:
    """Rows of a result file, written to ``FILE.partial`` and renamed to ``FILE`` by :meth:`commit`; until then an
    existing ``FILE`` is untouched. ``-`` writes to standard output."""

    def __init__(self, target: str | Path, *, kept: int = 0, fd: Optional[int] = None) -> None:
        """``fd``: ``FILE.partial`` opened already (:func:`open_own`), positioned after the ``kept`` rows; it is
        written through, never opened again by its name."""
        self.stdout = str(target) == "-"
        self.target = Path(target)
        self.partial = partial_path(self.target)
        self.rows = kept  # kept: the rows a resumed run keeps (FILE.partial already holds them; rows go after them)
        if not self.stdout and fd is None:
            fd = open_own(self.partial, append=bool(kept))
        self._f: IO[str] = sys.stdout if self.stdout else os.fdopen(fd, "a" if kept else "w", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json_line(record) + "\n")
        self.rows += 1

    def flush(self) -> None:
        """The rows so far are on disk (a run killed after this keeps them for ``--resume``)."""
        self._f.flush()
        fileno = getattr(self._f, "fileno", None)
        if not self.stdout and fileno is not None:
            os.fsync(fileno())

    def commit(self) -> None:
        """The run is complete: ``FILE.partial`` becomes ``FILE``."""
        self._f.flush()
        if not self.stdout:
            os.fsync(self._f.fileno())
            written = os.fstat(self._f.fileno())
            self._f.close()
            try:
                same = os.path.samestat(written, os.lstat(self.partial))
            except OSError:
                same = False
            if not same:  # its name was given to another file (a link?) while the run wrote it: that is not ours
                raise PartialReplacedError("output", f"refusing to rename {self.partial} to {self.target}: it was "
                                                     f"replaced by another file while the run wrote it (its rows are "
                                                     f"lost with the file it replaced); remove it and run again")
            replace_own(self.partial, self.target)

    def abandon(self) -> Optional[Path]:
        """The run failed: close the partial file and return its path (None for standard output). Never raises:
        on a full disk the close fails too, and the path must still be named."""
        try:
            self._f.flush() if self.stdout else self._f.close()
        except (OSError, ValueError):
            pass
        return None if self.stdout else self.partial


def partial_path(output: str | Path) -> Path:
    """Where a result file's rows go until the run is complete: ``FILE.partial``."""
    output = Path(output)
    return output.with_name(output.name + ".partial")


def lock_path(output: str | Path) -> Path:
    """The lock a run holds on a result file while it writes it: ``FILE.lock`` (:mod:`q2_plugins.jobs.partial`)."""
    return Path(f"{output}.lock")


def record_path(output: str | Path) -> Path:
    """What a result file's ``.partial`` holds rows of (input, signature), for a resume: ``FILE.resume.json``."""
    return Path(f"{output}.resume.json")


def tmp_path(path: str | Path) -> Path:
    """The temporary file :func:`write_json_atomic` and the report writer rename to ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".tmp")


def files_written(output: str | Path, *, sidecar: bool = True) -> list[Path]:
    """Every file a run writes for the result file ``output``: itself, its ``.partial``, and (with ``sidecar``)
    its ``.meta.json`` and that file's temporary, its ``.lock`` and ``.resume.json``."""
    paths = [Path(output), partial_path(output)]
    run = [lock_path(output), record_path(output), tmp_path(record_path(output))]
    return paths + ([meta_path(output), tmp_path(meta_path(output)), *run] if sidecar else [])


def html_files(path: str | Path) -> list[Path]:
    """An HTML report, the temporary files its writer may make beside it and the lock a run holds on it."""
    html = Path(path)
    return [html, tmp_path(html), html.with_name(f".{html.name}.{os.getpid()}.tmp"), lock_path(html)]


def _inside(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies under the directory ``b`` (links resolved)."""
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents


def check_outputs(inputs: Sequence[str | Path], outputs: Sequence[tuple[str, str | Path, Sequence[str | Path]]]
                  ) -> None:
    """Refuse a run that would write over one of its inputs, before anything is opened.

    ``outputs`` gives, per result, the setting that names it, its path, and every file or directory written for it;
    each is compared with every input (the same file through links, hard links and other spellings; a file inside
    a directory written to or read from). Raises :class:`OutputClashError` in one line naming both."""
    for setting, named, written in outputs:
        for path in map(Path, written):
            for given in inputs:
                relation = _relation(Path(given), path)
                if relation:
                    what = "" if path == Path(str(written[0])) else f" would write {path}, which"
                    raise OutputClashError(f"{SETTING} {named}{what} {relation} {given}; name another path, so "
                                           f"that the input is never overwritten", setting)


def say_replaced(command: str, outputs: Sequence[tuple[str, str | Path]]) -> None:
    """Say on standard error, once per output, which existing file (or folder) a run of ``command`` will replace:
    ``outputs`` gives each output's setting and path (the path is what the line names). An existing output is
    replaced without a flag, as ``sort -o`` does (``q2 score`` renames the new one into place once it is complete);
    this line keeps that from happening without a word."""
    for _setting, path in outputs:
        if str(path) != "-" and (Path(path).is_file() or Path(path).is_dir()):
            print(f"{command}: {path} exists; a complete run replaces it (name another path to keep it)",
                  file=sys.stderr, flush=True)


def _relation(src: Path, path: Path) -> str:
    """How a path written to clashes with an input (empty when it does not)."""
    kind = "directory" if src.is_dir() else "file"
    if (src.exists() and path.exists() and same_file(src, path)) or src.resolve() == path.resolve():
        return f"is the input {kind}"
    if _inside(src, path):
        return f"holds the input {kind}"
    if src.is_dir() and _inside(path, src):
        return "lies in the input directory"
    return ""


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (through links and relative paths too)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()



def check_writable(path: str | Path, setting: str, *, folder: bool = False, make_parents: bool = False) -> None:
    """Make sure, before any work, that a run can write ``path``: a file in an existing folder (the commands ask
    this of every output file; ``make_parents`` accepts a folder its writer makes) or, with ``folder``, a folder to
    fill (made by its writer when missing). A file is created in the folder (or a folder in the nearest one that
    exists) and removed again, so a read-only folder is found whoever runs (root too); nothing is left behind.
    Raises :class:`UnwritablePathError` naming ``setting`` in one line."""
    import tempfile

    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UnwritablePathError(setting, f"{path} is a file, not a folder; name a folder")
    if not folder and path.is_dir():
        raise UnwritablePathError(setting, f"{path} is a folder; name a file")
    where = path if folder else path.parent
    existing = next((p for p in (where, *where.parents) if p.exists() or p.is_symlink()), Path("."))
    if not existing.is_dir():
        raise UnwritablePathError(setting, f"cannot write {path}: {existing} is a file, not a folder")
    if existing != where and not (folder or make_parents):
        raise UnwritablePathError(setting, f"cannot write {path}: the folder {where} does not exist; make it "
                                           f"first (mkdir -p {where}) or name a file in an existing folder")
    try:
        if existing == where:
            fd, probe = tempfile.mkstemp(prefix=".q2-write-check-", dir=where)
            os.close(fd)
            os.unlink(probe)
        else:  # the folders to make: the nearest one that exists must take a new folder
            os.rmdir(tempfile.mkdtemp(prefix=".q2-write-check-", dir=existing))
    except OSError as e:
        what = "written" if existing == where else f"made in {existing}"
        raise UnwritablePathError(setting, f"cannot write {path}: the folder {where} cannot be {what} "
                                           f"({e.strerror or e})") from None


class OutputClashError(InputFormatError, NamesSetting):
    """A path a run would write is, holds or lies in one of its inputs; ``setting`` names the output."""

    def __init__(self, message: str, setting: str) -> None:
        NamesSetting.__init__(self, message, setting)


class UnwritablePathError(SettingError):
    """A path a run would write cannot be written (its folder cannot be created or written); ``setting`` names it."""


class UnsafePathError(UnwritablePathError):
    """A file a run would write beside its output is a link, not a regular file, or another user's file: writing it
    could write wherever the link points (anyone who can write the folder can plant one), so the run refuses it."""


class PartialReplacedError(UnsafePathError):
    """``FILE.partial`` was replaced by another file (a link?) while the run wrote it: nothing is renamed, and the
    rows written went with the file it replaced (nothing to resume)."""


# -- files written beside an output: never through a link, never another user's file ------------------------------
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _refuse(path: Path, why: str, setting: str) -> UnsafePathError:
    return UnsafePathError(setting, f"refusing to write {path}: {why}; remove it (or name another output) and run "
                                    f"again")


def _checked_fd(fd: int, path: Path, setting: str) -> int:
    """``fd`` when it is a regular file of this user with one name; else it is closed and the refusal raised."""
    import stat

    st = os.fstat(fd)
    why = ("it is not a regular file" if not stat.S_ISREG(st.st_mode)
           else f"it belongs to another user (uid {st.st_uid})" if hasattr(os, "geteuid") and st.st_uid != os.geteuid()
           else f"it has {st.st_nlink} names (a hard link to another file)" if st.st_nlink > 1 else None)
    if why is None:
        return fd
    os.close(fd)
    raise _refuse(path, why, setting)


def _link_target(path: Path, dir_fd: Optional[int] = None) -> str:
    try:
        return os.readlink(_at(path, dir_fd), dir_fd=dir_fd)
    except OSError:
        return "?"


def _at(path: Path, dir_fd: Optional[int]) -> str | Path:
    """How ``path`` is reached: by its name in the open folder ``dir_fd`` (so a folder swapped for a link meanwhile is
    never followed), else by its path."""
    return path.name if dir_fd is not None else path


def _is_link(path: Path, dir_fd: Optional[int]) -> bool:
    import stat

    try:
        return stat.S_ISLNK(os.lstat(_at(path, dir_fd), dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def open_own(path: str | Path, *, append: bool = False, read: bool = False, setting: str = "output",
             dir_fd: Optional[int] = None) -> int:
    """A file descriptor to write ``path``, a file of this run beside its output (a ``.partial``, a ``.lock``):
    created when missing (exclusively), else opened without following a link, and refused
    (:class:`UnsafePathError`, one line naming it) when it is a link, no regular file, another user's file or a
    hard link; truncated unless ``append``. ``read``: open it for reading too. ``dir_fd``: ``path``'s folder, open
    (:func:`open_own_folder`): the file is reached by its name in it."""
    path = Path(path)
    access = os.O_RDWR if read else os.O_WRONLY
    at = _at(path, dir_fd)
    with named_errors(path):
        try:
            return os.open(at, access | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            pass
        try:
            fd = os.open(at, access | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
        except OSError as e:
            if _is_link(path, dir_fd) or e.errno == errno.ELOOP:
                raise _refuse(path, f"it is a link (to {_link_target(path, dir_fd)})", setting) from None
            raise
        _checked_fd(fd, path, setting)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        if not append:
            os.ftruncate(fd, 0)
        else:
            os.lseek(fd, 0, os.SEEK_END)
        return fd


def check_own_files(paths: Sequence[str | Path], setting: str, *, folders: Sequence[str | Path] = ()) -> None:
    """Refuse, before any work, a run whose files beside its output (``paths``: each ``.partial``, ``.lock``,
    temporary file) include a link (a hard link too), something that is no regular file, or another user's file: one
    line naming it (:class:`UnsafePathError`). Missing files pass; they are created exclusively when written
    (:func:`open_own`).
    A path of ``paths`` also in ``folders`` may be a folder of this user too (:func:`open_own_folder`)."""
    import stat

    may_be_folders = {Path(f) for f in folders}
    for path in map(Path, paths):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):  # nothing there (a folder that is not one: check_writable's)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(path, f"it is a link (to {_link_target(path)})", setting)
        if not stat.S_ISREG(st.st_mode) and not (stat.S_ISDIR(st.st_mode) and path in may_be_folders):
            raise _refuse(path, "it is not a regular file", setting)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise _refuse(path, f"it has {st.st_nlink} names (a hard link to another file)", setting)
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise _refuse(path, f"it belongs to another user (uid {st.st_uid})", setting)


def open_new(path: str | Path, *, setting: str = "output", dir_fd: Optional[int] = None) -> int:
    """A file descriptor to write the temporary file ``path`` (renamed over its target when complete): always a new
    file, created exclusively; one a killed run of this user left is removed first, and a link or another user's
    file there is refused (:class:`UnsafePathError`). ``dir_fd``: as :func:`open_own`'s."""
    path = Path(path)
    at = _at(path, dir_fd)
    with named_errors(path):
        for _ in range(3):
            try:
                return os.open(at, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                pass
            os.close(open_own(path, setting=setting, dir_fd=dir_fd))  # (refuses what is not ours to remove)
            os.unlink(at, dir_fd=dir_fd)
    raise _refuse(path, "it keeps coming back after being removed (is another program writing here?)", setting)


def replace_own(src: str | Path, target: str | Path, *, src_dir_fd: Optional[int] = None,
                dst_dir_fd: Optional[int] = None) -> None:
    """Rename the complete file ``src`` to ``target`` and make the rename durable (the folder synced). A
    ``*_dir_fd`` is that path's folder, open: the file is reached by its name in it (as :func:`open_own`)."""
    src, target = Path(src), Path(target)
    os.replace(_at(src, src_dir_fd), _at(target, dst_dir_fd), src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    if dst_dir_fd is not None:
        _sync(dst_dir_fd)
        return
    try:
        fd = os.open(target.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        _sync(fd)
    finally:
        os.close(fd)


def _sync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


def _enter_folder(path: Path, dir_fd: Optional[int], setting: str, mode: int) -> int:
    """A descriptor of the folder ``path`` (by its name in ``dir_fd`` when given), made with ``mode`` when missing and
    opened without following a link: a link or a file there is refused (:class:`UnsafePathError`)."""
    at = _at(path, dir_fd)
    with contextlib.suppress(FileExistsError):
        os.mkdir(at, mode, dir_fd=dir_fd)
    try:
        return os.open(at, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if _is_link(path, dir_fd) or e.errno == errno.ELOOP:
            raise _refuse(path, f"it is a link (to {_link_target(path, dir_fd)})", setting) from None
        if e.errno == errno.ENOTDIR:
            raise _refuse(path, "it is not a folder", setting) from None
        raise


def open_own_folder(path: str | Path, *, setting: str = "output") -> int:
    """A file descriptor of the folder ``path`` of this run beside its output (the Ray engine's staged blocks),
    made (mode 0700) when missing: an existing one must be a real folder of this user, never a link, else it is
    refused (:class:`UnsafePathError`, one line naming it); it is then made 0700 too. Reach the files in it
    through the descriptor (``dir_fd`` of :func:`open_own`, :func:`open_new`, :func:`replace_own`)."""
    import stat

    path = Path(path)
    with named_errors(path):
        fd = _enter_folder(path, None, setting, 0o700)
    st = os.fstat(fd)
    why = ("it is not a folder" if not stat.S_ISDIR(st.st_mode)
           else f"it belongs to another user (uid {st.st_uid})" if hasattr(os, "geteuid") and st.st_uid != os.geteuid()
           else None)
    if why is not None:
        os.close(fd)
        raise _refuse(path, why, setting)
    os.fchmod(fd, 0o700)
    return fd


def open_folders(base: str | Path, parts: Sequence[str], *, setting: str = "output") -> int:
    """A file descriptor of the folder ``base/parts[0]/parts[1]/...``: each part made when missing and entered by its
    name in the one before without following a link, so a link planted at any of them is refused
    (:class:`UnsafePathError`, one line naming it) instead of leading the writes elsewhere. ``base`` is the folder
    the user named (made when missing). Write the files in it through the descriptor (``dir_fd`` of
    :func:`atomic_file`); close it when done."""
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    path = base
    try:
        for part in parts:
            if part in ("", ".", "..") or "/" in part or os.sep in part:
                raise _refuse(path / part, "it is not a plain folder name", setting)
            path = path / part
            inner = _enter_folder(path, fd, setting, 0o777)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def retire_results(output: str | Path) -> None:
    """Remove the result file ``output`` of an earlier run (a link there: the link, never its target) before the new
    run's sidecar is written; a folder of part files is left to its writer."""
    path = Path(output)
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
