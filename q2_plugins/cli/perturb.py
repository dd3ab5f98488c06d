"""``q2 perturb``: its flags, mapped onto :class:`~q2_plugins.training.perturb.PerturbOptions`."""

from __future__ import annotations

from typing import Any

from q2_plugins.cli._common import add_column_flags
from q2_plugins.io.outputs import check_writable
from q2_plugins.training.perturb import DATASETS, METHODS, PerturbOptions, stress_pairs
from q2_plugins.training.recipes import run_recipe

#: setting -> flag, where the flag is not the setting's name with dashes
FLAGS = {"inputs": "--input"}


def add_parser(sub: Any) -> Any:
    """Add the ``perturb`` sub-command to ``sub`` (the ``q2`` sub-parsers)."""
    p = sub.add_parser("perturb", help="turn a grounded-dialogue file into labelled stress pairs or a training set",
                       description="Perturb each (response, knowledge) row: negation, entity swap, random pairing, "
                                   "subject/object inversion of the knowledge. Writes one JSONL pair per applicable "
                                   "method; rows a method does not apply to are skipped and counted. With --recipe "
                                   "begin|conv-fever: a training set for q2 train (docs/training.md).")
    p.add_argument("--input", action="append", required=True,
                   help="JSONL or CSV/TSV file, one response per row (a recipe takes several --input, and a Q2 WoW "
                        "folder or a BEGIN TSV as they are)")
    p.add_argument("--output", required=True, help="JSONL file of stress pairs or training examples")
    p.add_argument("--recipe", choices=("begin", "conv-fever"),
                   help="make a training set: BEGIN's balanced five-label silver set, or Conv-FEVER's data")
    p.add_argument("--dataset", choices=DATASETS, default="auto",
                   help="how each --input is read (recipes; auto: a folder is wow, a TSV with BEGIN columns begin, "
                        "a .json list of dialogues wow-json: ParlAI's wizard_of_wikipedia)")
    p.add_argument("--generator", metavar="MODEL",
                   help="--recipe begin: a causal or seq2seq LM writes the hallucinations from related evidence "
                        "(default: the related evidence's own response)")
    p.add_argument("--no-balance", dest="balance", action="store_false",
                   help="--recipe begin: keep every example instead of as many per label as the rarest has")
    p.add_argument("--exclude", action="append", default=[], metavar="EVAL_FILE",
                   help="--recipe: an evaluation file (or folder) the set will be scored against: rows sharing an "
                        "evidence passage or a response with it (case and spacing aside) are dropped and counted")
    p.add_argument("--input-format", choices=("jsonl", "csv", "tsv"), help="default: from the file extension")
    add_column_flags(p)
    p.add_argument("--previous-column", help="previous turn, for recipes (default: 'previous turn', "
                                             "'previous_turn' or 'message' when the file has one)")
    p.add_argument("--id-column", help="row ids (default: 'id' when the file has it, else the row number)")
    p.add_argument("--topic-column", help="topics for the random pairing (default: 'topic' when the file has it)")
    p.add_argument("--keep", metavar="COLUMN=VALUE[,VALUE]",
                   help="only rows whose COLUMN is one of the values, e.g. 'gold label=entailment' for BEGIN")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"stress pairs: comma-separated from {list(METHODS)} (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preview", type=int, default=0, metavar="N",
                   help="--recipe: print N random examples of each method, the change marked and the rule behind "
                        "its label")
    p.add_argument("--spacy-model", default="en_core_web_sm")
    p.add_argument("--format", choices=("text", "json"), default="text", help="summary printed on stdout")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no row count on standard error (a bar on a terminal, plain lines otherwise)")
    return p


def options_from_args(args: Any) -> PerturbOptions:
    """The typed settings of a parsed ``q2 perturb`` command line."""
    return PerturbOptions(
        inputs=tuple(args.input), output=args.output, recipe=args.recipe, dataset=args.dataset,
        input_format=args.input_format, response_column=args.response_column,
        knowledge_column=args.knowledge_column, previous_column=args.previous_column, id_column=args.id_column,
        topic_column=args.topic_column, keep=args.keep,
        methods=tuple(m.strip() for m in args.methods.split(",") if m.strip()), seed=args.seed,
        spacy_model=args.spacy_model, generator=args.generator, balance=args.balance, exclude=tuple(args.exclude))


def run(args: Any) -> int:
    """``q2 perturb``: map the flags onto :class:`PerturbOptions`, make the pairs or the training set, print the
    summary."""
    import json

    check_writable(args.output, "output")
    options = options_from_args(args)
    if options.recipe is not None:
        summary, lines = run_recipe(options, preview=args.preview, progress=args.progress)
    else:
        summary = stress_pairs(options, progress=args.progress)
        lines = _stress_lines(summary, options)
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.format == "json" else "\n".join(lines))
    return 0


def _stress_lines(summary: dict[str, Any], options: PerturbOptions) -> list[str]:
    kept = f" ({summary['n_rows']} kept by --keep {options.keep})" if options.keep else ""
    lines = [f"q2 perturb: {summary['n_read']} rows read{kept}, seed {options.seed}, "
             f"topics: {summary['topic_column'] or 'none'}", "| method | pairs | skipped | why skipped |",
             "|---|---|---|---|"]
    for method, m in summary["methods"].items():
        why = "; ".join(f"{reason}: {count}" for reason, count in m["reasons"].items())
        lines.append(f"| {method} | {m['pairs']} | {m['skipped']} | {why} |")
    lines.append(f"wrote {summary['n_pairs']} pairs to {options.output}")
    return lines
