"""Every Eval Ever records of a scored run: ``q2 export``.

`Every Eval Ever <https://github.com/evaleval/every_eval_ever>`_ (schema 0.3.0, bundled in
``q2_plugins/data/every_eval_ever`` with its MIT licence) exchanges evaluation results as one aggregate record per
run and a JSON-lines file of instance-level records. From a result file of ``q2 score`` (read by the one reader,
:func:`q2_plugins.io.rows.read_results`), :func:`export_records` builds

- the aggregate record: the evaluation library (``q2-plugins`` and its version), the dialogue model that wrote the
  responses, and two results, ``q2.score`` and ``q2.score_no_nli`` (continuous in [0, 1], ``lower_is_better:
  false``), each with the interval of a mean score that ``q2 score`` prints
  (:func:`q2_plugins.metric.significance.mean_interval_of`, inside [0, 1]) and the closed-form standard error as its
  uncertainty, the counts and the signature in its details. A run without NLI (``cmp:f1`` in its signature: a
  ``q2 replay``, or ``q2 score --no-use-nli``) measured only Q2 w/o NLI: its record holds ``q2.score_no_nli`` alone
  and says why ``q2.score`` is absent (:data:`NO_NLI_DETAIL`);
- one instance-level record per response: the dialogue before it as the input, the knowledge as the reference, the
  response as the output, its Q² score (Q2 w/o NLI for a run without NLI) as the evaluation, and (from ``q2 score
  --explain``) its questions and answers in the metadata. ``is_correct`` says whether the score is above ``threshold``
  (0.5: the threshold of the paper's accuracy figures). A response without a score (a row error, or no valid question
  with the fallback off) is outside Q²'s mean: its record has score 0, ``is_correct: false`` and ``error`` saying why,
  and the aggregate counts it apart (``n_scored``), so read ``error`` before averaging instance scores.

:func:`write_export` writes both in the layout of the Every Eval Ever repository,
``DIR/data/<evaluation>/<developer>/<model>/<uuid>.json`` and ``<uuid>_samples.jsonl``; with a benchmark data set
(:class:`HubResults`) also the Hugging Face Hub's evaluation-results files of the model repository,
``DIR/.eval_results/q2.yaml`` and ``q2_no_nli.yaml`` (:func:`hub_eval_results`: one file per figure, as the Hub keeps
variants of one benchmark apart), to upload into the model's repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from q2_plugins import __version__
from q2_plugins.backends.loading import random_weight_models
from q2_plugins.io.outputs import open_folders, write_text_atomic
from q2_plugins.io.rows import read_results
from q2_plugins.metric import names as M
from q2_plugins.metric.errors import SettingError

__all__ = ["SCHEMA_VERSION", "SCHEMA_DIR", "LIBRARY", "METRIC_IDS", "HUB_RESULTS_DIR", "HUB_DEFAULT_TASK",
           "TEST_MODELS_DETAIL", "NO_NLI_DETAIL", "measured",
           "ExportOptions", "ExportPaths",
           "HubResults", "export_records", "hub_eval_results", "write_export", "load_schema"]

SCHEMA_VERSION = "0.3.0"
#: the bundled schemas (``eval.schema.json``, ``instance_level_eval.schema.json``) and their licence
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "data" / "every_eval_ever"
LIBRARY = "q2-plugins"
#: Every Eval Ever metric id -> (the declared figure, the result field of a response)
METRIC_IDS: dict[str, tuple[M.MetricName, str]] = {"q2.score": (M.Q2, "score"),
                                                   "q2.score_no_nli": (M.Q2_NO_NLI, "score_no_nli")}
#: the aggregate record's library detail saying why ``q2.score`` is absent (a run without NLI measured Q2 w/o NLI)
NO_NLI_DETAIL = "q2_score_absent"
_NO_NLI_REASON = ("the run compared answers by token F1 alone (signature cmp:f1: no NLI, e.g. q2 replay of recorded "
                  "steps, which keep no NLI labels, or q2 score --no-use-nli), so it measured Q2 w/o NLI "
                  "(q2.score_no_nli) and not Q2 (q2.score)")
_RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
#: the folder of a Hugging Face model repository that holds its evaluation results, one YAML file per benchmark
HUB_RESULTS_DIR = ".eval_results"
#: the task id of a benchmark data set with one task: the Hub's format requires ``dataset.task_id`` in every result
HUB_DEFAULT_TASK = "default"
#: Every Eval Ever metric id -> the name of its Hub results file and what its notes call the figure
_HUB_FILES = {"q2.score": ("q2.yaml", "Mean Q2 of the responses"),
              "q2.score_no_nli": ("q2_no_nli.yaml", "Mean Q2 without NLI (Q2 w/o NLI) of the responses")}


def load_schema(kind: str) -> dict[str, Any]:
    """The bundled schema ``"eval"`` (aggregate) or ``"instance_level_eval"``."""
    if kind not in ("eval", "instance_level_eval"):
        raise ValueError(f"Expected the schema 'eval' or 'instance_level_eval', but got {kind!r}")
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class ExportOptions:
    """What ``q2 export`` writes: ``model_id`` is the dialogue model that wrote the responses (Hugging Face form,
    ``developer/name``); ``evaluation_name`` defaults to the result file's name; ``sample_ids``: ``"id"`` (each row's
    ``id``, which must not repeat) or ``"position"`` (its position in the file, for files whose ids repeat)."""

    model_id: str
    evaluation_name: Optional[str] = None
    model_name: Optional[str] = None
    dataset_name: Optional[str] = None
    source_organization: str = "unknown"
    evaluator_relationship: str = "third_party"
    threshold: float = 0.5
    sample_ids: str = "id"
    confidence: float = M.INTERVAL_CONFIDENCE
    #: Unix time of the export (default: now) and the run's id (default: a random UUID4); fixed in tests
    timestamp: Optional[int] = None
    run_uuid: Optional[str] = None
    extra_details: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.model_id.strip():
            raise ValueError("Expected the id of the model that wrote the responses (model_id), e.g. org/model")
        if self.evaluator_relationship not in _RELATIONSHIPS:
            raise ValueError(f"Expected evaluator_relationship in {_RELATIONSHIPS}, but got "
                             f"{self.evaluator_relationship!r}")
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"Expected a threshold in [0, 1], but got {self.threshold}")
        if self.sample_ids not in ("id", "position"):
            raise ValueError(f"Expected sample_ids 'id' or 'position', but got {self.sample_ids!r}")
        if self.run_uuid is not None and uuid.UUID(self.run_uuid).version != 4:
            raise ValueError(f"Expected a UUID4 as run_uuid, but got {self.run_uuid!r}")


@dataclass(frozen=True)
class HubResults:
    """The Hub's evaluation-results files: the benchmark data set the responses answer (``dataset_id``, a Hub data set
    id such as ``org/name``; ``task_id`` its subset or task, :data:`HUB_DEFAULT_TASK` for a data set with one) and
    where the figures come from (``source_url``, e.g. the run's report, and its display name ``source_name``: the
    Hub's format has a source only with a URL, so without one the files have none)."""

    dataset_id: str
    task_id: str = HUB_DEFAULT_TASK
    source_url: Optional[str] = None
    source_name: str = LIBRARY

    def __post_init__(self) -> None:
        if not self.dataset_id.strip() or self.dataset_id.count("/") > 1 or any(c.isspace() for c in self.dataset_id):
            raise SettingError("dataset_id", f"expected the Hub id of the benchmark data set, e.g. org/name, but "
                                             f"got {self.dataset_id!r}")
        if not self.task_id or not self.task_id.strip():
            raise SettingError("task_id", f"expected the data set's task or subset (or {HUB_DEFAULT_TASK!r} for a "
                                          f"data set with one), but got {self.task_id!r}")
        if self.source_url is not None and not self.source_url.strip():
            raise SettingError("source_url", "expected the URL where the figures can be checked, but got an empty "
                                             "text (leave it out for no source)")


@dataclass(frozen=True)
class ExportPaths:
    aggregate: Path
    instances: Path
    hub: tuple[Path, ...] = ()
    test_models: str = ""  # the random-weight test models the aggregate names (their scores mean nothing)
    no_nli: str = ""  # why q2.score is absent (a run without NLI), else empty


def _text(value: Any) -> str:
    """A field as text: a list of turns or sentences joined by newlines, None as empty."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(v) for v in value)
    return str(value)


def _slug(text: str) -> str:
    """``text`` as one folder name: letters, digits, ``-``, ``_`` and ``.`` kept, every other character (a path
    separator, a control character) ``_``; a name of dots alone (``..``: the folder above) becomes underscores."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in text) or "unknown"
    return "_" * len(slug) if set(slug) == {"."} else slug


def _uncertainty(values: list[Optional[float]], options: ExportOptions) -> dict[str, Any]:
    """The standard error and the interval of the mean of ``values`` over the responses that have one: the one
    interval of a mean score (:func:`q2_plugins.metric.significance.mean_interval_of`, inside [0, 1]) that ``q2 score``
    prints."""
    # (lazy: numpy, which the command line does without)
    from q2_plugins.metric.significance import mean_interval_of

    out: dict[str, Any] = {"num_samples": sum(v is not None for v in values)}
    stderr, interval = mean_interval_of(values, options.confidence)
    if stderr is not None:
        out["standard_error"] = {"value": stderr, "method": "analytic"}
    if interval is not None and interval.low is not None and interval.high is not None:
        out["confidence_interval"] = {"lower": interval.low, "upper": interval.high,
                                      "confidence_level": options.confidence, "method": M.MEAN_INTERVAL_METHOD}
    return out


@dataclass(frozen=True)
class _Run:
    """What every record of one export shares."""

    name: str
    evaluation_id: str
    signature: str
    options: ExportOptions


def _instance(run: _Run, metric_id: str, row: dict[str, Any], res: Any, position: int, columns: dict[str, Any]
              ) -> dict[str, Any]:
    """The instance-level record of one response for the figure ``metric_id`` (see the module docstring)."""
    score = getattr(res, METRIC_IDS[metric_id][1])
    history = _text(row.get(columns.get("history") or "history"))
    knowledge, response = _text(row.get(columns["knowledge"])), _text(row.get(columns["response"]))
    metadata = {"status": res.status, "signature": run.signature, "score_no_nli": json.dumps(res.score_no_nli),
                "used_fallback": json.dumps(res.used_fallback), "num_questions": str(res.num_questions)}
    if res.questions is not None:
        metadata["questions"] = json.dumps([vars(q) for q in res.questions], ensure_ascii=False)
        metadata["dropped"] = json.dumps([vars(d) for d in res.dropped or []], ensure_ascii=False)
    return {
        "schema_version": SCHEMA_VERSION, "evaluation_id": run.evaluation_id, "model_id": run.options.model_id,
        "evaluation_name": run.name, "evaluation_result_id": f"{run.name}/{metric_id}",
        "sample_id": str(position if run.options.sample_ids == "position"
                         else row.get("id", row.get("row", position))),
        "sample_hash": hashlib.sha256((history + "\n" + knowledge).encode("utf-8")).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": history, "reference": [knowledge]},
        "output": {"raw": [response]},
        "messages": None,
        "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": response,
                                "extraction_method": "q2", "is_terminal": True}],
        "evaluation": {"score": 0.0 if score is None else score,
                       "is_correct": score is not None and score > run.options.threshold},
        "error": None if score is not None else (f"{res.status}: {res.error}" if res.error else res.status),
        "metadata": metadata,
    }


