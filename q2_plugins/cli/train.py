"""``q2 train``: its flags, mapped onto :class:`~q2_plugins.training.train.TrainOptions`."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from q2_plugins.cli._common import add_column_flags
from q2_plugins.io.outputs import check_writable
from q2_plugins.training.train import TrainOptions, train, trained_summary


def add_parser(sub: Any, formatter: Any = None) -> Any:
    """Add the ``train`` sub-command to ``sub`` (the ``q2`` sub-parsers); flags map one-to-one onto
    :class:`TrainOptions` (the training ones named as ``TrainingArguments`` names them)."""
    p = sub.add_parser("train", help="fine-tune a 3-way NLI or 5-way BEGIN classifier on q2 perturb --recipe data",
                       description="Fine-tune a sequence classifier with the Hugging Face Trainer: premise = "
                                   "evidence + previous turn, hypothesis = response (docs/training.md).",
                       **({"formatter_class": formatter} if formatter else {}))
    d = TrainOptions("", "")
    p.add_argument("--train-file", required=True, help="JSONL / CSV / TSV: evidence, previous turn, response, label")
    p.add_argument("--output-dir", required=True, help="where the model, tokenizer, card and curve go")
    p.add_argument("--labels", type=int, choices=(3, 5), default=d.labels,
                   help="3: entailment / neutral / contradiction (an NLI model for --nli-model); 5: BEGIN's labels "
                        "(a --taxonomy-model)")
    p.add_argument("--base", default=d.base, help="any AutoModelForSequenceClassification checkpoint")
    p.add_argument("--init-from", metavar="DIR", help="second stage: start from this model's weights")
    p.add_argument("--eval-file", help="evaluated at each epoch's end and at the end (accuracy, macro-F1)")
    add_column_flags(p, notes={"knowledge_column": " (the evidence; at the default, 'evidence' when the file has "
                                                   "no 'knowledge')"})
    for name in ("previous_column", "label_column"):
        p.add_argument("--" + name.replace("_", "-"), help="default: found by its usual names")
    p.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    for name in ("max_length", "learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size",
                 "per_device_eval_batch_size", "gradient_accumulation_steps", "warmup_ratio", "weight_decay", "seed",
                 "logging_steps", "save_steps"):
        default = getattr(d, name)
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    p.add_argument("--resume-from-checkpoint", metavar="DIR", help="a checkpoint-N folder of an earlier run")
    p.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision (where the hardware has it)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--format", choices=("text", "json"), default="text", help="summary printed on stdout")
    return p


def options_from_args(args: Any) -> TrainOptions:
    """The typed settings of a parsed ``q2 train`` command line."""
    names = [f.name for f in dataclasses.fields(TrainOptions)]
    return TrainOptions(**{name: getattr(args, name) for name in names})


def run(args: Any) -> int:
    """``q2 train``: its output folder checked before anything loads, then :func:`train_and_report`."""
    check_writable(args.output_dir, "output_dir", folder=True)
    try:
        return train_and_report(options_from_args(args), args.format)
    except ModuleNotFoundError as e:
        raise SystemExit(f"q2 train: error: {e}") from None


def train_and_report(options: TrainOptions, output_format: str = "text") -> int:
    """Train, print the summary (``"text"`` or ``"json"``) on standard output; returns the exit code."""
    import contextlib
    import sys

    with contextlib.redirect_stdout(sys.stderr):  # the Trainer's log lines: standard output keeps the summary
        result = train(options)
    if output_format == "json":
        print(json.dumps({k: v for k, v in result.to_dict().items() if k != "log_history"}, indent=2))
        return 0
    losses = [h["loss"] for h in result.log_history if "loss" in h]
    print(f"q2 train: {trained_summary(result)}; the file has {result.n_train} examples {result.label_counts}"
          + (f"; loss {losses[0]:.4f} -> {losses[-1]:.4f}" if losses else ""))
    for view in ("3way", "5way"):
        if view in result.eval:
            e = result.eval[view]
            print(f"eval {view[0]}-way: accuracy {100 * e['accuracy']:.2f}%, macro-F1 {100 * e['macro_f1']:.1f} "
                  f"(majority label {e['majority_label']}: {100 * e['majority_accuracy']:.2f}%)")
    print(f"model, tokenizer, README.md (model card), training_curve.png in {result.output_dir}")
    return 0
