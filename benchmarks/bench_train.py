#!/usr/bin/env python
"""Does ``q2 train`` learn? A small BERT trained from scratch on CPU on a BEGIN silver set, and training throughput.

1. The silver set (``q2 perturb --recipe begin``) is built from bundled data that is *not* the evaluation set: the
   Q² WoW annotations' consistent responses and BEGIN v2 dev's fully attributable ones (WoW, CMU-DoG, TopicalChat),
   less every row sharing an evidence passage or a response with BEGIN v1 dev (v2 dev shares dozens with it). It is
   split (seeded) by evidence passage into a training part and a held-out part, and a training row sharing a passage
   or a response with the held-out part is dropped (the stock generic replies excepted: the recipe writes them from
   one short list, so they repeat by design). Every count removed, and the overlap left, is printed.
2. A WordPiece tokenizer is trained on the training part's text, and a small BERT (random init) is trained on it with
   ``q2_plugins.training.train.train`` (the Hugging Face ``Trainer``), five-way.
3. Evaluated on the held-out silver part and on BEGIN v1 dev (836 human-labelled responses) beside two floors on
   the same split: the majority label and a surface baseline (the recipe audit's logistic regression on 12 surface
   features, trained on the same training rows): five-way and three-way accuracy and macro-F1, with the training
   curve (loss by step) printed.
4. Throughput: a few ``Trainer`` steps of a bert-base-sized classifier (random weights: a step costs the same) on the
   same data; examples / s and the share of the machine's fp32 matmul peak (measured here, square ``torch.mm``),
   counting 6 FLOPs per parameter per token (forward + backward) plus attention.

    python benchmarks/bench_train.py [--epochs 5] [--base-steps 3] [--threads 1] [--json out/bench_train.json]

Measures and prints; asserts nothing. Timings are only meaningful as ratios within one run on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins.backends.hf.labeller import TaxonomyModel  # noqa: E402
from q2_plugins.datasets.grounded import read_sources  # noqa: E402
from q2_plugins.training.begin import GENERIC_RESPONSES  # noqa: E402
from q2_plugins.training.examples import (  # noqa: E402
    LEAKED,
    EvaluationTexts,
    TrainingRow,
    evaluation_texts,
    label_table,
    normalised,
)
from q2_plugins.training.perturb import PerturbOptions  # noqa: E402
from q2_plugins.training.recipes import make_training_set  # noqa: E402
from q2_plugins.training.train import TrainOptions, evaluate_labels, train  # noqa: E402

BEGIN_V1_DEV = Path("begin_dev") / "dev_05_24_21.tsv"


def stock(row: TrainingRow) -> bool:
    """Whether a row's response is one of the recipe's stock generic replies (they repeat across any split)."""
    reply = normalised(row.response)
    return row.method == "generic_response" and any(reply.endswith(normalised(g)) for g in GENERIC_RESPONSES)


def split_by_passage(made: list[TrainingRow], seed: int, held_out: float
                     ) -> tuple[list[TrainingRow], list[TrainingRow], int]:
    """(train, held-out, rows dropped): the held-out part is every row of a random ``held_out`` share of the
    evidence passages; a training row sharing a passage or a response with it is dropped (stock generic replies
    aside)."""
    passages = sorted({normalised(r.evidence) for r in made})
    random.Random(seed).shuffle(passages)
    test = set(passages[: int(len(passages) * held_out)])
    held = [r for r in made if normalised(r.evidence) in test]
    texts = EvaluationTexts(frozenset(test), frozenset(normalised(r.response) for r in held if not stock(r)))
    rest = [r for r in made if normalised(r.evidence) not in test]
    train_rows = [r for r in rest if not texts.shares(r.evidence, "" if stock(r) else r.response)]
    return train_rows, held, len(rest) - len(train_rows)


def overlap_left(train_rows: list[TrainingRow], *evaluations: EvaluationTexts) -> int:
    """Training rows sharing an evidence passage or a (non-stock) response with any evaluation set: 0 when clean."""
    return sum(any(e.shares(r.evidence, "" if stock(r) else r.response) for e in evaluations) for r in train_rows)


def silver_split(data: Path, out: Path, seed: int, held_out: float) -> tuple[Path, Path, dict[str, Any]]:
    """Silver set from q2_wow + BEGIN v2 dev without BEGIN v1 dev's passages and responses, split by passage into
    train / held-out JSONL files (:func:`split_by_passage`)."""
    inputs = [data / "q2_wow"] + sorted((data / "begin_v2_dev").glob("*/*.tsv"))
    sources = [row for path in inputs
               for row in read_sources(str(path), PerturbOptions(inputs=(str(path),), output="-"))]
    begin_v1 = evaluation_texts([str(data / BEGIN_V1_DEV)])
    made, report = make_training_set(sources, recipe="begin", seed=seed, held_out=begin_v1)
    train_rows, held, dropped = split_by_passage(made, seed, held_out)
    held_texts = EvaluationTexts(frozenset(normalised(r.evidence) for r in held),
                                 frozenset(normalised(r.response) for r in held if not stock(r)))
    files = {"train": out / "silver_train.jsonl", "held_out": out / "silver_held_out.jsonl"}
    for path, rows in ((files["train"], train_rows), (files["held_out"], held)):
        path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    removed = {"grounded_rows_sharing_with_begin_v1_dev": report.skipped.get("original", {}).get(LEAKED, 0),
               "examples_sharing_with_begin_v1_dev": sum(c.get(LEAKED, 0) for m, c in report.skipped.items()
                                                          if m != "original"),
               "training_rows_sharing_with_held_out": dropped,
               "overlap_left": overlap_left(train_rows, begin_v1, held_texts)}
    print(f"silver set: {len(sources)} grounded rows from {', '.join(p.name for p in inputs)}")
    print("\n".join(label_table(report)))
    print(f"removed for leakage: {removed['grounded_rows_sharing_with_begin_v1_dev']} grounded rows and "
          f"{removed['examples_sharing_with_begin_v1_dev']} examples sharing an evidence passage or a response with "
          f"BEGIN v1 dev; {dropped} training rows sharing one with the held-out part; overlap left: "
          f"{removed['overlap_left']}; training rows {len(train_rows)}, held-out rows {len(held)}")
    return files["train"], files["held_out"], {"n_sources": len(sources), "labels": dict(report.labels),
                                               "removed": removed, "n_train": len(train_rows), "n_held_out": len(held)}


def surface_floor(train_file: Path, sets: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    """The surface baseline on each evaluation set: the recipe audit's probe (logistic regression on its 12 surface
    features) trained on the training file's rows, scored as the detector is (:func:`evaluate_labels`)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from benchmarks.audit_recipes import surface_features

    rows = [json.loads(line) for line in train_file.read_text().splitlines()]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit([surface_features(r) for r in rows], [r["label"] for r in rows])
    return {name: evaluate_labels([r["label"] for r in items], list(model.predict([surface_features(r)
                                                                                   for r in items])))
            for name, items in sets.items()}