def _result(run: _Run, metric_id: str, results: list[Any], source: dict[str, Any]) -> dict[str, Any]:
    """The aggregate result of the metric ``metric_id`` (see :data:`METRIC_IDS`)."""
    figure, result_field = METRIC_IDS[metric_id]
    values = [getattr(r, result_field) for r in results]
    kept = [v for v in values if v is not None]
    if not kept:
        raise ValueError(f"{source['additional_details']['results_file']}: no response has a score; nothing to "
                         f"export")
    counts = {"n": str(len(results)), "n_scored": str(len(kept)),
              "n_errors": str(sum(r.status == "error" for r in results))}
    return {
        "evaluation_result_id": f"{run.name}/{metric_id}",
        "evaluation_name": run.name,
        "source_data": source,
        "metric_config": {
            "evaluation_description": f"Q2 factual consistency of dialogue responses with their knowledge: "
                                      f"{figure.description}",
            "metric_id": metric_id, "metric_name": figure.key, "metric_kind": "factual_consistency",
            "metric_unit": "proportion", "lower_is_better": not figure.higher_is_better,
            "score_type": "continuous", "min_score": figure.bounds[0], "max_score": figure.bounds[1],
            "metric_parameters": {"threshold": run.options.threshold},
            "additional_details": {"signature": run.signature}},
        "score_details": {"score": sum(kept) / len(kept), "details": {"signature": run.signature, **counts},
                          "uncertainty": _uncertainty(values, run.options)},
    }


