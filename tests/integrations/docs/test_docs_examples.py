"""Every shell and Python example of README.md and docs/*.md is either run by a test or says in a marker what it needs
that a test cannot have (docs/development.md, "Examples in the docs"); the examples tagged ``example`` /
``example-root`` run here as printed, each in a fresh process, in a checkout laid out as after the README's set-up."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, doc_files, optional_import

LANGUAGES = ("bash", "sh", "shell", "python", "py")
NEEDS = ("hub", "install", "time")
GENERIC = {"example": Path("out/examples"), "example-root": Path(".")}  # tag: where it runs, in the checkout
MARKER = re.compile(r"<!-- ([\w ]+): (.*?) -->")
# flags whose value a run must leave behind (a file or a folder)
OUTPUT_FLAGS = ("--output", "--output-dir", "--html", "--json", "--dropped-output", "--save-scores")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, from 1
    language: str
    code: str
    markers: tuple[tuple[str, str], ...]  # (kind, value) of the comment lines right above the fence

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def values(self, kind: str) -> list[str]:
        return [value for k, value in self.markers if k == kind]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page with the marker comments above each (blank lines between allowed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"\s*```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if re.match(r"\s*```\s*$", lines[j]))
        markers, k = [], i - 1
        while k >= 0 and (not lines[k].strip() or MARKER.fullmatch(lines[k].strip())):
            if lines[k].strip():
                markers.insert(0, MARKER.fullmatch(lines[k].strip()).groups())
            k -= 1
        found.append(Block(path, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n", tuple(markers)))
        i = end + 1
    return found


CODE = [block for path in doc_files() for block in blocks(path) if block.language in LANGUAGES]
RUN_HERE = [block for block in CODE if set(block.values("test")) & set(GENERIC)]


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_is_marked(page):
    """Each example says how it is checked: a test runs it, or it needs what a test cannot have."""
    problems = []
    for block in (b for b in CODE if b.path == page):
        tags, needs = block.values("test"), [n.strip() for v in block.values("needs") for n in v.split(",")]
        unknown = sorted(set(needs) - set(NEEDS))
        if unknown:
            problems.append(f"{block.where}: <!-- needs: ... --> takes {', '.join(NEEDS)}, not {', '.join(unknown)}")
        if not tags and not needs:
            problems.append(f"{block.where}: no marker; put <!-- test: example --> (runs in out/examples), "
                            f"<!-- test: example-root --> (runs in the checkout) or <!-- needs: {'|'.join(NEEDS)} "
                            f"--> on the line above the fence")
    assert not problems, "\n".join(problems)


def test_every_test_tag_is_run_by_a_test():
    """A ``test:`` tag no test file names would mark an example as tested when nothing runs it."""
    here = Path(__file__).resolve()
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "tests").rglob("*.py") if p.resolve() != here)
    orphans = sorted({f"{block.where}: <!-- test: {tag} -->" for block in CODE for tag in block.values("test")
                      if tag not in GENERIC and f'"{tag}"' not in sources and f"'{tag}'" not in sources})
    assert not orphans, "no test under tests/ names these tags:\n" + "\n".join(orphans)


def test_the_generic_tags_mark_examples():
    assert {tag for block in RUN_HERE for tag in block.values("test")} == set(GENERIC)


@pytest.fixture
def checkout(examples_dir, tmp_path) -> Path:
    """The checkout after ``bash scripts/score_sample.sh --random-models``: its files, and in ``out/examples`` the
    tiny random-weight stand-ins (``q2-models/{qg,qa,nli,coref}``, ``my-dialogue-model``, ...)."""
    root = tmp_path / "checkout"
    root.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name != "out":
            (root / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (root / "out" / "examples").mkdir(parents=True)
    for entry in examples_dir.iterdir():
        (root / "out" / "examples" / entry.name).symlink_to(entry, target_is_directory=True)
    return root


def written_paths(code: str) -> list[str]:
    """The values of the output flags of a shell block's commands (those without a shell variable)."""
    paths = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        paths += [value for flag, value in zip(words, words[1:]) if flag in OUTPUT_FLAGS and "$" not in value]
    return paths


@pytest.mark.parametrize("block", RUN_HERE, ids=lambda b: b.where)
def test_example_runs_as_printed(block, checkout):
    for module, extra in (("parlai", "parlai"), ("ray", "ray"), ("evaluate", "evaluate"), ("lm_eval", "lm-eval")):
        uses = re.search(rf"^\s*({module} |import {module}\b|from {module}\b)", block.code, flags=re.M)
        if uses and importlib.util.find_spec(module) is None:
            optional_import(module, extra)  # skips locally, fails in CI
    (tag,) = set(block.values("test")) & set(GENERIC)
    cwd = checkout / GENERIC[tag]
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    python = block.language in ("python", "py")
    command = [sys.executable, "-c", block.code] if python else ["bash", "-euo", "pipefail", "-c", block.code]
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (block.where, proc.stdout[-2000:], proc.stderr[-3000:])
    if python:
        assert "print(" not in block.code or proc.stdout.strip(), f"{block.where} printed nothing"
    else:
        missing = [path for path in written_paths(block.code) if not (cwd / path).exists()]
        assert not missing, f"{block.where} did not write {missing}"