def small_bert(train_file: Path, path: Path, seed: int, **size: Any) -> Path:
    """A BERT of ``size`` with random weights and a WordPiece vocabulary trained on the training file's text."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    from q2_plugins.metric.taxonomy import LABELS

    texts = []
    for line in train_file.read_text().splitlines():
        row = json.loads(line)
        texts += [row["evidence"], row["previous_turn"], row["response"]]
    path.mkdir(parents=True, exist_ok=True)
    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator(texts, vocab_size=size.pop("vocab", 8000), min_frequency=2, show_progress=False)
    wp.save_model(str(path))
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True, model_max_length=512)
    config = BertConfig(vocab_size=max(len(tokenizer), size.pop("model_vocab", 0)), num_labels=len(LABELS),
                        id2label=dict(enumerate(LABELS)), label2id={k: i for i, k in enumerate(LABELS)}, **size)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def matmul_peak(n: int = 1024, reps: int = 8) -> float:
    """fp32 GFLOP/s of square ``torch.mm``, best of ``reps``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best / 1e9


def evaluate(model_dir: Path, rows: list[dict[str, str]]) -> dict[str, Any]:
    model = TaxonomyModel(str(model_dir), max_length=128)
    predicted = model.predict([r["evidence"] for r in rows], [r["previous"] for r in rows],
                              [r["response"] for r in rows])
    return evaluate_labels([r["label"] for r in rows], predicted)


def begin_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return [{"evidence": r["evidence"], "previous": r["previous turn"], "response": r["response"],
                 "label": r["gold label"]} for r in csv.DictReader(f, delimiter="\t")]


def show(name: str, figures: dict[str, Any], floor: dict[str, Any]) -> None:
    for view in ("5way", "3way"):
        e, s = figures[view], floor[view]
        print(f"| {name} | {view[0]}-way | {figures['n']} | {100 * e['accuracy']:.2f}% | {100 * e['macro_f1']:.1f} | "
              f"{e['majority_label']} {100 * e['majority_accuracy']:.2f}% | {100 * s['accuracy']:.2f}% | "
              f"{100 * s['macro_f1']:.1f} |")


