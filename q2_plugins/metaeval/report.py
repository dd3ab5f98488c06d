"""Writing a meta-evaluation report: markdown tables for the terminal, and under ``--output-dir`` the JSON, the
markdown and one self-contained HTML page with the plots embedded."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from q2_plugins.io.outputs import write_text_atomic
from q2_plugins.metaeval.caveats import marked
from q2_plugins.metaeval.spans import span_section

__all__ = ["to_markdown", "to_html", "write_json", "save_report"]


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _num(x: Optional[float], digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _unscored(row: dict[str, Any]) -> str:
    """`` (3 unscored: 2 no_valid_question, 1 error ...)`` for a table's n cell; empty when all are scored."""
    if not row.get("n_missing"):
        return ""
    reasons = row.get("unscored") or {}
    why = ", ".join(f"{n} {reason[:60] + '...' if len(reason) > 60 else reason}" for reason, n in reasons.items())
    return f" ({row['n_missing']} unscored" + (f": {why}" if why else "") + ")"


def _dagger(normalised: bool) -> str:
    return " †" if normalised else ""


def _metrics_section(report: dict[str, Any]) -> list[str]:
    rows = []
    for m in report["metrics"]:
        cov = m["coverage"]
        scored = f"{cov['examples']}/{cov['of']}" + (f" ({m['labelled']} labelled)" if m.get("labelled") else "")
        rows.append([m["name"], m["source"], scored, f"`{m['signature'] or 'n/a'}`"])
    return ["### Metrics", ""] + _table(["metric", "scores from", "responses scored", "signature"], rows)


def _response_section(block: dict[str, Any], markers: Optional[dict[str, list[str]]] = None) -> list[str]:
    tuned = "split" in block
    header = ["metric", "n", f"accuracy@{block['threshold']:g}", "balanced acc.", "ROC AUC", "AP (incons.)",
              "P / R (incons.)", "mean consistent", "mean inconsistent"]
    if tuned:
        header += ["tuned threshold", "test acc. (tuned)", f"test acc. (@{block['threshold']:g})"]
    rows = []
    any_norm = False
    for name, r in block["metrics"].items():
        if not r["n"]:
            rows.append([marked(name, markers or {}), "0" + _unscored(r)] + ["n/a"] * (len(header) - 2))
            continue
        any_norm |= r["normalised"]
        inc = r["inconsistent"]
        dist = r["distribution"]
        row = [marked(name, markers or {}) + _dagger(r["normalised"]), f"{r['n']}" + _unscored(r),
               _pct(r["accuracy"]), _pct(r["balanced_accuracy"]), _num(r["roc_auc"]), _num(r["ap_inconsistent"]),
               f"{_pct(inc['precision'])} / {_pct(inc['recall'])}", _num(dist["consistent"].get("mean")),
               _num(dist["inconsistent"].get("mean"))]
        if tuned:
            t = r.get("tuned")
            row += ([_num(t["threshold"]), _pct(t["test"]["accuracy"]), _pct(t["test_at_fixed_threshold"]["accuracy"])]
                    if t else ["n/a"] * 3)
        rows.append(row)
    out = [f"### Response level (score <= {block['threshold']:g} counts as inconsistent)", ""]
    out += _table(header, rows)
    if tuned:
        s = block["split"]
        out += [f"Threshold tuned for accuracy on the dev split, applied to the test split ({s['how']}; "
                f"{s['n_dev']} dev, {s['n_test']} test).", ""]
    if any_norm:
        out += ["† not bounded to [0, 1]: threshold statistics and means use min-max normalised scores.", ""]
    return out


def _subset_section(block: dict[str, Any]) -> list[str]:
    names = block["metrics"]
    q_metric = next((n for n in names if any(n in r["questions"] for r in block["rows"])), None)
    header = ["subset", "n"] + names
    if q_metric:
        header += ["questions", "q / response", "no answer in knowledge", "fallback"]
    rows = []
    for r in block["rows"]:
        cells = [r["subset"], str(r["n"])]
        for n in names:
            partial = "" if r["n_scored"][n] == r["n"] else f" (n={r['n_scored'][n]})"
            cells.append(_num(r["mean"][n]) + partial)
        if q_metric:
            q = r["questions"].get(q_metric)
            cells += ([str(q["questions"]), _num(q["questions_per_response"], 2), _pct(q["no_answer_rate"]),
                       _pct(q["fallback_rate"])] if q else ["n/a"] * 4)
        rows.append(cells)
    out = ["### Mean score per subset (the paper's Table 2)", ""] + _table(header, rows)
    if q_metric:
        out += [f"Question columns are {q_metric}'s: questions kept, per response with questions, share of them "
                f"with no answer in the knowledge, share of responses scored by the end-to-end NLI fallback.", ""]
    return out