def measured(signature: str) -> tuple[str, ...]:
    """The metric ids (:data:`METRIC_IDS`) a run of ``signature`` measured: both, or only ``q2.score_no_nli`` for a
    run without NLI (``cmp:f1``), whose ``score`` is Q2 w/o NLI."""
    no_nli = re.search(r"(?:^|\|)cmp:f1(?:\||$)", signature) is not None
    return ("q2.score_no_nli",) if no_nli else tuple(METRIC_IDS)


def export_records(rows: Any, options: ExportOptions) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The aggregate record and the instance-level records of ``rows`` (a :class:`~q2_plugins.io.rows.ResultRows`:
    one run, one signature)."""
    signatures = rows.signatures
    if len(signatures) != 1:
        raise ValueError(f"{rows.path}: an export is of one run with one signature, but the file carries "
                         f"{len(signatures)} (" + (" / ".join(s[:40] for s in signatures) or "none") + ")")
    results = rows.results()
    timestamp = int(time.time()) if options.timestamp is None else options.timestamp
    name = options.evaluation_name or rows.path.name.split(".")[0]
    developer, _, model = options.model_id.rpartition("/")
    run = _Run(name, f"{name}/{options.model_id}/{timestamp}", signatures[0], options)
    metric_ids = measured(run.signature)
    instances = [_instance(run, metric_ids[0], row, res, i, rows.columns)
                 for i, (row, res) in enumerate(zip(rows.rows, results))]
    source = {"dataset_name": options.dataset_name or name, "source_type": "other",
              "additional_details": {"results_file": rows.path.name}}
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in instances)
    samples_path = (f"data/{_slug(name)}/{_slug(developer or 'unknown')}/{_slug(model)}/"
                    f"{options.run_uuid or uuid.uuid4()}_samples.jsonl")
    aggregate = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": run.evaluation_id,
        "retrieved_timestamp": str(timestamp),
        "source_metadata": {"source_name": LIBRARY, "source_type": "evaluation_run",
                            "source_organization_name": options.source_organization,
                            "evaluator_relationship": options.evaluator_relationship},
        "eval_library": {"name": LIBRARY, "version": __version__,
                         "additional_details": {"signature": run.signature, **_test_models(rows),
                                                **({} if "q2.score" in metric_ids else {NO_NLI_DETAIL: _NO_NLI_REASON}),
                                                **options.extra_details}},
        "model_info": {"name": options.model_name or model, "id": options.model_id,
                       **({"developer": developer} if developer else {}),
                       "additional_details": {"deployment_type": "unknown", "model_availability": "unknown"}},
        "evaluation_results": [_result(run, metric_id, results, source) for metric_id in metric_ids],
        "detailed_evaluation_results": {"format": "jsonl", "file_path": samples_path, "hash_algorithm": "sha256",
                                        "checksum": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                                        "total_rows": len(instances)},
    }
    return aggregate, instances


def _yaml(value: Any, indent: str = "") -> str:
    """``value`` (dicts of text, numbers and dicts) as block YAML; text double-quoted with JSON's escapes, which YAML
    reads as the same text, and every character YAML would not read back as itself (DEL, C1 controls, U+FFFE, the
    line separators) escaped."""
    lines = []
    for key, v in value.items():
        if isinstance(v, dict):
            lines.append(f"{indent}{key}:\n{_yaml(v, indent + '  ')}")
        else:
            lines.append(f"{indent}{key}: {_YAML_UNPRINTABLE.sub(_yaml_escape, json.dumps(v, ensure_ascii=False))}")
    return "\n".join(lines)


#: the characters that JSON's escapes leave as they are but YAML does not read back as themselves: those outside
#: its printable set (YAML 1.2, 5.1) and the line breaks YAML 1.1 folds to a space (NEL, U+2028, U+2029)
_YAML_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _yaml_escape(match: "re.Match[str]") -> str:
    return f"\\u{ord(match.group()):04x}"


#: the aggregate record's library detail naming random-weight test models (their scores mean nothing)
TEST_MODELS_DETAIL = "random_weight_test_models"


def _test_models(rows: Any) -> dict[str, str]:
    """``{TEST_MODELS_DETAIL: "qa_model, ..."}`` when the run's models were random-weight test models (named by the
    sidecar's settings, or by the rows of a front end without one), else nothing."""
    found = random_weight_models((rows.meta or {}).get("config"))
    found += [n for n in (rows.meta or {}).get("random_weights") or () if isinstance(n, str) and n not in found]
    for row in rows.rows:
        found += [n for n in row.get("random_weights") or () if isinstance(n, str) and n not in found]
    return {TEST_MODELS_DETAIL: ", ".join(found)} if found else {}


