#!/usr/bin/env python
"""How long ``q2 score`` on the default models takes to fail without network, against the bare start-up cost.

Runs, each in a fresh process with an empty Hugging Face cache, ``HF_HUB_OFFLINE`` unset and ``HF_ENDPOINT`` at a
local port that refuses connections (``--endpoint``: or drops them, or never answers, or the real hub): ``fail``
(``q2 score`` on two rows, default models: it must exit 2 with the model-load message) and ``imports`` (the same
process start and imports of torch, transformers and spaCy, and nothing else), so the difference is what the hub
check and the failure cost. ``--repo DIR`` runs another checkout's code (an older commit, to compare). Wall and CPU
seconds of each, medians over ``--repeat`` runs.

    python benchmarks/bench_no_hub.py [--repeat 3] [--repo DIR] [--endpoint closed|drop|hang|hub]

Measures and prints; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hostile import cpu_name  # noqa: E402

IMPORTS = ("import torch, transformers, spacy, q2_plugins.cli, q2_plugins.backends.hf.transformers_models; "
           "import transformers.models.t5")


def _serve(server: socket.socket, hang: bool) -> None:
    held = []
    while True:
        conn, _ = server.accept()
        if hang:
            held.append(conn)  # open, never answered
        else:
            conn.close()


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--repo", default=str(REPO), help="checkout whose code runs (default: this one)")
    ap.add_argument("--endpoint", choices=("closed", "drop", "hang", "hub"), default="closed",
                    help="closed: a local port that refuses connections; drop: one that accepts and closes each "
                         "without a word; hang: one that accepts and never answers (a network that drops packets); "
                         "hub: HF_ENDPOINT unset (the real hub, as far as this network reaches it)")
    args = ap.parse_args(argv)
    endpoint = None
    if args.endpoint == "closed":
        with socket.create_server(("127.0.0.1", 0)) as s:
            endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed once the block ends: connections refused
    elif args.endpoint in ("drop", "hang"):
        server = socket.create_server(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        threading.Thread(target=_serve, args=(server, args.endpoint == "hang"), daemon=True).start()
    found: dict[str, list[tuple[float, float]]] = {"imports": [], "fail": []}
    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "rows.jsonl"
        rows.write_text("".join((REPO / "q2_plugins" / "data" / "sample.jsonl").read_text().splitlines(True)[:2]))
        for i in range(args.repeat):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
            env.update(HF_HOME=f"{tmp}/home{i}", HF_HUB_CACHE=f"{tmp}/cache{i}", PYTHONPATH=args.repo,
                       TOKENIZERS_PARALLELISM="false", **({"HF_ENDPOINT": endpoint} if endpoint else {}))
            wall, cpu, _ = run([sys.executable, "-c", IMPORTS], env)
            found["imports"].append((wall, cpu))
            wall, cpu, proc = run([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(rows), "--output",
                                   f"{tmp}/out.jsonl", "--no-progress"], env)
            if proc.returncode != 2 or "Cannot load the QG model" not in proc.stderr:
                print(f"unexpected: exit {proc.returncode}\n{proc.stderr[-2000:]}")
                return 1
            found["fail"].append((wall, cpu))
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; load average {os.getloadavg()[0]:.1f}; code: "
          f"{args.repo}; endpoint: {args.endpoint}")
    print("| run | wall s (median) | CPU s (median) |\n|---|---:|---:|")
    for name, values in found.items():
        wall, cpu = (statistics.median(v[k] for v in values) for k in (0, 1))
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    extra = statistics.median(v[0] for v in found["fail"]) - statistics.median(v[0] for v in found["imports"])
    print(f"the failure beyond start-up: {extra:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
