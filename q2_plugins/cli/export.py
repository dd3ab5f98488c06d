"""``q2 export``: its flags, mapped onto :class:`~q2_plugins.jobs.export.ExportOptions`."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from q2_plugins.io.outputs import check_writable
from q2_plugins.jobs.export import (
    HUB_DEFAULT_TASK,
    NO_NLI_DETAIL,
    TEST_MODELS_DETAIL,
    ExportOptions,
    HubResults,
    write_export,
)

#: setting -> flag, where the flag is not the setting's name with dashes
FLAGS = {"dataset_id": "--hub-dataset-id"}


def add_parser(sub: Any) -> Any:
    """Add the ``export`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    p = sub.add_parser("export", help="write a q2 score result file as Every Eval Ever records (schema 0.3.0)",
                       description="Write the aggregate record (q2.score and q2.score_no_nli with their 95% "
                                   "intervals and the signature; q2.score_no_nli alone for a run without NLI such as "
                                   "q2 replay) and one instance-level record per response (its "
                                   "questions and answers with --explain output) of a q2 score result file, in the "
                                   "layout of the Every Eval Ever repository: DIR/data/EVAL/DEVELOPER/MODEL/UUID.json "
                                   "and UUID_samples.jsonl; with --hub-dataset-id also the Hugging Face Hub's "
                                   "evaluation results of the model repository, DIR/.eval_results/q2.yaml and "
                                   "q2_no_nli.yaml. docs/export.md")
    p.add_argument("results", metavar="FILE", help="a result file of q2 score (JSONL, Parquet, CSV or a folder)")
    p.add_argument("--output-dir", required=True, help="where the data/... folders go")
    p.add_argument("--model-id", required=True,
                   help="the dialogue model that wrote the responses, as DEVELOPER/NAME (e.g. facebook/blenderbot)")
    p.add_argument("--model-name", help="its display name (default: NAME of --model-id)")
    p.add_argument("--evaluation-name", help="the evaluation's name (default: the result file's name)")
    p.add_argument("--dataset-name", help="the data set's name (default: the evaluation's name)")
    p.add_argument("--source-organization", default="unknown", help="who ran the evaluation (default: %(default)s)")
    p.add_argument("--evaluator-relationship", default="third_party",
                   choices=("first_party", "third_party", "collaborative", "other"),
                   help="the evaluator's relation to the model (default: %(default)s)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="a response is_correct when its score is above this (default: %(default)s)")
    p.add_argument("--sample-ids", choices=("id", "position"), default="id",
                   help="each instance record's sample_id: the row's id (which must not repeat) or its position in "
                        "the file, for a file whose ids repeat (default: %(default)s)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: %(default)s)")
    hub = p.add_argument_group("Hugging Face Hub evaluation results (.eval_results/*.yaml of the model repository)")
    hub.add_argument("--hub-dataset-id", metavar="ORG/NAME",
                     help="the benchmark data set the responses answer, as a Hub data set id; also writes "
                          "DIR/.eval_results/q2.yaml and q2_no_nli.yaml")
    hub.add_argument("--hub-task-id", metavar="TASK", default=HUB_DEFAULT_TASK,
                     help="the data set's subset or task (default: %(default)s, for a data set with one)")
    hub.add_argument("--hub-source-url", metavar="URL", help="where the figures can be checked (e.g. the report)")
    return p


def options_from_args(args: argparse.Namespace) -> ExportOptions:
    """The typed options of a parsed ``q2 export`` command line."""
    return ExportOptions(model_id=args.model_id, evaluation_name=args.evaluation_name, model_name=args.model_name,
                         dataset_name=args.dataset_name, source_organization=args.source_organization,
                         evaluator_relationship=args.evaluator_relationship, threshold=args.threshold,
                         sample_ids=args.sample_ids, confidence=args.confidence)


def hub_from_args(args: argparse.Namespace) -> Optional[HubResults]:
    """The Hub results asked for by a parsed ``q2 export`` command line (None without ``--hub-dataset-id``)."""
    if args.hub_dataset_id is None:
        if args.hub_task_id != HUB_DEFAULT_TASK or args.hub_source_url:
            raise ValueError("--hub-task-id and --hub-source-url describe the Hub results of --hub-dataset-id: name "
                             "the benchmark data set too")
        return None
    return HubResults(args.hub_dataset_id, task_id=args.hub_task_id, source_url=args.hub_source_url)


def run(args: argparse.Namespace) -> int:
    """``q2 export``: the records written, one line per file."""
    check_writable(args.output_dir, "output_dir", folder=True)
    paths = write_export(args.results, args.output_dir, options_from_args(args), hub_from_args(args))
    if paths.test_models:
        print(f"q2 export: the scores come from random-weight test models ({paths.test_models}; q2 "
              f"make-test-models) and mean nothing; the aggregate record says so "
              f"(eval_library.additional_details.{TEST_MODELS_DETAIL})", file=sys.stderr)
    if paths.no_nli:
        print(f"q2 export: {paths.no_nli}; q2.score is not exported, and the record says why "
              f"(eval_library.additional_details.{NO_NLI_DETAIL})", file=sys.stderr)
    print(f"aggregate   {paths.aggregate}")
    print(f"instances   {paths.instances}")
    for path in paths.hub:
        print(f"hub         {path}")
    return 0
