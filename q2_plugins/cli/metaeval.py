"""``q2 meta-eval``: the paper's experiments and baselines on annotated data, in one command.

Scoring and evaluation are separate steps when wanted::

    q2 meta-eval --dataset wow --data DIR --export-inputs inputs.jsonl     # what to score
    q2 score --input inputs.jsonl --output scores.jsonl --explain          # score it (any machine)
    q2 meta-eval --dataset wow --data DIR --scores scores.jsonl --output-dir out

or one step with ``--compute`` (Q² scored on the fly; the Q2Config flags choose the models), or from a recorded run
with ``--replay``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any, Callable

from q2_plugins import __version__
from q2_plugins.cli._common import add_column_flags, add_help_all, common
from q2_plugins.datasets.bundled import DATA_DIR
from q2_plugins.datasets.common import read_label_map
from q2_plugins.datasets.registry import DATASETS, labelled
from q2_plugins.datasets.table import TableColumns
from q2_plugins.io.outputs import check_writable
from q2_plugins.metaeval.variants import variants_markdown
from q2_plugins.metric.config import config_from_args

__all__ = ["add_parser", "run", "settings_from_args"]

def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_parser(sub: Any, add_config_flags: Callable[[argparse.ArgumentParser], None],
               formatter: Any = argparse.HelpFormatter) -> argparse.ArgumentParser:
    """Add the ``meta-eval`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    from q2_plugins.metaeval.baselines import BASELINE_NAMES  # (lazy: numpy; the CLI imports without it)

    m = sub.add_parser(
        "meta-eval", help="agreement with human labels: the paper's experiments and baselines",
        formatter_class=formatter,
        description="Agreement of Q2 (and baselines) with human consistency labels: the paper's experiments, "
                    "controls and baselines. Markdown on stdout; JSON, HTML and plots in --output-dir.")
    add_help_all(m, "table columns, label maps, baselines, experiments, decoding, batching")
    d = m.add_argument_group("data")
    common(d.add_argument("--dataset", required=True, choices=sorted(DATASETS), metavar="NAME",
                          help="; ".join(f"{name}: {entry.help}" for name, entry in DATASETS.items())),
           brief=f"the data set's name ({len(DATASETS)} of them: --help-all lists each one)")
    common(d.add_argument("--data", metavar="PATH",
                          help="the data file or folder (--dataset above); default: the bundled copy of the data "
                               f"set, for {', '.join(n for n, e in DATASETS.items() if e.bundled)}"),
           brief="data file or folder; default: the bundled copy")
    d.add_argument("--label-map", metavar="FILE",
                   help="label values to read as others, e.g. annotators' typos: a JSON object "
                        "{\"entailmentt\": \"entailment\"} or CSV / TSV lines from,to "
                        f"({', '.join(labelled())})")
    d.add_argument("--drop-unknown-labels", action="store_true",
                   help="rows whose label is unknown are left out (and listed) without a warning; without it they "
                        "are left out, listed and warned about")
    d.add_argument("--ragtruth-quality", choices=("good", "all"), default="good",
                   help="--dataset ragtruth: keep the responses of quality 'good' (as RAGTruth's own evaluation) or "
                        "all of them (incorrect_refusal and truncated too)")
    t = m.add_argument_group("--dataset table")
    add_column_flags(t)
    t.add_argument("--label-column", default="label")
    t.add_argument("--consistent-labels", type=_names, help="label values meaning consistent, comma-separated "
                                                            "(required for table; the others are inconsistent)")
    t.add_argument("--id-column", help="example ids (default: the row number, as q2 score's 'row')")
    t.add_argument("--subset-column", help="groups of the per-subset table")
    t.add_argument("--split-column", help="'dev' / 'test' values, for --tune-threshold")
    t.add_argument("--dialogue-column", help="dialogue ids, for the same-dialogue random-knowledge control")
    t.add_argument("--history-column")
    t.add_argument("--score-column", action="append", default=[],
                   help="a metric's scores stored in the data file (repeatable; named after the column)")
    t.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    _add_score_flags(m, str(DATA_DIR / "q2_original_run"))
    b = m.add_argument_group("baselines")
    b.add_argument("--baselines", default="overlap,bleu",
                   help=f"comma-separated from {list(BASELINE_NAMES)}, 'all' or 'none' (default: overlap,bleu; "
                        f"nli uses --nli-model, bertscore needs the bertscore extra)")
    b.add_argument("--bertscore-model", default="roberta-large", help="BERTScore model_type (hub id or directory)")
    b.add_argument("--bertscore-num-layers", type=int, help="BERTScore layer (required for models it does not know)")
    b.add_argument("--bertscore-rescale", action=argparse.BooleanOptionalAction, default=True,
                   help="rescale BERTScore with its baseline file (as the paper)")
    b.add_argument("--bertscore-batch-size", type=int, default=64)
    b.add_argument("--meteor-synonyms", choices=("none", "wordnet"), default="none",
                   help="METEOR-style baseline: none = exact and stem matches only (default); wordnet = also WordNet "
                        "synonyms, which needs NLTK's WordNet data installed")
    b.add_argument("--text-rules", action=argparse.BooleanOptionalAction, default=True,
                   help="for the taxonomy and stress experiments, also label every response by the BEGIN rules on "
                        "text signals alone (no Q2 evidence, no model; spaCy)")
    b.add_argument("--taxonomy-model", metavar="DIR",
                   help="for the taxonomy experiment, also label every response with a five-way model of q2 train "
                        "--labels 5 (docs/training.md)")
    _add_experiment_flags(m)
    o = m.add_argument_group("output")
    common(o.add_argument("--output-dir", metavar="DIR", help="write report.json, report.md, report.html (plots "
                                                              "embedded) and the PNG plots here"),
           brief="write the report (JSON, markdown, HTML) and plots here")
    o.add_argument("--no-plots", action="store_true")
    o.add_argument("--format", choices=("markdown", "json"), default="markdown", help="what stdout shows")
    o.add_argument("--no-progress", action="store_true")
    add_config_flags(m)
    return m


def _add_score_flags(m: argparse.ArgumentParser, bundled_run: str) -> None:
    s = m.add_argument_group("scores")
    common(s.add_argument("--scores", action="append", default=[], metavar="[NAME=]FILE",
                   help="a q2 score output (JSONL with id and the result fields), or a CSV/JSONL with id (or row) "
                        "and score; repeatable; NAME defaults to Q2"),
           brief="a q2 score output, or a file of ids and scores; repeatable")
    common(s.add_argument("--replay", metavar="DIR", nargs="?", const=bundled_run,
                          help="a recorded run of the original pipeline (without DIR: the bundled run on the Q2 "
                               "paper's WoW annotations): Q2 = its recorded per-response Q2; Q2 w/o NLI, questions "
                               "and no-answer rates from replaying its per-question outputs"),
           brief="a recorded run of the original Q2 (default: the bundled one)")
    common(s.add_argument("--compute", action="store_true", help="score Q2 on the fly with the models of the "
                                                                 "Q2Config flags below"),
           brief="score Q2 on the fly with the models below")
    common(s.add_argument("--save-scores", metavar="FILE", help="with --compute: write the results as q2 score "
                                                                "JSONL"), brief="with --compute: save them")
    common(s.add_argument("--export-inputs", metavar="FILE", help="write every input to score (with ids) as JSONL "
                                                                  "for q2 score, and stop"),
           brief="write the inputs for q2 score, and stop")


def _add_experiment_flags(m: argparse.ArgumentParser) -> None:
    # (lazy: numpy; the CLI imports without it)
    from q2_plugins.metaeval.experiments import EXPERIMENTS, OPT_IN_EXPERIMENTS

    e = m.add_argument_group("experiments")
    e.add_argument("--experiments", type=_names, default=None,
                   help=f"comma-separated from {list(EXPERIMENTS + OPT_IN_EXPERIMENTS)} (default: usr for --dataset "
                        f"usr, dnli for --dataset dnli, else all the data allows but variants: the paper's Table 7, "
                        f"which scores the data with four pipeline variants, docs/coreference.md)")
    e.add_argument("--threshold", type=float, default=0.5, help="score <= threshold is inconsistent (default: 0.5)")
    e.add_argument("--dnli-threshold", type=float, default=0.1,
                   help="dnli experiment: score <= threshold predicts contradiction (default: 0.1, the paper's)")
    e.add_argument("--tune-threshold", action="store_true",
                   help="also tune the threshold on a dev split and report it on the test split")
    e.add_argument("--dev-fraction", type=float, default=0.5, help="dev share of the stratified random split")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--reps", type=int, default=1000, help="bootstrap repetitions (default: 1000)")
    e.add_argument("--system-size", type=int, default=350, help="contexts per simulated system (default: 350)")
    e.add_argument("--system-levels", type=_floats, default=(0.05, 0.10, 0.15, 0.20, 0.25),
                   help="inconsistency levels of the simulated systems (default: 0.05,0.1,0.15,0.2,0.25)")
    e.add_argument("--robustness-size", type=int, default=400, help="responses per system (default: 400)")
    e.add_argument("--robustness-levels", type=_floats, default=tuple(round(0.1 * i, 1) for i in range(11)),
                   help="shares of inconsistent responses (default: 0,0.1,...,1)")


def _table_columns(args: argparse.Namespace) -> Any:
    """The ``--dataset table`` flags as :class:`~.runner.TableColumns` (None for the other data sets, which refuse
    them)."""

    table = TableColumns(
        consistent_labels=tuple(args.consistent_labels or ()), response_column=args.response_column,
        knowledge_column=args.knowledge_column, label_column=args.label_column, id_column=args.id_column,
        subset_column=args.subset_column, split_column=args.split_column, dialogue_column=args.dialogue_column,
        history_column=args.history_column, score_columns=tuple(args.score_column), input_format=args.input_format)
    if args.dataset == "table":
        return table
    default = TableColumns()
    given = [f.name for f in dataclasses.fields(table) if getattr(table, f.name) != getattr(default, f.name)]
    if given:
        flags = ", ".join(FLAGS.get(k, "--" + k.replace("_", "-")) for k in given)
        raise ValueError(f"{flags} only apply to --dataset table; --dataset {args.dataset} has a fixed format")
    return None


def _baseline_names(text: str) -> tuple[str, ...]:
    from q2_plugins.metaeval.baselines import BASELINE_NAMES  # (lazy: numpy; the CLI imports without it)

    if text.strip() == "all":
        return BASELINE_NAMES
    if text.strip() in ("none", ""):
        return ()
    return _names(text)


#: setting -> flag, where the flag is not the setting's name with dashes
FLAGS = {"table": "--response-column / --knowledge-column / --label-column / --consistent-labels",
          "score_columns": "--score-column",
          "plots": "--no-plots", "progress": "--no-progress", "config": "the Q2Config flags"}


def settings_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~.runner.MetaEvalSettings` of parsed ``q2 meta-eval`` flags."""
    from q2_plugins.metaeval.runner import MetaEvalSettings  # (lazy: numpy; the CLI imports without it)

    scores = tuple((name or None, path) for name, _, path in (spec.rpartition("=") for spec in args.scores))
    return MetaEvalSettings(
        dataset=args.dataset, data=args.data, table=_table_columns(args),
        label_map=read_label_map(args.label_map) if args.label_map else {},
        drop_unknown_labels=args.drop_unknown_labels, ragtruth_quality=args.ragtruth_quality, scores=scores,
        replay=args.replay, compute=args.compute,
        save_scores=args.save_scores, export_inputs=args.export_inputs, baselines=_baseline_names(args.baselines),
        bertscore_model=args.bertscore_model, bertscore_num_layers=args.bertscore_num_layers,
        bertscore_rescale=args.bertscore_rescale, bertscore_batch_size=args.bertscore_batch_size,
        meteor_synonyms=args.meteor_synonyms, text_rules=args.text_rules, taxonomy_model=args.taxonomy_model,
        experiments=args.experiments,
        options=_experiment_options(args), output_dir=args.output_dir, plots=not args.no_plots,
        progress=not args.no_progress, config=config_from_args(args),
    )


def _experiment_options(args: argparse.Namespace) -> Any:
    """The experiment flags as :class:`~.experiments.MetaEvalOptions`; an error names the flag."""
    import dataclasses

    from q2_plugins.metaeval.experiments import MetaEvalOptions  # (lazy: numpy; the CLI imports without it)

    names = [f.name for f in dataclasses.fields(MetaEvalOptions) if f.name != "experiments"]
    try:
        return MetaEvalOptions(**{n: getattr(args, n) for n in names})
    except ValueError as e:
        text = str(e)
        for n in names:
            text = text.replace(f"MetaEvalOptions.{n}", "--" + n.replace("_", "-"))
        raise ValueError(text) from None


def _variants(args: argparse.Namespace, settings: Any) -> Any:
    """The ``variants`` experiment (the paper's Table 7): the data scored with each cumulative variant, the table
    printed (and saved under --output-dir). Returns the settings of the other experiments asked for."""
    from q2_plugins.metaeval.runner import save_variants, variants  # (lazy: numpy; the CLI imports without it)

    table = variants(settings)
    if settings.output_dir:
        save_variants(settings, table)
    print(json.dumps(table, indent=2, ensure_ascii=False) if args.format == "json" else variants_markdown(table))
    return dataclasses.replace(settings, experiments=tuple(e for e in settings.experiments if e != "variants"))


def check_writable_outputs(settings: Any) -> None:
    """Every path a meta-evaluation writes, checked before any data is read or model loaded."""

    for setting in ("export_inputs", "save_scores", "output_dir"):
        path = getattr(settings, setting)
        if path:
            check_writable(path, setting, folder=setting == "output_dir")
    if settings.compute and settings.config.cache_dir:
        check_writable(settings.config.cache_dir, "cache_dir", folder=True)


def run(args: argparse.Namespace) -> int:
    """``q2 meta-eval``: map the flags to settings, run, print the report (and save it under --output-dir). A
    :class:`~q2_plugins.metric.errors.SettingError` names its setting; ``q2``'s main names the flag (:data:`FLAGS`)."""
    import sys

    from q2_plugins.metaeval.report import to_markdown  # (lazy: numpy; the CLI imports without it)
    from q2_plugins.metaeval.runner import evaluate, export, save_outputs  # (lazy: numpy; the CLI imports without it)

    settings = settings_from_args(args)
    check_writable_outputs(settings)
    if settings.export_inputs:
        written = export(settings)
        labels = " --begin-labels" if written.endswith("BEGIN labels") else ""
        print(f"{written}.\nScore them:  q2 score --input {settings.export_inputs} --output SCORES.jsonl --explain"
              f"{labels}\nthen evaluate with the same data options and seed plus --scores SCORES.jsonl")
        return 0
    if settings.experiments and "variants" in settings.experiments:
        settings = _variants(args, settings)
        if not settings.experiments:  # only the variants were asked for
            return 0
    result = evaluate(settings)
    saved = save_outputs(settings, result) if settings.output_dir else []
    if args.format == "json":
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
    else:
        print(to_markdown(result.report))
        if saved:
            print(f"report: {', '.join(map(str, saved))}  (q2_plugins {__version__})")
    unknown = sum(r.reason == "unknown label" for r in result.data.skipped)
    if unknown and not settings.drop_unknown_labels:
        print(f"warning: {unknown} rows of {result.data.source} have labels the {settings.dataset} loader does not "
              f"know and were left out (listed in the notes); map them with --label-map FILE or leave them out "
              f"knowingly with --drop-unknown-labels", file=sys.stderr)
    return 0