def _system_section(block: dict[str, Any]) -> list[str]:
    levels = ", ".join(f"{100 * c:g}" for c in block["levels"])
    out = ["### System level: simulated systems (the paper's Section 5)", "",
           f"{block['n_one_inconsistent']} of {block['n_contexts']} paired contexts have exactly one inconsistent "
           f"response. {block['reps']} repetitions: {block['size']} contexts sampled with replacement, "
           f"c in {{{levels}}}% of them answered inconsistently; Spearman correlation of the system score with the "
           f"true ranking (seed {block['seed']}).", ""]
    rows = []
    paper = block.get("paper", {})
    for name, r in block["per_metric"].items():
        n = r["n_contexts"]
        scored = f"{n} of {block['n_one_inconsistent']}"
        cited = _num(paper[name], 4) if name in paper else ""
        if "spearman_mean" not in r:
            rows.append([name, scored, "n/a (fewer than 2 contexts)", "n/a", cited])
        else:
            rows.append([name, scored, _num(r["spearman_mean"]),
                         f"[{_num(r['spearman_low'])}, {_num(r['spearman_high'])}]", cited])
    out += _table(["metric", "contexts with both responses scored", "Spearman (mean)", "95% interval",
                   "paper (all contexts)"], rows)
    out += _paper_caveat(block)
    short = [name for name, r in block["per_metric"].items() if r["n_contexts"] < block["n_one_inconsistent"]]
    if short:
        out += [f"Not every context could be used for {', '.join(short)}: a context counts only when both of its "
                f"responses have a score. Score the cross-annotation responses (`--export-inputs`, `q2 score`, "
                f"`--scores`) or use `--compute` to cover all {block['n_one_inconsistent']}.", ""]
    common = block["common"]
    if "metrics" in common:
        out += [f"Like for like, on the {common['n_contexts']} contexts every metric scores (same simulated "
                f"systems):", ""]
        rows = [[name, _num(r["spearman_mean"]), f"[{_num(r['spearman_low'])}, {_num(r['spearman_high'])}]"]
                for name, r in common["metrics"].items()]
        out += _table(["metric", "Spearman (mean)", "95% interval"], rows)
    return out


def _paper_caveat(block: dict[str, Any]) -> list[str]:
    """Why a measured system-level figure on part of the contexts is not the paper's, in words."""
    total = block["n_one_inconsistent"]
    partial = [(name, block["per_metric"][name]["n_contexts"]) for name in block.get("paper", {})
               if name in block["per_metric"] and block["per_metric"][name]["n_contexts"] < total]
    return [f"The paper's {_num(block['paper'][name], 4)} for {name} comes from simulated systems drawn from all "
            f"{total} contexts; here {name} scores both responses of only {n} of them, so every simulated system of "
            f"{block['size']} contexts is drawn from those {n}, a different and much smaller population. The two "
            f"figures are not comparable: the measured one neither reproduces nor contradicts the paper's."
            for name, n in partial] + ([""] if partial else [])


def _robustness_section(block: dict[str, Any]) -> list[str]:
    names = [n for n, r in block["metrics"].items() if "mean" in r]
    out = ["### Score robustness", "",
           f"Systems of {block['size']} responses drawn from the consistent and inconsistent pools, a share c "
           f"inconsistent; mean system score [95% interval] over {block['reps']} repetitions (seed {block['seed']}).",
           ""]
    rows = []
    for j, c in enumerate(block["levels"]):
        row = [f"{c:g}"]
        for n in names:
            r = block["metrics"][n]
            row.append(f"{_num(r['mean'][j])} [{_num(r['low'][j])}, {_num(r['high'][j])}]")
        rows.append(row)
    out += _table(["c"] + [n + _dagger(block["metrics"][n]["normalised"]) for n in names], rows)
    return out


def _random_knowledge_section(block: dict[str, Any]) -> list[str]:
    kinds = list(block)
    out = ["### Control: random knowledge", "",
           "Mean score with the example's own knowledge -> with knowledge of another turn of the same dialogue / of "
           "another dialogue (over the examples with a substitution scored under both; n in brackets).", ""]
    for kind in kinds:
        out.append(f"- {kind.replace('_', ' ')}: {block[kind]['n_substituted']} of {block[kind]['n_examples']} "
                   f"examples have a substitution")
    out.append("")
    first = block[kinds[0]]["subsets"]
    rows = []
    for subset, cell in first.items():
        for metric in cell:
            row = [subset, metric]
            for kind in kinds:
                c = block[kind]["subsets"][subset][metric]
                row.append("n/a (no scores)" if not c["n"] else
                           f"{_num(c['original'])} -> {_num(c['substituted'])} (n={c['n']})")
            rows.append(row)
    out += _table(["subset", "metric"] + [k.replace("_", " ") for k in kinds], rows)
    return out


