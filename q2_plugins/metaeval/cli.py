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
from pathlib import Path
from typing import Any, Callable

__all__ = ["add_parser", "run"]

_TABLE_ONLY = {"response_column": "response", "knowledge_column": "knowledge", "label_column": "label",
               "consistent_labels": None, "id_column": None, "subset_column": None, "split_column": None,
               "dialogue_column": None, "history_column": None, "score_column": [], "input_format": None}


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def add_parser(sub: Any, add_config_flags: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """Add the ``meta-eval`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    from .baselines import BASELINE_NAMES
    from .loaders import LOADERS

    m = sub.add_parser(
        "meta-eval", help="agreement with human labels: the paper's experiments and baselines",
        description="Meta-evaluate Q2 (and baselines) against human consistency labels: response-level accuracy / "
                    "ROC AUC / precision-recall, mean score per subset, simulated systems, score robustness, "
                    "random-knowledge and length controls. Markdown on stdout; JSON, markdown, HTML and PNG plots in "
                    "--output-dir.")
    d = m.add_argument_group("data")
    d.add_argument("--dataset", required=True, choices=sorted(LOADERS),
                   help="wow: the Q2 paper's WoW annotation folder; begin: BEGIN v1 or v2 TSV; dialfact / dnli: "
                        "JSONL; faithdial: a FaithDial data-audit CSV; usr: USR's Topical-Chat tc_usr_data.json; "
                        "stress: stress pairs written by q2 perturb; table: any CSV / TSV / JSONL with the columns "
                        "named below")
    d.add_argument("--data", required=True, help="data file, or folder for --dataset wow")
    t = m.add_argument_group("--dataset table")
    t.add_argument("--response-column", default="response")
    t.add_argument("--knowledge-column", default="knowledge")
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
    s = m.add_argument_group("scores")
    s.add_argument("--scores", action="append", default=[], metavar="[NAME=]FILE",
                   help="a q2 score output (JSONL with id and the result fields), or a CSV/JSONL with id (or row) "
                        "and score; repeatable; NAME defaults to Q2")
    s.add_argument("--replay", metavar="DIR", help="a recorded run of the original pipeline (e.g. "
                   "shared/data/q2_original_run): Q2 = its recorded per-response Q2; Q2 w/o NLI, questions and "
                   "no-answer rates from replaying its per-question outputs")
    s.add_argument("--compute", action="store_true", help="score Q2 on the fly with the models of the Q2Config "
                                                          "flags below")
    s.add_argument("--save-scores", metavar="FILE", help="with --compute: write the results as q2 score JSONL")
    s.add_argument("--export-inputs", metavar="FILE", help="write every input to score (with ids) as JSONL for "
                                                           "q2 score, and stop")
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
    _add_experiment_flags(m)
    o = m.add_argument_group("output")
    o.add_argument("--output-dir", help="write report.json, report.md, report.html (plots embedded) and the PNG "
                                        "plots here")
    o.add_argument("--no-plots", action="store_true")
    o.add_argument("--format", choices=("markdown", "json"), default="markdown", help="what stdout shows")
    o.add_argument("--no-progress", action="store_true")
    add_config_flags(m)
    return m


def _add_experiment_flags(m: argparse.ArgumentParser) -> None:
    from .experiments import EXPERIMENTS, OPT_IN_EXPERIMENTS

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


def _load(args: argparse.Namespace) -> Any:
    from .loaders import load_dataset

    if args.dataset == "table":
        return load_dataset(
            "table", args.data, consistent_labels=args.consistent_labels or (),
            response_column=args.response_column, knowledge_column=args.knowledge_column,
            label_column=args.label_column, id_column=args.id_column, subset_column=args.subset_column,
            split_column=args.split_column, dialogue_column=args.dialogue_column,
            history_column=args.history_column, score_columns=args.score_column, input_format=args.input_format,
        )
    given = [k for k, default in _TABLE_ONLY.items() if getattr(args, k) != default]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ValueError(f"{flags} only apply to --dataset table; --dataset {args.dataset} has a fixed format")
    return load_dataset(args.dataset, args.data)


def _baseline_names(text: str) -> tuple[str, ...]:
    from .baselines import BASELINE_NAMES

    if text.strip() == "all":
        return BASELINE_NAMES
    if text.strip() in ("none", ""):
        return ()
    return _names(text)


class _Metrics(list):
    """The run's metrics; a name already taken gets the source's tag, e.g. ``Q2 (computed)``."""

    def add(self, metrics: list, tag: str) -> None:
        taken = {m.name for m in self}
        for metric in metrics:
            if metric.name in taken:
                metric.name = f"{metric.name} ({tag})"
            if metric.name in taken:
                raise ValueError(f"Two score sources give the metric {metric.name!r}; name them with NAME=FILE")
            taken.add(metric.name)
            self.append(metric)


def run(args: argparse.Namespace) -> int:
    from ..config import config_from_args
    from .baselines import NLIBaseline, build_baselines, score_baselines
    from .experiments import control_variants, has_begin_labels, run_meta_eval
    from .scores import (
        column_scores,
        compute_q2,
        q2_star_metric,
        read_scores_file,
        replay_scores,
        text_rule_labels,
        write_scores_file,
    )

    data = _load(args)
    options = _options(args, data)
    options = _variants(args, data, options)
    if not options.experiments:  # only the variants were asked for
        return 0
    variants = control_variants(data, args.seed) if "random-knowledge" in options.experiments else None
    to_score = list(data.examples)
    if "system" in options.experiments:
        to_score += data.extra
    if variants:
        to_score += [v for by_id in variants.values() for v in by_id.values()]
    if args.export_inputs:
        _export(args, data, options, to_score, bool(variants))
        return 0
    if args.save_scores and not args.compute:
        raise ValueError("--save-scores writes the scores of --compute; add --compute")

    known = {ex.id: ex for ex in to_score}
    metrics = _Metrics()
    if args.replay:
        metrics.add(replay_scores(args.replay, known), "recorded")
    for spec in args.scores:
        name, _, path = spec.rpartition("=")
        metrics.add(read_scores_file(path, known, name=name or "Q2"), Path(path).stem)
    metrics.add(column_scores(data.examples), "column")
    config = config_from_args(args)
    scorer = None

    def get_scorer() -> Any:
        nonlocal scorer
        if scorer is None:
            from ..scorer import Q2Scorer

            scorer = Q2Scorer(config)
        return scorer

    if args.compute:
        computed, results = compute_q2(to_score, get_scorer(), progress=not args.no_progress)
        metrics.add(computed, "computed")
        if args.save_scores:
            write_scores_file(args.save_scores, [ex.id for ex in to_score], results)

    def nli_baseline() -> NLIBaseline:
        from ..signature import model_id

        return NLIBaseline(get_scorer().nli, lowercase_knowledge=config.fallback_lowercase_knowledge,
                           lowercase_response=config.fallback_lowercase_response,
                           model_id=f"{model_id(config.nli_model, config.nli_revision)}"
                                    f"[{config.role_dtype('nli')}]")

    bertscore = dict(model_type=args.bertscore_model, num_layers=args.bertscore_num_layers,
                     rescale_with_baseline=args.bertscore_rescale, batch_size=args.bertscore_batch_size,
                     device=config.device)
    if "dnli" in options.experiments:  # Q²* from the recorded questions of each Q² source that has them
        metrics.add([star for m in list(metrics) if not m.name.endswith("w/o NLI")
                     and (star := q2_star_metric(m)) is not None], "Q2*")
    baselines = build_baselines(_baseline_names(args.baselines), nli_factory=nli_baseline, bertscore=bertscore,
                                spacy_model=config.spacy_model, meteor_synonyms=args.meteor_synonyms)
    metrics.add(score_baselines(baselines, to_score), "baseline")
    if args.text_rules and (("taxonomy" in options.experiments and has_begin_labels(data))
                            or ("stress" in options.experiments and data.pairs)):
        metrics.add([text_rule_labels(data.examples, spacy_model=config.spacy_model)], "text rules")

    _report(args, run_meta_eval(data, list(metrics), options, variants=variants))
    return 0


def _variants(args: argparse.Namespace, data: Any, options: Any) -> Any:
    """The ``variants`` experiment (the paper's Table 7), when asked for: the data scored with each cumulative
    variant, the table printed. Returns the options of the other experiments."""
    if "variants" not in options.experiments:
        return options
    from ..config import config_from_args
    from ..scorer import Q2Scorer
    from .variants import variants_markdown, variants_table

    table = variants_table(data.examples, config_from_args(args), Q2Scorer, progress=not args.no_progress)
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "variants.json").write_text(json.dumps(table, indent=2, ensure_ascii=False), encoding="utf-8")
        (out / "variants.md").write_text(variants_markdown(table) + "\n", encoding="utf-8")
    print(json.dumps(table, indent=2, ensure_ascii=False) if args.format == "json" else variants_markdown(table))
    return dataclasses.replace(options, experiments=tuple(e for e in options.experiments if e != "variants"))


def _options(args: argparse.Namespace, data: Any) -> Any:
    from .experiments import EXPERIMENTS, MetaEvalOptions

    return MetaEvalOptions(
        threshold=args.threshold, tune_threshold=args.tune_threshold, dev_fraction=args.dev_fraction, seed=args.seed,
        reps=args.reps, system_levels=args.system_levels, system_size=args.system_size,
        robustness_levels=args.robustness_levels, robustness_size=args.robustness_size,
        experiments=args.experiments or data.experiments or EXPERIMENTS, dnli_threshold=args.dnli_threshold,
    )


def _export(args: argparse.Namespace, data: Any, options: Any, to_score: list, with_variants: bool) -> None:
    """``--export-inputs``: the inputs to score elsewhere, and how to score them."""
    from .scores import export_inputs

    n = export_inputs(args.export_inputs, to_score)
    labels = " --begin-labels" if "taxonomy" in options.experiments else ""
    print(f"wrote {n} inputs to {args.export_inputs}: {len(data.examples)} response-level examples"
          + (f", {len(data.extra)} more paired-context responses" if "system" in options.experiments else "")
          + (f", {n - len(data.examples) - len(data.extra)} random-knowledge inputs" if with_variants else "")
          + f".\nScore them:  q2 score --input {args.export_inputs} --output SCORES.jsonl --explain{labels}\n"
          f"then evaluate with the same data options and seed plus --scores SCORES.jsonl")


def _report(args: argparse.Namespace, result: Any) -> None:
    """Print the report, and save it (with plots) under ``--output-dir``."""
    from .. import __version__
    from .report import save_report, to_markdown

    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        if not args.no_plots:
            from .plots import plot_all

            result.report["plots"] = [str(p) for p in plot_all(result, out)]
        saved = save_report(result.report, out)
    if args.format == "json":
        print(json.dumps(result.report, indent=2, ensure_ascii=False))
    else:
        print(to_markdown(result.report))
        if args.output_dir:
            print(f"report: {', '.join(map(str, saved))}  (q2_plugins {__version__})")
