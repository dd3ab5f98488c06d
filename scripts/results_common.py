"""What every section of ``docs/results.md`` shares (``scripts/render_docs.py``): where the results are, the
reader that notes which files were read, the CPU / commit / age of a file, and the number and table formats."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from scripts.results_derive import derive

REPO = Path(__file__).resolve().parent.parent  # (on sys.path: this module is imported as scripts.results_common)

RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "results.md"
COMMAND = "python scripts/render_docs.py"
# The run whose table the page shows, and the repeat of the same command it is compared with.
MAIN_RUN = "bench_n16_6f96214.json"
SECOND_RUN = "bench_n16_6806de3.json"
LINEAR = "bench_linear.txt"
WIDTH = 118  # the page's line width
# Results files the page does not render, each with the reason.
NOT_RENDERED: dict[str, str] = {
    "bench_train_recipes.md": "a generated page itself (benchmarks/train_table.py); the page links it",
    "bench_train_recipes_before_1517e70.json": "rendered into bench_train_recipes.md by benchmarks/train_table.py",
    "bench_train_recipes_after_afd2be9.json": "rendered into bench_train_recipes.md by benchmarks/train_table.py",
    "bench_train_issue41.md": "a generated page itself (benchmarks/train_table.py); the page links it",
    "bench_train_issue41_before_cfaa21f.json": "rendered into bench_train_issue41.md by benchmarks/train_table.py",
    "bench_train_issue41_after_0386f63.json": "rendered into bench_train_issue41.md by benchmarks/train_table.py",
    "bench_train_850b27a.json": "superseded by bench_train_ada72f7.json: its silver set shared evidence passages and "
                                "responses with BEGIN v1 dev, and it measured no surface floor",
    "audit_recipes_before.json": "issue 41's audit (before), superseded by audit_recipes_before_7ef3c67.json",
    "audit_recipes_after.json": "issue 41's audit (after), superseded by audit_recipes_after_ada72f7.json",
}
# Files written before the benchmarks recorded the CPU's model: the CPU stated with the run when it was committed.
CPU_STATED: dict[str, str] = {
    "bench_n16_6f96214.json": "2-core AMD EPYC with AVX-512 BF16",
    "bench_n16_6806de3.json": "2-core AMD EPYC with AVX-512 BF16",
    "bench_linear.txt": "2-core AMD EPYC with AVX-512 BF16",
    "bench_n16_fp32_r1_6806de3.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r1_87ff5ac.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r2_6806de3.json": "2-core Intel Xeon with AMX",
    "bench_n16_fp32_r2_a814593.json": "2-core Intel Xeon with AMX",
    "bench_ray_startup_tiny.json": "2-core Intel(R) Xeon(R) Processor",
}
NOT_RECORDED = "not recorded"
AGE_NOT_KNOWN = "age not known"
# what --check leaves aside: the ages, which grow with every commit (and the line breaks their digits move)
_AGE = re.compile(r"\b\d+\s+commits?\s+old\b|\bage\s+not\s+known\b")


def _ageless(page: str) -> list[str]:
    return _AGE.sub("AGE", page).split()


class Results:
    """The results files, loaded once, with what was read recorded (so an unread file can be reported)."""

    def __init__(self, root: Path = RESULTS) -> None:
        self.root = root
        self.read: set[str] = set()

    def raw(self, name: str) -> dict[str, Any]:
        self.read.add(name)
        return json.loads((self.root / name).read_text())

    def run(self, name: str) -> dict[str, Any]:
        return derive(self.raw(name))

    def text(self, name: str) -> str:
        self.read.add(name)
        return (self.root / name).read_text()

    def linear(self) -> list[dict[str, Any]]:
        """``bench_linear.txt``'s table rows: model, layer, rows, F.linear and oneDNN GFLOP/s, speed-up."""
        out = []
        for line in self.text(LINEAR).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and cells[3].isdigit():
                out.append({"model": cells[0], "layer": cells[1], "rows": int(cells[3]), "torch": float(cells[4]),
                            "onednn": float(cells[5]), "speedup": float(cells[6].rstrip("x"))})
        if not out:
            raise ValueError(f"{self.root / LINEAR}: no table rows found; re-run benchmarks/bench_linear.py into it")
        return out


# ---- where a figure comes from: the CPU / GPU and the commit, as the results file records them
def cpu_of(name: str, data: Any = None, text: str = "") -> str:
    """The device a results file's figures were measured on: a GPU when its command ran on one, else the CPU."""
    record = data if isinstance(data, dict) else {}
    machine = record.get("machine", {}) if isinstance(record.get("machine"), dict) else {}
    gpu = machine.get("gpu") or record.get("gpu")
    if gpu:
        return f"GPU {gpu}"
    cpu = machine.get("cpu") or record.get("cpu")
    if not cpu and text:
        found = re.findall(r"^# CPU: ([^;\n]+)", text, flags=re.M)
        cpu = "; ".join(dict.fromkeys(found)) if found else None
    cpu = cpu or CPU_STATED.get(name)
    if not cpu:
        return f"CPU {NOT_RECORDED}"
    cores = machine.get("cpu_count") or record.get("cores")
    return f"{cores}-core {cpu}" if cores and "core" not in cpu else cpu