def _length_section(block: dict[str, Any]) -> list[str]:
    out = ["### Control: response length", "",
           f"Mean length ({block['unit']}): consistent {_num(block['mean_consistent'], 1)}, inconsistent "
           f"{_num(block['mean_inconsistent'], 1)}; ROC AUC of length alone as a consistency score: "
           f"{_num(block['length_roc_auc'])}.", ""]
    rows = [[name, str(r["n"]), _num(r["spearman"])] for name, r in block["spearman_with_length"].items()]
    out += _table(["metric", "n", "Spearman with length"], rows)
    return out


def _confusion_table(block: dict[str, Any]) -> list[str]:
    labels = block["labels"]
    rows = [[f"**{gold}**"] + [str(c) for c in counts] for gold, counts in zip(labels, block["confusion"])]
    return _table(["gold / predicted"] + labels, rows)


def _taxonomy_section(block: dict[str, Any]) -> list[str]:
    out = ["### BEGIN taxonomy: labels against the gold labels", ""]
    rows = []
    for name, r in block["metrics"].items():
        three, five = r["three_way"], r["five_way"]
        n = f"{r['n']}" + (f" ({r['n_missing']} unlabelled)" if r["n_missing"] else "")
        rows.append([name, n, _pct(three.get("accuracy")), _num(100 * three["macro_f1"], 1) if r["n"] else "n/a",
                     _pct(five.get("accuracy")), _num(100 * five["macro_f1"], 1) if r["n"] else "n/a"])
    ref = block["reference"]
    rows.append([ref["name"], "", _pct(ref["three_way"]["accuracy"]), _num(100 * ref["three_way"]["macro_f1"], 1),
                 _pct(ref["five_way"]["accuracy"]), _num(100 * ref["five_way"]["macro_f1"], 1)])
    out += _table(["labels from", "n", "3-way accuracy", "3-way macro-F1", "5-way accuracy", "5-way macro-F1"], rows)
    out += ["Three-way: entailment / neutral (hallucination, generic, off-topic) / contradiction. Macro-F1 averages "
            "the labels present in the gold or the predicted labels.", ""]
    for name, r in block["metrics"].items():
        if r["n"]:
            out += [f"Five-way confusion, {name} (rows gold, columns predicted):", ""]
            out += _confusion_table(r["five_way"])
    return out


def _stress_section(block: dict[str, Any]) -> list[str]:
    out = ["### Stress pairs: original scored above its perturbation", ""]
    names = list(dict.fromkeys(n for r in block["rows"] for n in r["scores"]))
    if names:
        rows = []
        for r in block["rows"]:
            cells = [r["method"], str(r["n_pairs"])]
            for n in names:
                c = r["scores"][n]
                cells.append("n/a (no pair scored)" if not c["n"] else
                             f"{_pct(c['above'])} (ties {_pct(c['ties'])}, n={c['n']})")
            rows.append(cells)
        out += _table(["method", "pairs"] + names, rows)
        out += ["Share of the pairs scored on both sides where the original's score is strictly higher; ties are "
                "neither.", ""]
    labellers = list(dict.fromkeys(n for r in block["rows"] for n in r["labels"]))
    if labellers:
        rows = []
        for r in block["rows"]:
            for n in labellers:
                c = r["labels"][n]
                rows.append([r["method"], n, str(c["n"]), _pct(c["expected_label"]), _pct(c["expected_label3"]),
                             _pct(c["original_entailment"])])
        out += _table(["method", "labels from", "n", "expected label", "expected 3-way label",
                       "originals labelled entailment"], rows)
    return out


def _row_name(r: dict[str, Any]) -> str:
    return r["metric"] if r["treatment"] == "as scored" else f"{r['metric']} ({r['treatment']})"


def _p(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.1e}"


