"""The sections of ``docs/results.md`` on the tools around scoring: lm-eval, significance tests, reports, output
size and the smaller benchmarks' text tables."""

from __future__ import annotations

import re

from scripts.results_common import Results, source, table, what


def lm_eval(res: Results) -> str:
    name = "bench_lm_eval.json"
    d = res.raw(name)
    rows = [[i + 1, f"{a:.2f}", f"{b:.2f}"] for i, (a, b) in enumerate(zip(d["in_metric_s"], d["offline_core_s"]))]
    facts = [["documents", d["documents"]], ["core calls inside the metric", d["core_calls_in_metric"]],
             ["wall-time ratio of the fastest (inside the metric / offline)", f"{d['ratio']:.2f}"],
             ["CPU-time ratio", f"{d['cpu_ratio']:.2f}"], ["the same system score", d["same_score"]]]
    return (what("Time inside the metric during `lm_eval.simple_evaluate` against one offline core call on the same "
                 "documents", d["command"], source(res, name)) + "\n"
            + table(["repeat", "inside the metric s", "offline core call s"], rows, (0, 1, 2)) + "\n"
            + table(["", ""], facts, (1,)))


def header_of(text: str) -> tuple[list[str], list[str], list[str]]:
    """A text results file's ``$ command`` lines, ``# CPU:`` lines and other ``#`` notes, in order."""
    commands = [line[2:].split("  #")[0].strip() for line in text.splitlines() if line.startswith("$ ")]
    cpus = list(dict.fromkeys(m for m in re.findall(r"^# CPU: (.+)$", text, flags=re.M)))
    notes = [line[2:] for line in text.splitlines() if line.startswith("# ") and not line.startswith("# CPU:")]
    return commands, cpus, notes


def significance(res: Results) -> str:
    name = "bench_significance.txt"
    text = res.text(name)
    commands, cpus, _ = header_of(text)
    blocks: list[tuple[str, dict[str, str]]] = []
    speed = []
    command = ""
    for line in text.splitlines():
        if line.startswith("$ "):
            command = line[2:].split("  #")[0].strip()
        found = re.match(r"(calibration|power): (.+?); share with p < 0.05$", line)
        if found:
            blocks.append((found[2], {}))
        elif blocks and re.match(r"^  \S", line) and not line.startswith("  /"):
            test, value = line.strip().rsplit(None, 1)
            blocks[-1][1][test] = value
        spoken = re.match(r"speed: (.+?): ([\d.]+) s wall, ([\d.]+) s CPU(?: \((.+)\))?$", line)
        if spoken:
            speed.append([f"`{command}`", spoken[2], spoken[3], spoken[4] or ""])
            what_speed = spoken[1]
    tests = list(dict.fromkeys(t for _, values in blocks for t in values))
    rows = [[t] + [values.get(t, "-") for _, values in blocks] for t in tests]
    out = [what("Share of p < 0.05 for pairs of systems with no true difference (calibration) and with a true "
                "difference (power), and the time of one `q2 compare`",
                list(dict.fromkeys(commands)),
                source(res, name)), "",
           table(["test (share with p < 0.05; `mean difference`: the measured mean)"] + [b for b, _ in blocks], rows,
                 range(1, len(blocks) + 1)),
           f"Speed: {what_speed}.\n",
           table(["command", "wall s", "CPU s", "note"], speed, (1, 2))]
    return "\n".join(out)


def report_page(res: Results) -> str:
    name = "bench_report.txt"
    text = res.text(name)
    commands, cpus, _ = header_of(text)
    rows = []
    pattern = (r"(\d+) responses: ([\d.]+) MB, written in ([\d.]+) s; rendered (\d+) ms after navigation "
               r"\((\d+) ms wall, driver included\); sort (\d+) ms, filter ([\d /]+) ms, search (\d+) ms, "
               r"open a response (\d+) ms")
    for found in re.finditer(pattern, text):
        rows.append([len(rows) + 1] + [found[i] for i in range(1, 10)])
    return (what("Writing and using the HTML report of 10,000 responses (the replayed bundled slice, cycled) in "
                 "headless Chromium", commands[0], source(res, name)) + "\n"
            + table(["run", "responses", "page MB", "written s", "rendered ms", "wall ms (driver included)",
                     "sort ms", "filter ms", "search ms", "open a response ms"], rows, range(0, 10)))


def report_big(res: Results) -> str:
    name = "bench_report_big.txt"
    text = res.text(name)
    _, cpus, notes = header_of(text)
    rows, command = [], ""
    for line in text.splitlines():
        if line.startswith("$ "):
            command = line[2:]
        found = re.match(r"([\d,]+) rows, ([\d.]+) MB of results: (q2 report .+?): exit (\d+), ([\d.]+) s, peak RSS "
                         r"(\d+) MB, page ([\d.]+) MB", line)
        if found:
            cmd, _, note = command.partition("#")
            rows.append([f"`{cmd.strip()}`", note.strip(), found[3], found[4], found[5], found[6], found[7]])
    return (what("`q2 report` on 99,365 rows, 203 MB of results", "python benchmarks/bench_report_big.py",
                 f"{source(res, name)} {'; '.join(notes[-1:])}.") + "\n"
            + table(["command", "tree", "report", "exit", "s", "peak RSS MB", "page MB"], rows, (3, 4, 5, 6)))


def output_size(res: Results) -> str:
    name = "bench_output_size.txt"
    text = res.text(name)
    commands, _, _ = header_of(text)
    rows, rule = [], ""
    for line in text.splitlines():
        each = re.match(r"(\S+): (\d+) rows, input ([\d,]+) B, output x([\d.]+), with --explain x([\d.]+)$", line)
        every = re.match(r"all: input ([\d,]+) B, output x([\d.]+) \(largest row x([\d.]+)\), with --explain x([\d.]+) "
                         r"\(largest row x([\d.]+)\)$", line)
        if each:
            rows.append([f"`{each[1]}`", each[2], each[3], f"{each[4]}x", "", f"{each[5]}x", ""])
        elif every:
            rows.append(["all", "", every[1], f"{every[2]}x", f"{every[3]}x", f"{every[4]}x", f"{every[5]}x"])
        elif line.startswith("the free-space check"):
            rule = line
    return (what("Bytes written per byte of input, with and without `--explain`, on the bundled result files",
                 commands[0], source(res, name)) + "\n"
            + table(["input", "rows", "input B", "output / input", "largest row", "with --explain",
                     "largest row"], rows, range(1, 7))
            + f"\n{rule[0].upper() + rule[1:]}.\n")


def text_tables(res: Results, name: str, measured: str, command: str) -> str:
    """A results file that is a Markdown table with ``#`` / plain note lines above it: the notes, then the table."""
    text = res.text(name)
    _, cpus, notes = header_of(text)
    plain = [line.strip() for line in text.splitlines() if line.strip() and line[0] not in "#|$"]
    lines = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    where = "; ".join([part for cpu in cpus for part in cpu.split("; ")[1:]] + notes + plain)
    return what(measured, command, f"{source(res, name)} {where[0].upper() + where[1:]}.") + "\n" + lines + "\n"
