"""A persistent cache of model outputs keyed by stage, component identity, stage settings and input.

SQLite in WAL mode, committed after every batch, so a killed run keeps everything computed before it died and the
next run resumes from there. Values are JSON. Nothing is ever written inside site-packages: the location is given.

Every entry carries a check: a hash of its key and its value. An entry whose check fails on reading (the file was
edited, or damaged) is a miss, computed again and counted in :attr:`Q2Cache.failed`; a cache never gives a value
that was not stored under its key. A cache that cannot be opened or written raises :class:`CacheError` naming it.

The check guards against damage, not against a writer: anyone who can write the cache can store a value with its
check. So a cache is trusted with the scores it gives, and :func:`check_cache_dir` refuses (before any model loads)
a folder, or a cache file in it, that another user owns or that others can write, unless it is named trusted
(``cache_trusted``: the user vouches for everyone who can write it; ``docs/failures.md``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from q2_plugins.metric.errors import SETTING, NamesSetting

__all__ = ["Q2Cache", "CacheError", "UntrustedCacheError", "check_cache_dir", "CACHE_FILES"]

SCHEMA_VERSION = 2  # 2: every entry carries a check (version 1 entries had none; their file is not read)


class CacheError(NamesSetting, OSError):
    """The cache file cannot be opened or written (unreadable, corrupt, read-only); the message names it and the
    setting ``cache_dir``."""


class UntrustedCacheError(NamesSetting, ValueError):
    """The cache folder (or a file of it) belongs to another user or others can write it, and it is not named
    trusted: its entries could have been written by anyone who can write it; ``setting`` is ``cache_trusted``."""


#: the files of a cache in its folder (SQLite's write-ahead log and shared memory beside the database)
CACHE_FILES = tuple(f"q2-cache-v{SCHEMA_VERSION}.sqlite{end}" for end in ("", "-wal", "-shm", "-journal"))


def check_cache_dir(directory: str | os.PathLike, trusted: bool = False) -> None:
    """Refuse, in one line, a cache folder that another user owns or that others (its group, everyone) can write,
    or a cache file in it that is a link, another user's or writable by others: anyone who can write there can
    change the scores it gives. ``trusted`` (the ``cache_trusted`` setting) accepts it as it is. A folder that does
    not exist yet passes (:class:`Q2Cache` makes it, writable by its user alone)."""
    if trusted or not hasattr(os, "geteuid"):
        return
    import stat

    folder = Path(directory).expanduser()
    me = os.geteuid()
    for path in (folder, *(folder / name for name in CACHE_FILES)):
        try:
            st = os.stat(path) if path == folder else os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return  # (opening it says what is wrong)
        what = "the cache folder" if path == folder else "the cache file"
        if stat.S_ISLNK(st.st_mode):
            why = "it is a link"
        elif st.st_uid != me:
            why = f"another user owns it (uid {st.st_uid})"
        elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            why = f"others can write it (mode {stat.S_IMODE(st.st_mode):o})"
        else:
            continue
        raise UntrustedCacheError(f"{what} {path}: {why}, and whoever can write it can change the scores it gives; "
                                  f"use a folder only you can write, or {SETTING} if you trust everyone who can "
                                  f"(docs/failures.md)", setting="cache_trusted")


class Q2Cache:
    """Key-value store shared by the pipeline stages (``namespace`` separates stages and model settings).
    ``trusted``: use a folder others can write (see :func:`check_cache_dir`)."""

    def __init__(self, directory: str | os.PathLike, *, trusted: bool = False) -> None:
        self.directory = Path(directory).expanduser()
        self.path = self.directory / f"q2-cache-v{SCHEMA_VERSION}.sqlite"
        self._lock = threading.Lock()
        check_cache_dir(self.directory, trusted)
        try:
            if not self.directory.exists():
                self.directory.parent.mkdir(parents=True, exist_ok=True)
                self.directory.mkdir(mode=0o700, exist_ok=True)  # (writable by its user alone, whatever the umask)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                               "checksum TEXT NOT NULL)")
            self._conn.execute("INSERT OR REPLACE INTO kv VALUES ('', '', '')")  # can it be written? (undone)
            self._conn.rollback()
            self._conn.execute("SELECT key, value, checksum FROM kv LIMIT 1").fetchall()
        except (sqlite3.Error, OSError) as e:
            raise CacheError(self._unusable(e), setting="cache_dir") from None
        self.hits = 0
        self.misses = 0
        self.failed = 0  # entries whose check failed: counted as misses too

    def _unusable(self, e: BaseException) -> str:
        reason = " ".join(str(e).split()) or type(e).__name__
        return (f"the cache {self.path} cannot be used ({reason}); give another {SETTING} on a "
                f"writable disk, or delete the file if it is damaged")

    @staticmethod
    def _key(namespace: str, item: Any) -> str:
        # (surrogatepass: any Python string has a key, lone surrogates included; valid text keeps its UTF-8 bytes)
        return hashlib.sha256(json.dumps([namespace, item], ensure_ascii=False).encode("utf-8", "surrogatepass"))\
            .hexdigest()

    @staticmethod
    def _check(key: str, value: str) -> str:
        """An entry's check: its value is the one stored under its key."""
        return hashlib.sha256(f"{key}\n{value}".encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def get_many(self, namespace: str, items: Sequence[Any]) -> list[Optional[Any]]:
        keys = [self._key(namespace, it) for it in items]
        found: dict[str, Any] = {}
        failed = 0
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                q = f"SELECT key, value, checksum FROM kv WHERE key IN ({','.join('?' * len(chunk))})"
                for k, v, check in self._conn.execute(q, chunk):
                    value = self._value(k, v, check)
                    if value is None:
                        failed += 1
                    else:
                        found[k] = value
        out = [found.get(k) for k in keys]
        hits = sum(o is not None for o in out)
        self.hits += hits
        self.misses += len(out) - hits
        self.failed += failed
        return out

    def _value(self, key: str, text: Any, check: Any) -> Optional[Any]:
        """The stored value, or None when its check fails (or it is not JSON any more)."""
        if not isinstance(text, str) or check != self._check(key, text):
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    def counts(self) -> dict[str, int]:
        """This cache's hits, misses and failed checks so far (for a run's summary)."""
        return {"hits": self.hits, "misses": self.misses, "failed_checks": self.failed}

    def put_many(self, namespace: str, items: Iterable[tuple[Any, Any]]) -> None:
        pairs = [(self._key(namespace, it), json.dumps(val)) for it, val in items]  # ASCII: any string stores
        rows = [(k, v, self._check(k, v)) for k, v in pairs]
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO kv (key, value, checksum) VALUES (?, ?, ?)", rows)
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM kv").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