def _usr_section(block: dict[str, Any]) -> list[str]:
    out = ['### Topical-Chat: turn-level correlation with "Uses Knowledge" (the paper\'s Table 6)', "",
           f"{block['n_rated']} rated responses; 95% bootstrap intervals over {block['reps']} resamples of the "
           f"responses (seed {block['seed']}); p: two-sided p-value (SciPy).", ""]
    rows = []
    for r in block["rows"]:
        cells = [_row_name(r), str(r["n"]) + _unscored(r)]
        for name in ("spearman", "pearson"):
            c = r[name]
            cells += ["n/a (fewer than 3 responses, or a constant side)" if c["r"] is None else
                      f"{c['r']:.4f} [{c['low']:.3f}, {c['high']:.3f}]", _p(c["p"])]
        rows.append(cells)
    rows += [[f"paper: {ref['name']}", "", f"{ref['spearman']:.4f}", "", f"{ref['pearson']:.4f}", ""]
             for ref in block["reference"]]
    out += _table(["metric", "responses", "Spearman [95% CI]", "p", "Pearson [95% CI]", "p"], rows)
    out += [f"Paper rows: {block['reference_note']}.", ""]
    return out


def _dnli_section(block: dict[str, Any]) -> list[str]:
    out = ["### Dialogue NLI: entailment vs contradiction (the paper's Table 5)", "",
           f"{block['n_pairs']} non-neutral pairs ({block['n_neutral_left_out']} neutral left out); score > "
           f"{block['threshold']:g} predicts entailment, anything else contradiction.", ""]
    rows = []
    for r in block["rows"]:
        n = str(r["n"]) + _unscored(r)
        rows.append([_row_name(r), n, _pct(r["accuracy"]), _pct(r.get("entailment_recall")),
                     _pct(r.get("contradiction_recall"))])
    rows += [[f"paper: {ref['name']}", "", _pct(ref["accuracy"]), "", ""] for ref in block["reference"]]
    out += _table(["metric", "pairs", "accuracy", "entailment recall", "contradiction recall"], rows)
    cov = [f"{name} {_pct(c['coverage'])} ({c['with_question']} of {c['n']})" for name, c in block["coverage"].items()]
    if cov:
        out += [f"Coverage (pairs with at least one valid question): {'; '.join(cov)}; paper: "
                f"{_pct(block['reference_coverage'])}.", ""]
    out += [f"Paper rows: {block['reference_note']}. Our reading of them: Q² = with a valid question (or no valid "
            f"question = contradiction), Q² + NLI = with the end-to-end NLI fallback, Q²* = the Q2* rule, NLI = the "
            f"end-to-end NLI baseline (`--baselines nli`).", ""]
    return out


def _per_dataset_section(block: dict[str, Any]) -> list[str]:
    names = block["datasets"]
    thr = f"{block['threshold']:g}"
    out = [f"### Balanced accuracy per data set (threshold tuned on the dev split / fixed at {thr})", ""]
    rows = []
    for metric, r in block["metrics"].items():
        cells = [metric]
        for name in names:
            d = r["rows"][name]
            cells.append(f"{_pct(d['balanced_accuracy_tuned'])} / {_pct(d['balanced_accuracy_fixed'])}"
                         + (f" (n={d['n_test']}, {d['n_test_unscored']} unscored)" if d["n_test_unscored"] else ""))
        cells.append(f"{_pct(r['mean_tuned'])} / {_pct(r['mean_fixed'])}")
        rows.append(cells)
    out += _table(["metric"] + names + ["mean"], rows)
    out += ["Each cell: balanced accuracy on the data set's test examples at the threshold of best balanced accuracy "
            "on its dev examples / at the fixed threshold (score <= threshold is inconsistent); the mean is "
            "unweighted over the data sets with a figure."
            + ("" if block["has_dev"] else " The data has no dev split: no tuned threshold."), ""]
    return out


def _published_section(block: dict[str, Any]) -> list[str]:
    out = [f"### ROC AUC beside published figures ({block['benchmark']}; TRUE style)", ""]
    rows = [[r["metric"], str(r["n"]), _num(r["roc_auc"]),
             "same examples" if r["same_examples"] else f"**not like for like**: {r['n']} examples, the published "
                                                          f"figures have {block['published_n']}"]
            for r in block["rows"]]
    rows += [[f"published: {p['metric']}", str(block["published_n"]), _num(p["roc_auc"]), p["source"]]
             for p in block["published"]]
    out += _table(["metric", "n", "ROC AUC", "comparable / source"], rows)
    out += [f"Published figures are on {block['data']} ({block['published_n']} examples); ours on "
            f"{block['ours']} ({block['n_examples']}) that each metric scores. {block['not_listed']}", ""]
    return out