def commit_of(name: str, data: Any = None) -> str:
    """The commit a results file measured: its name's ``_<7 hex>`` suffix, else what the file records."""
    found = re.search(r"_([0-9a-f]{7})\.\w+$", name)
    if found:
        return found[1]
    record = data if isinstance(data, dict) else {}
    if record.get("commit"):
        return str(record["commit"])
    if record.get("before") and record.get("after"):
        return f"before {record['before']}, after {record['after']}"
    keyed = sorted({c for key in record.get("cli_s", {}) for c in re.findall(r"\(([0-9a-f]{7})\)", key)})
    return ", ".join(keyed) if keyed else NOT_RECORDED


@lru_cache(maxsize=None)
def commits_since(commit: str) -> Optional[int]:
    """How many commits the checkout's HEAD is past ``commit`` (None: git does not know the commit here)."""
    done = subprocess.run(["git", "rev-list", "--count", f"{commit}..HEAD"], cwd=REPO, capture_output=True, text=True)
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else None


def age_of(name: str, data: Any = None) -> str:
    """``12 commits old``: how far the checkout is past the (newest) commit a results file measured."""
    ages = [a for c in re.findall(r"\b[0-9a-f]{7,40}\b", commit_of(name, data)) if (a := commits_since(c)) is not None]
    return f"{min(ages)} commit{'' if min(ages) == 1 else 's'} old" if ages else AGE_NOT_KNOWN


def source(res: Results, name: str) -> str:
    """One line naming a results file, its CPU / GPU, its commit and how many commits old that is."""
    path = res.root / name
    data = json.loads(path.read_text()) if name.endswith(".json") else None
    text = "" if data is not None else path.read_text()
    res.read.add(name)
    return (f"`benchmarks/results/{name}`: {cpu_of(name, data, text)}; commit {commit_of(name, data)}, "
            f"{age_of(name, data)}.")


# ---- number formats: one place, so the same figure reads the same everywhere
def x(v: float) -> str:
    return f"{v:.2f}x"


def pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def sec(v: float) -> str:
    return f"{v:.1f}"


def span(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def rounded(v: float) -> str:
    """Two significant figures, thousands separated: 9494.9 -> 9,500."""
    return f"{float(f'{v:.2g}'):,.0f}"


def wrap(text: str) -> str:
    """A paragraph or a bullet wrapped at the page's width (a bullet's continuation lines indented)."""
    return textwrap.fill(text, width=WIDTH, subsequent_indent="  " if text.startswith("- ") else "",
                         break_long_words=False, break_on_hyphens=False)


def commit(name: str) -> str:
    return name.rsplit("_", 1)[-1].removesuffix(".json")


def met(rep: dict[str, Any], target: str) -> Optional[bool]:
    return next(t["met"] for t in rep["targets"] if t["target"] == target)


def shown(ok: Optional[bool], failing: str = "") -> str:
    return "not measured" if ok is None else "met" if ok else f"**not met**{failing}"


def stage_share(rep: dict[str, Any], role: str) -> float:
    return rep["stage_efficiency_batched_fp32"][role]["share_of_peak"]


def torch_peaks(reps: Sequence[dict[str, Any]], kernel: str) -> list[float]:
    """A 2048 x 2048 float32 product's GFLOP/s, measured at the start and the end of each run."""
    return [r[when]["float32"][kernel] for r in reps for when in ("peak_gflops_start", "peak_gflops_end")]


# ---- sections
# results_derive.targets' names of the two targets against PyTorch's matmul
TORCH_TARGET = "fp32 batched / per-item on PyTorch's matmul (as the original)"
BF16_TORCH_TARGET = "bf16 speed-up over the fp32 per-item reference on PyTorch's matmul"


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A Markdown table: ``right`` lists the columns aligned right (figures)."""
    rule = "|".join("---:" if i in right else "---" for i in range(len(head)))
    out = ["| " + " | ".join(head) + " |", f"|{rule}|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def what(measured: str, command: str | Sequence[str], where: str) -> str:
    """A section's one line: what was measured, the command(s) that reproduce it, where it ran."""
    commands = [command] if isinstance(command, str) else list(command)
    said = "Command" if len(commands) == 1 else "Commands"
    return wrap(f"{measured}. {said}: {', '.join(f'`{c}`' for c in commands)}. {where}") + "\n"


def command_of(recorded: str) -> str:
    """A recorded benchmark command, run from the checkout's root, without this machine's paths."""
    cmd = re.sub(r" --(models-dir|data|json) \S+", "", recorded.strip())
    return cmd if cmd.startswith("python ") else "python benchmarks/" + cmd