def throughput(train_file: Path, tokenizer_dir: Path, work: Path, steps: int, batch: int, seed: int) -> dict:
    """A few Trainer steps of a bert-base-sized classifier: examples / s and the share of the matmul peak."""
    base = small_bert(train_file, work / "bert_base", seed, hidden_size=768, num_hidden_layers=12,
                      num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                      model_vocab=30522)
    opts = TrainOptions(train_file=str(train_file), output_dir=str(work / "bert_base_out"), labels=5, base=str(base),
                        max_length=128, max_steps=steps, per_device_train_batch_size=batch, save_steps=10 ** 6,
                        logging_steps=1, seed=seed, progress=False)
    result = train(opts)
    from transformers import AutoTokenizer, BertConfig

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rows = [json.loads(line) for line in train_file.read_text().splitlines()]
    lengths = [len(tok(f"{r['evidence']} {r['previous_turn']}", r["response"], truncation=True,
                       max_length=128)["input_ids"]) for r in rows]
    mean_len = sum(lengths) / len(lengths)
    cfg = BertConfig.from_pretrained(str(base))
    h, layers, inter = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size
    per_layer = 4 * h * h + 2 * h * inter  # weights of the attention projections and the feed-forward block
    flop_per_token = 6 * layers * per_layer + 12 * layers * mean_len * h  # + QK^T and AV; forward + backward
    examples = steps * batch
    gflop = examples * mean_len * flop_per_token / 1e9  # real tokens only: padding is not counted
    return {"steps": steps, "batch": batch, "seconds": result.train_seconds,
            "examples_per_s": examples / result.train_seconds, "mean_tokens": mean_len, "gflop": gflop,
            "gflop_per_s": gflop / result.train_seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--epochs", type=float, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--base-steps", type=int, default=3, help="bert-base-sized steps for throughput (0: skip)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 by default: on a shared, oversubscribed machine two spinning threads were "
                         "5x slower per step than one)")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = Path(args.data)
    report: dict[str, Any] = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "cores": os.cpu_count()}
    print(f"CPU: {report['cpu']}, {report['cores']} cores, torch threads {report['threads']}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train_file, held_file, report["silver"] = silver_split(data, work, args.seed, 0.2)
        base = small_bert(train_file, work / "small", args.seed, hidden_size=128, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=512, max_position_embeddings=256)
        opts = TrainOptions(train_file=str(train_file), output_dir=str(work / "out"), labels=5, base=str(base),
                            eval_file=str(held_file), max_length=128, learning_rate=args.lr,
                            num_train_epochs=args.epochs, per_device_train_batch_size=args.batch, warmup_ratio=0.1,
                            logging_steps=10, seed=args.seed, progress=False)
        t = time.perf_counter()
        result = train(opts)
        report["small_train_seconds"] = time.perf_counter() - t
        report["small_examples_per_s"] = result.examples_per_second
        curve = [(h["step"], h["loss"]) for h in result.log_history if "loss" in h]
        report["curve"] = curve
        print(f"\nsmall BERT (hidden 128, 2 layers), {result.n_train} training examples, {args.epochs} epochs, "
              f"{report['small_train_seconds']:.0f} s ({result.examples_per_second:.1f} examples/s)")
        print("training curve (step: loss): " + ", ".join(f"{s}: {v:.3f}" for s, v in curve))
        held = [{"evidence": r["evidence"], "previous": r["previous_turn"], "response": r["response"],
                 "label": r["label"]} for r in map(json.loads, held_file.read_text().splitlines())]
        v1 = begin_rows(data / BEGIN_V1_DEV)
        report["held_out_silver"] = evaluate(work / "out", held)
        report["begin_v1_dev"] = evaluate(work / "out", v1)
        report["surface_baseline"] = surface_floor(train_file, {"held_out_silver": held, "begin_v1_dev": v1})
        print("\n| evaluated on | view | n | accuracy | macro-F1 | majority label (accuracy) | surface baseline "
              "accuracy | surface baseline macro-F1 |\n|---|---|---|---|---|---|---|---|")
        show("held-out silver", report["held_out_silver"], report["surface_baseline"]["held_out_silver"])
        show("BEGIN v1 dev", report["begin_v1_dev"], report["surface_baseline"]["begin_v1_dev"])
        if args.base_steps:
            peak = matmul_peak()
            tp = throughput(train_file, base, work, args.base_steps, 8, args.seed)
            tp["matmul_peak_gflop_per_s"] = peak
            tp["share_of_peak"] = tp["gflop_per_s"] / peak
            report["bert_base_throughput"] = tp
            print(f"\nbert-base-sized (110M parameters) training, {tp['steps']} steps of {tp['batch']}: "
                  f"{tp['examples_per_s']:.2f} examples/s, {tp['gflop_per_s']:.1f} GFLOP/s on real tokens "
                  f"(mean {tp['mean_tokens']:.0f} tokens), fp32 matmul peak {peak:.1f} GFLOP/s: "
                  f"{100 * tp['share_of_peak']:.1f}% of peak")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