def _benchmark_section(block: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if "per_dataset" in block:
        out += _per_dataset_section(block["per_dataset"])
    if "published" in block:
        out += _published_section(block["published"])
    return out


_SECTIONS: list[tuple[str, Callable[[dict[str, Any]], list[str]]]] = [
    ("response_level", _response_section),
    ("subsets", _subset_section),
    ("system_level", _system_section),
    ("robustness", _robustness_section),
    ("random_knowledge", _random_knowledge_section),
    ("length", _length_section),
    ("taxonomy", _taxonomy_section),
    ("stress", _stress_section),
    ("usr", _usr_section),
    ("dnli", _dnli_section),
    ("benchmark", _benchmark_section),
    ("spans", span_section),
]


def to_markdown(report: dict[str, Any]) -> str:
    """The report as markdown: data and metrics, then one table per experiment that ran."""
    d = report["data"]
    lines = [f"## Q² meta-evaluation: {d['name']} ({d['source']})", "",
             f"{d['n']} responses: {d['n_consistent']} consistent, {d['n_inconsistent']} inconsistent "
             f"({d['label_scheme']}).", ""]
    if d.get("skipped_rows"):
        k = d["skipped_rows"]
        why = ", ".join(f"{n} {reason}" for reason, n in k["by_reason"].items())
        lines += [f"{k['n']} rows of the file are not examples ({why}); each is listed with its line in the notes "
                  f"and in report.json.", ""]
    lines += [f"Signature: `{report['signature']}`", ""]
    lines += _metrics_section(report)
    if report.get("caveats"):
        lines += ["### Caveats: figures that are not like for like", ""]
        lines += [f"- {c}" for c in report["caveats"]] + [""]
    for key, section in _SECTIONS:
        if key == "response_level" and key in report:
            lines += _response_section(report[key], report.get("caveat_markers"))
        elif key in report:
            lines += section(report[key])
    notes = list(d.get("notes", []))
    notes += [f"{m['name']}: {n}" for m in report["metrics"] for n in m["notes"]]
    notes += [f"skipped {k}: {v}" for k, v in report["skipped"].items()]
    notes += [f"plot: {p}" for p in report.get("plots", [])]
    if notes:
        lines += ["### Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: str | Path) -> None:
    write_text_atomic(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n", setting="output_dir")


def _inline(text: str) -> str:
    """Escaped text with the markdown this module writes inline: `code` and **bold**."""
    out = []
    for i, part in enumerate(re.split(r"`([^`]*)`", text)):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(part)))
    return "".join(out)


def _markdown_html(markdown: str) -> list[str]:
    """HTML of the markdown :func:`to_markdown` writes (headings, paragraphs, tables, lists); text escaped."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            cells = [[c.strip() for c in row.strip()[1:-1].split(" | ")] for row in block
                     if not re.fullmatch(r"\|(-+\|)+", row.strip())]
            head, body = cells[0], cells[1:]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
                       + "</tbody></table>")
            continue
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return out


_HTML_STYLE = """body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:#1d2430;
max-width:1200px;margin:20px auto;padding:0 20px}table{border-collapse:collapse;margin:6px 0 14px}
th,td{border:1px solid #dde2ea;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f4f6f9}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f1f3f6;padding:1px 3px;word-break:break-all}
figure{margin:10px 0 18px}img{max-width:100%;border:1px solid #dde2ea}figcaption{color:#5b6575;font-size:12px}"""


def to_html(report: dict[str, Any], plots: Sequence[str | Path] = ()) -> str:
    """One self-contained page: the markdown report's tables, then every plot as an embedded PNG (no file or
    network access when opened)."""
    title = f"Q² meta-evaluation: {report['data']['name']}"
    body = _markdown_html(to_markdown(report))
    if plots:
        body.append("<h3>Plots</h3>")
    for p in plots:
        data = base64.b64encode(Path(p).read_bytes()).decode("ascii")
        name = html.escape(Path(p).name)
        body.append(f'<figure><img alt="{name}" src="data:image/png;base64,{data}"><figcaption>{name}</figcaption>'
                    "</figure>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{html.escape(title)}</title><style>{_HTML_STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def save_report(report: dict[str, Any], folder: str | Path) -> list[Path]:
    """Write ``report.json``, ``report.md`` and ``report.html`` (plots listed in ``report["plots"]`` embedded)."""
    folder = Path(folder)
    paths = [folder / "report.json", folder / "report.md", folder / "report.html"]
    write_json(report, paths[0])
    write_text_atomic(paths[1], to_markdown(report) + "\n", setting="output_dir")
    write_text_atomic(paths[2], to_html(report, report.get("plots", [])), setting="output_dir")
    return paths
