"""The DeepEval / Ragas / DSPy suite runs offline: no API key, the frameworks' telemetry and analytics off (set
before they are imported, as docs/integrations.md tells users), and a fixture that records any attempt to open a
connection beyond this machine."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

os.environ["DEEPEVAL_TELEMETRY_OPT_OUT"] = "1"
os.environ["DEEPEVAL_UPDATE_WARNING_OPT_IN"] = "0"
os.environ["RAGAS_DO_NOT_TRACK"] = "true"
for key in ("OPENAI_API_KEY", "CONFIDENT_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(key, None)


@pytest.fixture
def no_network(monkeypatch, tmp_path) -> list:
    """The addresses of the connections the test tried to open beyond loopback (each refused); the test runs in
    ``tmp_path``, where the frameworks may write their run folders."""
    attempts: list = []
    connect = socket.socket.connect

    def refuse_remote(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost") or host.startswith("/")):
            return connect(self, address)
        attempts.append(address)
        raise OSError(f"the test refused a connection to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse_remote)
    monkeypatch.chdir(tmp_path)
    return attempts


@pytest.fixture
def run_example(model_workdir, doc_blocks):
    """``run_example(tag)``: the docs example tagged ``tag`` run as printed, in a fresh process, in the docs' working
    directory (tiny models at ``q2-models/...``), offline, with no API key and none of the opt-outs this suite sets
    (the example sets its own); returns its printed lines."""
    import subprocess
    import sys
    from pathlib import Path

    def run(tag: str) -> list[str]:
        (block,) = doc_blocks(tag)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("Q2_", "DEEPEVAL_", "RAGAS_"))}
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
        proc = subprocess.run([sys.executable, "-c", block[1]], cwd=model_workdir, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.splitlines()

    return run
