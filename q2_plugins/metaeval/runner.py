"""A meta-evaluation run from typed settings: the library entry point behind ``q2 meta-eval``.

::

    from q2_plugins.metaeval.runner import MetaEvalSettings, evaluate
    run = evaluate(MetaEvalSettings(dataset="begin", data="begin_dev.tsv", baselines=("overlap", "bleu")))
    print(run.report["response_level"]["metrics"]["BLEU"]["roc_auc"])

Only the command line (:mod:`.cli`) knows flags; an error here names the setting (:class:`SettingError`), and the
command line names its flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from q2_plugins import backends
from q2_plugins.datasets.common import LabelOptions
from q2_plugins.datasets.registry import DATASETS, default_data, labelled, load_dataset
from q2_plugins.datasets.table import TableColumns
from q2_plugins.io.outputs import write_text_atomic
from q2_plugins.metaeval.baselines import BASELINE_NAMES, NLIBaseline, build_baselines, score_baselines
from q2_plugins.metaeval.experiments import (
    EXPERIMENTS,
    MetaEvalOptions,
    control_variants,
    has_begin_labels,
    run_meta_eval,
)
from q2_plugins.metaeval.plots import plot_all
from q2_plugins.metaeval.report import save_report
from q2_plugins.metaeval.scores import (
    column_scores,
    compute_q2,
    export_inputs,
    q2_star_metric,
    read_scores_file,
    replay_scores,
    taxonomy_model_labels,
    text_rule_labels,
    write_scores_file,
)
from q2_plugins.metaeval.variants import variants_markdown, variants_table
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import SettingError  # ``setting`` names the MetaEvalSettings field to change
from q2_plugins.metric.taxonomy import LABELS
from q2_plugins.scorer import Q2Scorer

__all__ = ["SettingError", "MetaEvalSettings", "load_data", "evaluate", "export", "save_outputs",
           "variants", "save_variants"]


@dataclass(frozen=True)
class MetaEvalSettings:
    """Everything a meta-evaluation run reads (one field per ``q2 meta-eval`` flag; the Q² model settings are
    ``config``).

    ``data`` None reads the data set's bundled copy (``q2_plugins/data``), where it has one. ``scores`` are
    ``(name, file)`` pairs (name None: ``Q2``); ``baselines`` names from
    :data:`~q2_plugins.metaeval.baselines.BASELINE_NAMES`; ``experiments`` None runs what the data allows (it
    replaces ``options.experiments``, whose other fields are the experiments' settings).
    """

    dataset: str
    data: Optional[str] = None
    table: Optional[TableColumns] = None
    label_map: Mapping[str, str] = field(default_factory=dict)
    drop_unknown_labels: bool = False
    #: dataset ragtruth: the responses kept by their ``quality`` (``good``: as RAGTruth's own evaluation; ``all``)
    ragtruth_quality: str = "good"
    scores: tuple[tuple[Optional[str], str], ...] = ()
    replay: Optional[str] = None
    compute: bool = False
    save_scores: Optional[str] = None
    export_inputs: Optional[str] = None
    baselines: tuple[str, ...] = ("overlap", "bleu")
    bertscore_model: str = "roberta-large"
    bertscore_num_layers: Optional[int] = None
    bertscore_rescale: bool = True
    bertscore_batch_size: int = 64
    meteor_synonyms: str = "none"
    text_rules: bool = True
    #: a five-way model saved by ``q2 train --labels 5``: its BEGIN labels beside the text rules'
    taxonomy_model: Optional[str] = None
    experiments: Optional[tuple[str, ...]] = None
    options: MetaEvalOptions = field(default_factory=MetaEvalOptions)
    output_dir: Optional[str] = None
    plots: bool = True
    progress: bool = True
    config: Q2Config = field(default_factory=Q2Config)

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise SettingError("dataset", f"unknown data set kind {self.dataset!r}; expected one of {sorted(DATASETS)}")
        if self.data is None and DATASETS[self.dataset].bundled is None:
            raise SettingError("data", f"dataset {self.dataset!r} has no bundled copy: give the path of its data")
        if (self.table is not None) != (self.dataset == "table"):
            raise SettingError("table", "the table columns apply to dataset 'table' only, and it needs them "
                                        f"(dataset {self.dataset!r} has a fixed format)")
        if (self.label_map or self.drop_unknown_labels) and self.dataset not in labelled():
            raise SettingError("label_map" if self.label_map else "drop_unknown_labels",
                               f"applies to the data sets with label values {list(labelled())}, not to "
                               f"{self.dataset!r}")
        if self.ragtruth_quality != "good" and self.dataset != "ragtruth":
            raise SettingError("ragtruth_quality", f"applies to dataset 'ragtruth', not to {self.dataset!r}")
        if self.save_scores and not self.compute:
            raise SettingError("save_scores", "writes the scores of compute; set compute too")

        unknown = [b for b in self.baselines if b not in BASELINE_NAMES]
        if unknown:
            raise SettingError("baselines", f"unknown baseline(s) {unknown}; expected names from "
                                            f"{list(BASELINE_NAMES)}")


def load_data(settings: MetaEvalSettings) -> Any:
    """The :class:`~q2_plugins.datasets.types.MetaEvalData` the settings name."""

    options: dict[str, Any] = {}
    if settings.dataset in labelled():
        options["labels"] = LabelOptions(dict(settings.label_map), settings.drop_unknown_labels)
    if settings.table is not None:
        options["table"] = settings.table
    if settings.dataset == "ragtruth":
        options["quality"] = settings.ragtruth_quality
    path = settings.data if settings.data is not None else default_data(settings.dataset)
    return load_dataset(settings.dataset, path, **options)


def _options(settings: MetaEvalSettings, data: Any) -> MetaEvalOptions:
    """The experiments to run on ``data``; the taxonomy experiment asked for on data without BEGIN's five-way labels
    is refused here, before any score is read or model loaded."""

    try:
        options = replace(settings.options, experiments=settings.experiments or data.experiments or EXPERIMENTS)
    except ValueError as e:
        raise SettingError("experiments", str(e)) from None
    if settings.experiments and "taxonomy" in settings.experiments and not has_begin_labels(data):
        found = sorted({ex.label for ex in data.examples})
        raise SettingError("experiments", f"the taxonomy experiment needs BEGIN's five-way labels ({', '.join(LABELS)})"
                                          f" and {Path(data.source).name} has none (its labels: "
                                          f"{', '.join(found[:6])}{', ...' if len(found) > 6 else ''}); BEGIN v1 has "
                                          f"them (its dev split is bundled, q2_plugins/data/begin_dev: dataset begin "
                                          f"with no data given reads it), and so do FaithDial's audits (dataset "
                                          f"faithdial)")
    return options


def _with_extra(options: MetaEvalOptions) -> bool:
    """The paired-context responses are scored for the system level and for TRUE's version of the Q² data."""
    return "system" in options.experiments or "benchmark" in options.experiments


def _inputs(settings: MetaEvalSettings, data: Any, options: Any) -> tuple[list, Optional[dict]]:
    """Every input to score (examples, paired-context responses, random-knowledge variants) and the variants."""

    variants = control_variants(data, settings.options.seed) if "random-knowledge" in options.experiments else None
    to_score = list(data.examples)
    if _with_extra(options):
        to_score += data.extra
    if variants:
        to_score += [v for by_id in variants.values() for v in by_id.values()]
    return to_score, variants


def export(settings: MetaEvalSettings) -> str:
    """Write every input to score to ``settings.export_inputs``; returns what was written (score it with
    explanations, and BEGIN labels for the taxonomy experiment, then evaluate with the same data settings and seed
    plus those scores)."""

    if not settings.export_inputs:
        raise SettingError("export_inputs", "name the file to write")
    data = load_data(settings)
    options = _options(settings, data)
    to_score, variants = _inputs(settings, data, options)
    n = export_inputs(settings.export_inputs, to_score)
    return (f"wrote {n} inputs to {settings.export_inputs}: {len(data.examples)} response-level examples"
            + (f", {len(data.extra)} more paired-context responses" if _with_extra(options) else "")
            + (f", {n - len(data.examples) - len(data.extra) * _with_extra(options)} random-knowledge inputs"
               if variants else "")
            + ("; the taxonomy experiment reads their BEGIN labels" if "taxonomy" in options.experiments else ""))


class _Metrics(list):
    """The run's metrics; a name already taken gets the source's tag, e.g. ``Q2 (computed)``."""

    def add(self, metrics: list, tag: str) -> None:
        taken = {m.name for m in self}
        for metric in metrics:
            if metric.name in taken:
                metric.name = f"{metric.name} ({tag})"
            if metric.name in taken:
                raise SettingError("scores", f"two score sources give the metric {metric.name!r}; name them "
                                             f"(NAME=FILE)")
            taken.add(metric.name)
            self.append(metric)


def _score_sources(settings: MetaEvalSettings, data: Any, options: Any, to_score: list,
                   get_scorer: Callable[[], Any]) -> _Metrics:
    """Scores from files, a replay and on-the-fly Q² (written to ``save_scores`` when asked)."""

    known = {ex.id: ex for ex in to_score}
    metrics = _Metrics()
    if settings.replay:
        metrics.add(replay_scores(settings.replay, known), "recorded")
    for name, path in settings.scores:
        metrics.add(read_scores_file(path, known, name=name or "Q2"), Path(path).stem)
    metrics.add(column_scores(data.examples), "column")
    if settings.compute:
        scorer = get_scorer()
        computed, results = compute_q2(to_score, scorer, progress=settings.progress)
        metrics.add(computed, "computed")
        if settings.save_scores:
            write_scores_file(settings.save_scores, [ex.id for ex in to_score], results, signature=scorer.signature,
                              config=scorer.config, source=data.source)
    if "dnli" in options.experiments:  # Q²* from the recorded questions of each Q² source that has them
        metrics.add([star for m in list(metrics) if not m.name.endswith("w/o NLI")
                     and (star := q2_star_metric(m)) is not None], "Q2*")
    return metrics


def _span_budget(settings: MetaEvalSettings, options: Any, to_score: list, notes: list[str]) -> Q2Config:
    """The Q² settings to compute with: for the spans experiment (RAGTruth's responses run to pages), a response
    budget left at its default is raised to the longest response, so that no response is left out of the span table
    for its length; the data's notes say so (the budget is part of the signature)."""
    config = settings.config
    default = Q2Config().max_response_chars
    longest = max((len(ex.response) for ex in to_score), default=0)
    if (not settings.compute or "spans" not in options.experiments or config.max_response_chars != default
            or longest <= default):
        return config
    notes.append(f"spans experiment: the response budget (max_response_chars) raised from its default {default} to "
                 f"{longest}, the longest response, so that no response is left out for its length")
    return replace(config, max_response_chars=longest)


def evaluate(settings: MetaEvalSettings) -> Any:
    """Load the data, bring in every score source and baseline, and run the experiments; returns the
    :class:`~q2_plugins.metaeval.experiments.MetaEvalRun` (nothing is written: :func:`save_outputs` does)."""

    data = load_data(settings)
    options = _options(settings, data)
    to_score, variants = _inputs(settings, data, options)
    config = _span_budget(settings, options, to_score, data.notes)
    scorer = None

    def get_scorer() -> Any:
        nonlocal scorer
        if scorer is None:
            scorer = Q2Scorer(config)
        return scorer

    metrics = _score_sources(settings, data, options, to_score, get_scorer)

    def nli_baseline() -> NLIBaseline:
        return NLIBaseline(get_scorer().nli, lowercase_knowledge=config.fallback_lowercase_knowledge,
                           lowercase_response=config.fallback_lowercase_response,
                           model_id=backends.identity("nli", config))

    bertscore = dict(model_type=settings.bertscore_model, num_layers=settings.bertscore_num_layers,
                     rescale_with_baseline=settings.bertscore_rescale, batch_size=settings.bertscore_batch_size,
                     device=config.device)
    baselines = build_baselines(settings.baselines, nli_factory=nli_baseline, bertscore=bertscore,
                                spacy_model=config.spacy_model, meteor_synonyms=settings.meteor_synonyms)
    metrics.add(score_baselines(baselines, to_score), "baseline")
    if settings.text_rules and (("taxonomy" in options.experiments and has_begin_labels(data))
                                or ("stress" in options.experiments and data.pairs)):
        metrics.add([text_rule_labels(data.examples, spacy_model=config.spacy_model)], "text rules")
    if settings.taxonomy_model and "taxonomy" in options.experiments and has_begin_labels(data):
        metrics.add([taxonomy_model_labels(data.examples, settings.taxonomy_model)], "taxonomy model")
    return run_meta_eval(data, list(metrics), options, variants=variants)


def variants(settings: MetaEvalSettings) -> dict[str, Any]:
    """The paper's Table 7: Q² and coverage per subset of the data scored with each cumulative variant (base,
    + personal-question filter, + top-k questions, + coreference) of ``settings.config``."""

    return variants_table(load_data(settings).examples, settings.config, Q2Scorer, progress=settings.progress)


def save_variants(settings: MetaEvalSettings, table: dict[str, Any]) -> list[Path]:
    """Write :func:`variants`' table as ``variants.json`` and ``variants.md`` to ``settings.output_dir``."""

    if not settings.output_dir:
        raise SettingError("output_dir", "name the folder to write the variants table to")
    out = Path(settings.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "variants.json", out / "variants.md"]
    write_text_atomic(paths[0], json.dumps(table, indent=2, ensure_ascii=False), setting="output_dir")
    write_text_atomic(paths[1], variants_markdown(table) + "\n", setting="output_dir")
    return paths


def save_outputs(settings: MetaEvalSettings, run: Any) -> list[Path]:
    """Write ``report.json``, ``report.md``, ``report.html`` and (unless ``plots`` is off) the PNG plots to
    ``settings.output_dir``; returns the report files."""

    if not settings.output_dir:
        raise SettingError("output_dir", "name the folder to write the report to")
    out = Path(settings.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if settings.plots:
        run.report["plots"] = [str(p) for p in plot_all(run, out)]
    return save_report(run.report, out)

