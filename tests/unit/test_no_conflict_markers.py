"""No file of the repository keeps a merge's conflict markers (a resolved merge once left them in CHANGELOG.md)."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", ".venv-latest", "out", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache"}
SUFFIXES = {".py", ".md", ".cfg", ".toml", ".txt", ".sh", ".html", ".yaml", ".json", ".jsonl", ".csv", ".tsv", ".pth"}
MARKER = re.compile(r"^(<<<<<<< |>>>>>>> )", flags=re.M)


def _files() -> list[Path]:
    out = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP]  # environments and outputs are not the repository's files
        out += [Path(root) / f for f in files if Path(f).suffix in SUFFIXES]
    return out


def test_no_file_keeps_conflict_markers():
    found = [str(p.relative_to(REPO)) for p in _files()
             if MARKER.search(p.read_text(encoding="utf-8", errors="replace"))]
    assert found == []


def test_the_check_sees_a_marker():
    assert MARKER.search("text\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n")
    assert any(p.name == "CHANGELOG.md" for p in _files())
