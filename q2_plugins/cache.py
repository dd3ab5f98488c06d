"""A persistent cache of model outputs keyed by stage, component identity, stage settings and input.

SQLite in WAL mode, committed after every batch, so a killed run keeps everything computed before it died and the
next run resumes from there. Values are JSON. Nothing is ever written inside site-packages: the location is given.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

__all__ = ["Q2Cache"]

SCHEMA_VERSION = 1


class Q2Cache:
    """Key-value store shared by the pipeline stages (``namespace`` separates stages and model settings)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / f"q2-cache-v{SCHEMA_VERSION}.sqlite"
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._conn.commit()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(namespace: str, item: Any) -> str:
        # (surrogatepass: any Python string has a key, lone surrogates included; valid text keeps its UTF-8 bytes)
        return hashlib.sha256(json.dumps([namespace, item], ensure_ascii=False).encode("utf-8", "surrogatepass"))\
            .hexdigest()

    def get_many(self, namespace: str, items: Sequence[Any]) -> list[Optional[Any]]:
        keys = [self._key(namespace, it) for it in items]
        found: dict[str, Any] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                q = f"SELECT key, value FROM kv WHERE key IN ({','.join('?' * len(chunk))})"
                for k, v in self._conn.execute(q, chunk):
                    found[k] = json.loads(v)
        out = [found.get(k) for k in keys]
        hits = sum(o is not None for o in out)
        self.hits += hits
        self.misses += len(out) - hits
        return out

    def put_many(self, namespace: str, items: Iterable[tuple[Any, Any]]) -> None:
        rows = [(self._key(namespace, it), json.dumps(val)) for it, val in items]  # ASCII: any string stores
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", rows)
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM kv").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