def hub_eval_results(aggregate: dict[str, Any], hub: HubResults) -> dict[str, str]:
    """The Hub's evaluation-results files of an aggregate record (:func:`export_records`): file name -> YAML text, one
    file per figure, each a list of one result (the data set, the figure in [0, 1], the date of the run, the source,
    and notes naming the figure, its interval and the signature). Refused (a :class:`SettingError`) for a run of
    random-weight test models: a model page would show their meaningless figures."""
    test_models = aggregate["eval_library"]["additional_details"].get(TEST_MODELS_DETAIL)
    if test_models:
        raise SettingError("dataset_id", f"the scores come from random-weight test models ({test_models}; q2 "
                                         f"make-test-models) and mean nothing; Hub results of them would mislead: "
                                         f"score with real models")
    date = time.strftime("%Y-%m-%d", time.gmtime(int(aggregate["retrieved_timestamp"])))
    files = {}
    for result in aggregate["evaluation_results"]:
        name, label = _HUB_FILES[result["metric_config"]["metric_id"]]
        details = result["score_details"]
        interval = details["uncertainty"].get("confidence_interval")
        span = "" if interval is None else (f"; {interval['confidence_level']:.0%} interval [{interval['lower']:.4f}, "
                                            f"{interval['upper']:.4f}] ({interval['method']})")
        notes = (f"{label} (Honovich et al., 2021), in [0, 1], higher is better, over "
                 f"{details['details']['n_scored']} of {details['details']['n']} responses{span}; {LIBRARY} "
                 f"{__version__}, signature {details['details']['signature']}")
        source = {"source": {"url": hub.source_url, "name": hub.source_name}} if hub.source_url else {}
        entry = {"dataset": {"id": hub.dataset_id, "task_id": hub.task_id}, "value": round(details["score"], 4),
                 "date": date, **source, "notes": notes}
        files[name] = "- " + _yaml(entry, "  ")[2:] + "\n"
    return files


