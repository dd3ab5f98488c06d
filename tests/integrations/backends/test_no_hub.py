"""Without network the default path fails at once: the hub is asked once whether it answers (no retries),
then the models load from the local Hugging Face cache only. Fresh processes, ``HF_HUB_OFFLINE`` unset,
``HF_ENDPOINT`` pointing at a local port that refuses or drops every connection."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.hub_fixtures import build_hub_cache

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "q2_plugins" / "data" / "sample.jsonl"


class DroppingServer:
    """A TCP port that accepts each connection and closes it without a word; counts the connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def run_default_path(tmp_path: Path, endpoint: str, cache: Path) -> tuple[subprocess.CompletedProcess, float]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:2]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(cache), HF_ENDPOINT=endpoint,
               PYTHONPATH=str(REPO), TOKENIZERS_PARALLELISM="false")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(rows), "--output",
                           str(tmp_path / "out.jsonl"), "--no-progress", "--format", "json", "--qg-max-length", "8"],
                          env=env, capture_output=True, text=True, timeout=600)
    return proc, time.perf_counter() - t0


def test_unreachable_hub_is_asked_once_then_the_run_stops(tmp_path):
    server = DroppingServer()
    try:
        proc, seconds = run_default_path(tmp_path, f"http://127.0.0.1:{server.port}", tmp_path / "empty-cache")
    finally:
        server.close()
    print(f"\nunreachable hub, empty cache: exit {proc.returncode} after {seconds:.1f} s "
          f"({server.connections} connection(s) to the hub)")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("q2 score: error")]
    assert line.startswith("q2 score: error: Cannot load the QG model 'mrm8488/t5-base-finetuned-question-generation-"
                           "ap' (setting --qg-model): OSError: the Hugging Face hub (http://127.0.0.1:")
    assert "cannot be reached and the model is not in the local cache" in line
    assert "fetch the models on a connected machine with `q2 prefetch`" in line
    assert server.connections == 1  # the probe; then no request at all (before: 14 connections, with retries)
    assert not (tmp_path / "out.jsonl").exists()


def test_refused_port_gives_the_same_message(tmp_path):
    port = closed_port()
    proc, seconds = run_default_path(tmp_path, f"http://127.0.0.1:{port}", tmp_path / "empty-cache")
    print(f"\nrefused port, empty cache: exit {proc.returncode} after {seconds:.1f} s")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"OSError: the Hugging Face hub (http://127.0.0.1:{port}: ConnectionRefusedError" in proc.stderr


def test_unreachable_hub_still_loads_what_the_cache_holds(tmp_path):
    cache = tmp_path / "hf-hub-cache"
    build_hub_cache(cache)
    proc, _ = run_default_path(tmp_path, f"http://127.0.0.1:{closed_port()}", cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["n"] == 2 and summary["n_errors"] == 0
    assert "|qg:hub:mrm8488/t5-base-finetuned-question-generation-ap@" in summary["signature"]
