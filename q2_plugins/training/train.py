"""``q2 train``: fine-tune a sequence classifier on BEGIN-style or Conv-FEVER-style data, and use what it makes.

The input of every example is BEGIN's: "evidence + previous turn" as premise, the response as hypothesis. Labels are
BEGIN's five (``labels=5``) or the three-way view (``labels=3``: entailment / neutral / contradiction, the five folded
as BEGIN folds them; Conv-FEVER's consistent / inconsistent and FEVER's supports / refutes / not enough info map to
entailment / contradiction / neutral). Training is the Hugging Face ``Trainer``; the output folder holds the model
(safetensors), its tokenizer, ``id2label``, a model card (``README.md``: base, recipe, seed, data hash, evaluation
figures) and ``training_curve.png``. A three-way model is an NLI model Q² loads as ``nli_model``; a five-way model
labels responses (:class:`q2_plugins.backends.hf.labeller.TaxonomyModel`).

torch and transformers are imported only when a model is trained or loaded; a bad training file is rejected before.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.backends.hf.labeller import load_for_training
from q2_plugins.backends.loading import quiet_loading
from q2_plugins.datasets.textcheck import text_problem
from q2_plugins.io.columns import TextColumns
from q2_plugins.io.inputs import InputFormatError, read_checked_rows
from q2_plugins.io.outputs import atomic_file, replace_own, write_text_atomic
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.progress import CountLines
from q2_plugins.metric.taxonomy import COARSE, LABELS, LABELS3

__all__ = [
    "TrainDataError",
    "TrainOptions",
    "LabelledPair",
    "TrainResult",
    "label_names",
    "read_pairs",
    "train",
    "evaluate_labels",
]

#: where a file keeps the knowledge when the knowledge column is left at its default: the first of these it has
_KNOWLEDGE = (TextColumns.knowledge_column, "evidence")
_PREVIOUS = ("previous_turn", "previous turn", "message", "history")
_LABEL = ("label", "gold label")
_TO3 = {**COARSE, "neutral": "neutral", "consistent": "entailment", "inconsistent": "contradiction",
        "supports": "entailment", "refutes": "contradiction", "not enough info": "neutral"}


class TrainDataError(InputFormatError):
    """A training or evaluation file that cannot be used; the message says what to change."""


class ColumnError(TrainDataError, SettingError):
    """A training or evaluation file without the column a :class:`TrainOptions` setting names (or finds)."""


def label_names(n_labels: int) -> tuple[str, ...]:
    """The label set of a ``labels=3`` or ``labels=5`` model, in its ``id2label`` order."""
    if n_labels not in (3, 5):
        raise SettingError("labels", f"must be 3 or 5, got {n_labels}")
    return LABELS3 if n_labels == 3 else LABELS


@dataclass(frozen=True)
class TrainOptions(TextColumns):
    """What ``q2 train`` does; the names and meanings of the training settings are the ``TrainingArguments`` ones.

    The premise is the knowledge column (:class:`~q2_plugins.io.columns.TextColumns`; at its default, a file without
    it may hold the evidence in ``evidence``, as ``q2 perturb --recipe`` writes it) with the previous turn.

    ``max_steps`` > 0 overrides ``num_train_epochs``; ``save_steps`` 0 saves a checkpoint at each epoch's end.
    ``init_from`` (a folder ``q2 train`` wrote, or any classifier) starts a second stage from its weights instead of
    ``base``'s; its classification head is kept when its labels are this run's, else made anew.
    """

    train_file: str
    output_dir: str
    labels: int = 3
    base: str = "bert-base-uncased"
    init_from: Optional[str] = None
    eval_file: Optional[str] = None
    previous_column: Optional[str] = None
    label_column: Optional[str] = None
    input_format: Optional[str] = None
    max_length: int = 256
    learning_rate: float = 2e-5
    num_train_epochs: float = 3.0
    max_steps: int = -1
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 32
    gradient_accumulation_steps: int = 1
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    seed: int = 42
    logging_steps: int = 10
    save_steps: int = 0
    resume_from_checkpoint: Optional[str] = None
    bf16: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        label_names(self.labels)
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise SettingError("warmup_ratio", f"must be in [0, 1), got {self.warmup_ratio}")
        for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "max_length", "logging_steps"):
            if getattr(self, name) < 1:
                raise SettingError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.learning_rate <= 0:
            raise SettingError("learning_rate", f"must be positive, got {self.learning_rate}")


@dataclass(frozen=True)
class LabelledPair:
    """One classifier input: premise (evidence + previous turn), hypothesis (response) and label."""

    premise: str
    hypothesis: str
    label: str


@dataclass
class TrainResult:
    """Where the model went and what was measured: train / eval figures, throughput, the log history."""

    output_dir: str
    n_train: int
    label_counts: dict[str, int]
    data_sha256: str
    labels: list[str] = field(default_factory=list)
    eval: dict[str, Any] = field(default_factory=dict)
    train_seconds: float = 0.0
    examples_per_second: float = 0.0  # examples trained on (``examples_seen``) per second of training
    examples_seen: int = 0  # examples trained on in this run: steps x batch, not the file's count (``n_train``)
    steps: int = 0  # optimizer steps taken (the run's last step)
    log_history: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _column(first: dict[str, Any], given: Optional[str], candidates: Sequence[str], what: str, setting: str,
            path: str, required: bool = True) -> Optional[str]:
    if given:
        if given not in first:
            raise ColumnError(setting, f"{path} has no {what} column {given!r} (its columns: {sorted(first)})")
        return given
    found = next((c for c in candidates if c in first), None)
    if found is None and required:
        raise ColumnError(setting, f"{path} has no {what} column ({' / '.join(candidates)}; its columns: "
                                   f"{sorted(first)}); name it")
    return found


def _label(value: Any, n_labels: int, where: str) -> str:
    text = str(value).strip().lower() if value is not None else ""
    if n_labels == 5:
        if text not in LABELS:
            raise TrainDataError(f"{where}: label {value!r} is not one of BEGIN's five labels {list(LABELS)} "
                                 f"(a 3-way file trains with labels=3)")
        return text
    if text not in _TO3:
        raise TrainDataError(f"{where}: label {value!r} is unknown for labels=3; expected one of {sorted(_TO3)}")
    return _TO3[text]


def read_pairs(path: str, options: TrainOptions) -> list[LabelledPair]:
    """The labelled pairs of a JSONL / CSV / TSV file (``q2 perturb --recipe`` output, BEGIN's TSV, any table); a
    missing column, an unknown label, an empty file or a row whose text is no text (a number, a list, empty, a NUL,
    control or zero-width character, a lone surrogate: ``row 5: 'response' is a number``) raises
    :class:`TrainDataError` naming what to fix."""

    if not Path(path).is_file():
        raise TrainDataError(f"No training data file {path}")
    rows = list(read_checked_rows(path, options.input_format, (), error=TrainDataError))
    if not rows:
        raise TrainDataError(f"{path} holds no rows")
    first = rows[0][1]
    named = None if options.knowledge_column == TextColumns.knowledge_column else options.knowledge_column
    evidence = _column(first, named, _KNOWLEDGE, "knowledge", "knowledge_column", path)
    previous = _column(first, options.previous_column, _PREVIOUS, "previous-turn", "previous_column", path,
                       required=False)
    response = _column(first, options.response_column, (), "response", "response_column", path)
    label = _column(first, options.label_column, _LABEL, "label", "label_column", path)
    pairs = []
    for n, row in rows:
        where = f"{path} row {n}"
        if "__error__" in row:
            raise TrainDataError(f"{where}: {row['__error__']}")
        texts = [row.get(c) for c in (evidence, response)]
        prev = row.get(previous) if previous else None
        problem = (text_problem(texts[0], evidence) or text_problem(texts[1], response)
                   or text_problem(prev, previous or "", required=False))
        if problem:  # a number, a list, nothing visible, a NUL, zero-width or control character, a lone surrogate
            raise TrainDataError(f"{where}: {problem}")
        premise = f"{texts[0].strip()} {prev.strip()}" if isinstance(prev, str) and prev.strip() else texts[0].strip()
        pairs.append(LabelledPair(premise, texts[1].strip(), _label(row.get(label), options.labels, where)))  # type: ignore[union-attr]
    return pairs


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def evaluate_labels(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Accuracy and macro-F1 (over the labels present in the gold or the predicted labels) of predicted labels, with
    the three-way figures of five-way labels, the majority label's accuracy and the confusion counts."""
    if len(gold) != len(predicted):
        raise ValueError(f"Expected as many predictions as gold labels, got {len(predicted)} for {len(gold)}")
    five = all(g in LABELS for g in gold) and all(p in LABELS for p in predicted)
    out: dict[str, Any] = {"n": len(gold)}
    views = [("5way", LABELS, gold, predicted)] if five else []
    views.append(("3way", LABELS3, [_TO3[g] for g in gold], [_TO3[p] for p in predicted]))
    for name, labels, g, p in views:
        majority, m_count = Counter(g).most_common(1)[0] if g else ("", 0)
        f1 = []
        for label in labels:
            tp = sum(a == b == label for a, b in zip(g, p))
            n_gold, n_pred = g.count(label), p.count(label)
            if n_gold or n_pred:  # the labels present in the gold or the predicted labels, as q2 meta-eval
                f1.append(2 * tp / (n_gold + n_pred) if n_gold + n_pred else 0.0)
        out[name] = {"accuracy": sum(a == b for a, b in zip(g, p)) / len(g) if g else 0.0,
                     "macro_f1": sum(f1) / len(f1) if f1 else 0.0, "majority_label": majority,
                     "majority_accuracy": m_count / len(g) if g else 0.0,
                     "confusion": {a: {b: sum(x == a and y == b for x, y in zip(g, p)) for b in labels}
                                   for a in labels}}
    return out


def _load_for_training(options: TrainOptions) -> tuple[Any, Any, tuple[str, ...]]:
    """The starting model with a head for the run's labels, its tokenizer and the label order. A head of another size
    is re-initialised, as expected: one line says so (transformers' load report of the mismatch is not shown)."""

    start = options.init_from or options.base
    setting = "init_from" if options.init_from else "base"
    model, tokenizer, order, have = load_for_training(start, setting, label_names(options.labels))
    if have != len(order):
        print(f"q2 train: {start} has {have} labels: its classifier head is re-initialised for {len(order)} labels "
              f"({', '.join(order)}), as expected", file=sys.stderr)
    return model, tokenizer, order


class _Encoded:
    """A tokenised, labelled data set the ``Trainer`` reads (a plain sequence of feature dicts)."""

    def __init__(self, pairs: Sequence[LabelledPair], tokenizer: Any, order: Sequence[str], max_length: int) -> None:
        enc = tokenizer([p.premise for p in pairs], [p.hypothesis for p in pairs], truncation=True,
                        max_length=max_length)
        ids = {name: i for i, name in enumerate(order)}
        self.items = [{**{k: v[i] for k, v in enc.items()}, "labels": ids[p.label]} for i, p in enumerate(pairs)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.items[i]


def _counting_trainer(trainer_class: type) -> type:
    """``trainer_class`` that counts the examples it trains on (``seen``): its data loader reads a batch ahead."""

    class CountingTrainer(trainer_class):  # type: ignore[misc, valid-type]
        seen = 0

        def training_step(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            self.seen += int(inputs["labels"].shape[0])
            return super().training_step(model, inputs, *args, **kwargs)

    return CountingTrainer


def _plain_progress() -> bool:
    """Standard error is no terminal (a log file, a pipe): the steps go there as plain lines, not as a bar."""
    import sys

    return not getattr(sys.stderr, "isatty", lambda: False)()


def _step_lines(every: float = 30.0) -> Any:
    """A ``TrainerCallback`` that counts the optimiser steps on standard error as ``q2 score`` counts rows in a log:
    a ``q2 train: steps`` line at most every ``every`` seconds (with the last logged loss) and one at the end."""
    from transformers import TrainerCallback

    class StepLines(TrainerCallback):  # type: ignore[misc]
        lines: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.lines = CountLines("q2 train", state.max_steps or None, "step", None, every)
            self.lines.n = state.global_step  # (a resumed run starts at its checkpoint's step)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.lines.update(state.global_step - self.lines.n)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                self.lines.set_postfix_str(f"loss {logs['loss']:.4f}")

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.lines.close()

    return StepLines()


def _training_args(options: TrainOptions, has_eval: bool) -> Any:
    from transformers import TrainingArguments

    save = dict(save_strategy="steps", save_steps=options.save_steps) if options.save_steps > 0 else dict(
        save_strategy="epoch")
    return TrainingArguments(
        output_dir=options.output_dir, learning_rate=options.learning_rate,
        num_train_epochs=options.num_train_epochs, max_steps=options.max_steps,
        per_device_train_batch_size=options.per_device_train_batch_size,
        per_device_eval_batch_size=options.per_device_eval_batch_size,
        gradient_accumulation_steps=options.gradient_accumulation_steps, warmup_steps=options.warmup_ratio,
        weight_decay=options.weight_decay, seed=options.seed, data_seed=options.seed, bf16=options.bf16,
        logging_steps=options.logging_steps, logging_first_step=True, report_to="none",
        eval_strategy="epoch" if has_eval else "no", disable_tqdm=not options.progress or _plain_progress(),
        dataloader_num_workers=0, dataloader_pin_memory=False, **save)


def _predict(trainer: Any, data: _Encoded, order: Sequence[str]) -> list[str]:
    logits = trainer.predict(data).predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return [order[int(i)] for i in logits.argmax(-1)]


def train(options: TrainOptions) -> TrainResult:
    """Fine-tune, save the model folder (weights, tokenizer, ``id2label``, model card, training curve) and return
    what was measured. The training file (and evaluation file) are checked before any model is loaded."""
    import time

    pairs = read_pairs(options.train_file, options)
    eval_pairs = read_pairs(options.eval_file, options) if options.eval_file else None
    try:
        import accelerate  # noqa: F401  (the Trainer needs it)
    except ModuleNotFoundError:
        raise ModuleNotFoundError("q2 train needs accelerate: pip install -c constraints.txt '.[train]'") from None
    from transformers import DataCollatorWithPadding, PrinterCallback, Trainer, set_seed

    set_seed(options.seed)
    with quiet_loading():  # transformers' per-file bars (loading weights, writing shards and checkpoints)
        model, tokenizer, order = _load_for_training(options)
        train_data = _Encoded(pairs, tokenizer, order, options.max_length)
        eval_data = _Encoded(eval_pairs, tokenizer, order, options.max_length) if eval_pairs else None
        trainer = _counting_trainer(Trainer)(
            model=model, args=_training_args(options, eval_data is not None), train_dataset=train_data,
            eval_dataset=eval_data, data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer)
        if not options.progress or _plain_progress():  # without its bar the Trainer prints each log dict: the log
            trainer.remove_callback(PrinterCallback)       # history keeps them
        if options.progress and _plain_progress():  # a log: plain step lines instead of the bar's redraws
            trainer.add_callback(_step_lines())
        start = time.perf_counter()
        trainer.train(resume_from_checkpoint=options.resume_from_checkpoint)
        seconds = time.perf_counter() - start
        seen = trainer.seen
        _save(trainer, tokenizer, options.output_dir)
    result = TrainResult(
        output_dir=options.output_dir, n_train=len(pairs), label_counts=dict(Counter(p.label for p in pairs)),
        data_sha256=_sha256(options.train_file), labels=list(order), train_seconds=seconds,
        examples_per_second=seen / seconds if seconds > 0 else 0.0, examples_seen=seen,
        steps=int(trainer.state.global_step), log_history=list(trainer.state.log_history))
    if eval_data is not None and eval_pairs:
        result.eval = evaluate_labels([p.label for p in eval_pairs], _predict(trainer, eval_data, order))
        result.eval["file"] = options.eval_file
        result.eval["sha256"] = _sha256(options.eval_file)  # type: ignore[arg-type]
    _write_card(options, result, _recipes(options.train_file))
    _plot_curve(result.log_history, Path(options.output_dir) / "training_curve.png")
    return result


def _save(trainer: Any, tokenizer: Any, output_dir: str) -> None:
    """The model's and tokenizer's files saved in a new private folder inside ``output_dir``, then each renamed into
    place: a link planted at one of their names is replaced, never written through."""
    import shutil
    import tempfile

    Path(output_dir).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".q2-save-", dir=output_dir))
    try:
        trainer.save_model(str(staging))
        tokenizer.save_pretrained(str(staging))
        for file in sorted(staging.iterdir()):
            replace_own(file, Path(output_dir) / file.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def trained_summary(result: TrainResult) -> str:
    """What the training went through: examples trained on, steps, time and rate."""
    return (f"{result.examples_seen} examples trained on in {result.steps} steps, {result.train_seconds:.1f} s "
            f"({result.examples_per_second:.2f} examples/s)")


def _recipes(path: str) -> dict[str, int]:
    """How many training rows each ``q2 perturb`` recipe made (a file without a ``recipe`` field: none)."""

    return dict(Counter(str(row["recipe"]) for _, row in read_checked_rows(path, None, (), error=TrainDataError)
                        if row.get("recipe")))


def _first_base(options: TrainOptions) -> str:
    """The base a run starts from: with ``init_from``, the base recorded by the ``q2 train`` run that wrote it."""
    if not options.init_from:
        return options.base
    record = Path(options.init_from, "q2_train.json")
    if record.is_file():
        return str(json.loads(record.read_text(encoding="utf-8"))["options"]["base"])
    return options.init_from


def _write_card(options: TrainOptions, result: TrainResult, recipes: dict[str, int]) -> None:
    settings = {k: v for k, v in asdict(options).items() if k not in ("progress", "output_dir")}
    settings["base"] = _first_base(options)
    lines = ["---", "library_name: transformers", "pipeline_tag: text-classification",
             f"base_model: {options.init_from or options.base}", "tags: [q2-plugins, begin, factual-consistency]",
             "---", "", f"# {Path(options.output_dir).name}: {options.labels}-way BEGIN-style classifier", "",
             "Input: premise = evidence + previous turn, hypothesis = response. Trained with `q2 train` "
             f"(q2_plugins {__version__}).", "",
             f"- base: `{_first_base(options)}`" + (f"; second stage from `{options.init_from}`"
                                                   if options.init_from else ""),
             f"- labels (id2label order): {', '.join(result.labels)}",
             f"- recipe: {', '.join(f'{k} ({v} rows)' for k, v in recipes.items()) or 'none recorded in the file'}",
             f"- seed: {options.seed}",
             f"- training data: `{options.train_file}`, {result.n_train} examples, sha256 `{result.data_sha256}`",
             f"- label counts: {json.dumps(result.label_counts)}",
             f"- training: {trained_summary(result)}", ""]
    if result.eval:
        lines += [f"## Evaluation on `{result.eval['file']}` (n={result.eval['n']}, sha256 `{result.eval['sha256']}`)",
                  "", "| view | accuracy | macro-F1 | majority label | majority accuracy |", "|---|---|---|---|---|"]
        for view in ("3way", "5way"):
            if view in result.eval:
                e = result.eval[view]
                lines.append(f"| {view[0]}-way | {100 * e['accuracy']:.2f}% | {100 * e['macro_f1']:.1f} | "
                             f"{e['majority_label']} | {100 * e['majority_accuracy']:.2f}% |")
        lines.append("")
    lines += ["## Settings", "", "```json", json.dumps(settings, indent=2), "```", "",
              "![training curve](training_curve.png)", ""]
    write_text_atomic(Path(options.output_dir, "README.md"), "\n".join(lines), setting="output_dir")
    write_text_atomic(Path(options.output_dir, "q2_train.json"), json.dumps(
        {"options": settings, "recipes": recipes, **{k: v for k, v in result.to_dict().items()
                                                     if k != "log_history"}}, indent=2), setting="output_dir")


def _plot_curve(history: Sequence[dict[str, Any]], path: Path) -> Optional[Path]:
    """Training loss (and evaluation loss) by step; None when matplotlib (the ``metaeval`` extra) is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, style in (("loss", "-o"), ("eval_loss", "-s")):
        points = [(h["step"], h[key]) for h in history if key in h]
        if points:
            ax.plot(*zip(*points), style, label=key.replace("_", " "), markersize=3)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title("q2 train: training curve")
    ax.legend()
    fig.tight_layout()
    with atomic_file(path, binary=True, setting="output_dir") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)
    return path
