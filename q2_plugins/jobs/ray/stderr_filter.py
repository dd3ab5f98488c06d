"""Standard error with named lines left out, at the file-descriptor level: for lines that a library's C++ core
writes straight to file descriptor 2, which Python's logging cannot reach."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from typing import Iterator, Sequence

__all__ = ["stderr_without", "plain_cause"]

# The filter runs in its own small process, so that whatever this process writes just before it dies (a C++ check
# that aborts, a traceback) still reaches the real standard error: the filter reads until every writer has closed
# the pipe. It ignores SIGINT and SIGTERM (sent to the whole process group by Ctrl-C or a timeout): it ends when
# its input does. A line held back without its newline is passed on after 0.1 s of quiet; a progress bar redrawn in
# place with "\r" at once: held, a line another process wrote next (Ray's core worker's, left out) would join it, and
# the bar's state would go with that line.
_FILTER = r"""
import json, os, select, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
rules = [[n.encode() for n in rule] for rule in json.loads(sys.argv[1])]
def put(data):
    while data:
        try:
            data = data[os.write(2, data):]
        except BrokenPipeError:
            sys.exit(0)
held = b""
while True:
    if held and not select.select([0], [], [], 0.1)[0]:
        put(held)
        held = b""
        continue
    try:
        chunk = os.read(0, 65536)
    except OSError:  # a pseudo-terminal whose other side has closed
        chunk = b""
    if not chunk:
        break
    *lines, held = (held + chunk).split(b"\n")
    put(b"".join(line + b"\n" for line in lines if not any(all(n in line for n in rule) for rule in rules)))
    if b"\r" in held:  # a bar redrawn in place: passed on now, so another process's line is never joined to it
        put(held)
        held = b""
put(held)
"""


@contextlib.contextmanager
def stderr_without(*rules: Sequence[str]) -> Iterator[None]:
    """While the block runs, file descriptor 2 (Python's ``sys.stderr`` and every library that writes there) goes
    through a filter that leaves out each line holding every string of one of ``rules`` and passes everything else
    on as it comes. On a terminal the block still writes to a terminal (a pseudo-terminal of the same size), so
    libraries that draw progress bars only on terminals still do. Processes started inside the block inherit the
    filtered descriptor; the filter ends once they and the block have closed it."""
    if not rules:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.isatty(saved)
    if terminal:
        import fcntl
        import termios
        import tty

        read, write = os.openpty()
        tty.setraw(write)  # bytes pass unchanged (no "\n" -> "\r\n")
        with contextlib.suppress(OSError):
            fcntl.ioctl(write, termios.TIOCSWINSZ, fcntl.ioctl(saved, termios.TIOCGWINSZ, b"\0" * 8))
    else:
        read, write = os.pipe()
    try:
        child = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, json.dumps([list(r) for r in rules])],
                                 stdin=read, stdout=subprocess.DEVNULL, stderr=saved)
    except BaseException:
        os.close(read)
        os.close(write)
        os.close(saved)
        raise
    os.close(read)
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)  # it has written everything the block wrote (unless a child of the block lives on)


#: a terminal's colour and cursor codes (Ray colours the tracebacks it forwards)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def plain_cause(error: BaseException) -> str:
    """An exception as one plain line: ``Type: message``, its first line only, without terminal colour codes, at
    most 300 characters; for Ray's wrapper of a task's error, its cause."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException) and cause is not error:
        error = cause
    text = _ANSI.sub("", str(error)).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {first}"[:300] if first else type(error).__name__