_REPEATED_IDS = ("export it with q2 export --sample-ids position (each row's position in the file becomes its id), or "
                 "write each subset to a file of its own")


def write_export(results: str | Path, output_dir: str | Path, options: ExportOptions,
                 hub: Optional[HubResults] = None) -> ExportPaths:
    """Read the result file ``results`` and write its records under ``output_dir`` (see the module docstring); with
    ``hub``, also the Hub's evaluation-results files. Every file is written new and renamed into place (a link
    planted where one goes is refused, never written through)."""

    aggregate, instances = export_records(read_results(results, id_field=None if options.sample_ids == "position"
                                                       else "id", repeated_ids=_REPEATED_IDS), options)
    hub_files = hub_eval_results(aggregate, hub) if hub is not None else {}  # (refused before any file is written)
    samples = Path(output_dir) / aggregate["detailed_evaluation_results"]["file_path"]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in instances)
    record = samples.with_name(samples.name.removesuffix("_samples.jsonl") + ".json")
    # each folder below output_dir entered without following a link: a link planted there is refused
    folder = open_folders(output_dir, samples.relative_to(output_dir).parts[:-1], setting="output_dir")
    try:
        write_text_atomic(samples, text, setting="output_dir", dir_fd=folder)
        write_text_atomic(record, json.dumps(aggregate, indent=2, ensure_ascii=False) + "\n", setting="output_dir",
                          dir_fd=folder)
    finally:
        os.close(folder)
    written = []
    if hub_files:
        folder = open_folders(output_dir, [HUB_RESULTS_DIR], setting="output_dir")
        try:
            for name, yaml_text in hub_files.items():
                write_text_atomic(Path(output_dir) / HUB_RESULTS_DIR / name, yaml_text, setting="output_dir",
                                  dir_fd=folder)
                written.append(Path(output_dir) / HUB_RESULTS_DIR / name)
        finally:
            os.close(folder)
    details = aggregate["eval_library"]["additional_details"]
    return ExportPaths(record, samples, tuple(written), details.get(TEST_MODELS_DETAIL, ""),
                       details.get(NO_NLI_DETAIL, ""))
