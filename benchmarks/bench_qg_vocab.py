#!/usr/bin/env python
"""Does the paper-size QG make the filter do the QA work of a real run? Per response: QA calls and QA tokens.

The paper-size QG (``bench_pipeline.py``'s: T5-base, 32,128 embedding rows, a tokenizer trained on the WoW / BEGIN
text with far fewer pieces) is run on the recorded run's decisions (``q2_original_run``, as ``bench_pipeline.py``
uses them), the generated questions counted where the question answerer receives them:

- ``raw``: as the benchmarks ran it before: rows past the tokenizer's pieces are chosen and decode to nothing, so
  most beams are a word or two, or empty and dropped as duplicates;
- ``in_range``: as they run it now (:func:`benchmarks.in_range.in_range_questions`: those rows scored ``-inf`` after
  the full 32,128-row product);
- ``matched``: the vocabulary-matched run: the same model cut to its tokenizer's rows (``resize_token_embeddings``),
  every row a piece: what ``in_range`` must reproduce;
- ``independent`` (with ``--independent``): a second vocabulary-matched QG of the same size with its own random
  weights: how much any figure per response depends on which random weights make the questions.

QA is not run: each (question, context) the filter or the knowledge step sends is counted, and its tokens are those
of the paper-size QA tokenizer on that pair (special tokens included), as the QA stage's token counter counts them.
Also printed: the recorded run's own questions in the same QA tokens, against the generated ones.

    python benchmarks/bench_qg_vocab.py --n 16 --json benchmarks/results/bench_qg_vocab_<commit>.json

Prints a table and writes JSON. Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks.bench_pipeline import (  # noqa: E402
    PAPER_SIZES,
    BenchCandidates,
    Oracle,
    build_models,
    corpus,
    fixed_length,
    load_workload,
)
from benchmarks.in_range import in_range_questions  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from q2_plugins import Q2Config, Q2Scorer  # noqa: E402
from q2_plugins.backends.hf.tiny import build_t5_qg  # noqa: E402
from q2_plugins.backends.hf.transformers_models import HFQuestionGenerator, load_model  # noqa: E402
from q2_plugins.metric.components import Answer, NLILabel  # noqa: E402
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy  # noqa: E402
from scripts.render_docs import render_qg_vocab  # noqa: E402

WAYS = ("raw", "in_range", "matched")
LENGTH = 10  # tokens of a generated question: the recorded run's median question (mean 10.4) in the QG tokenizer


class CountingQA:
    """Answers as the recorded run did (``bench_pipeline.BenchQA``'s rules) and counts what it was asked."""

    signature = "count-qa"

    def __init__(self, tokenizer: Any, oracle: Oracle) -> None:
        self.tokenizer, self.oracle = tokenizer, oracle
        self.calls = self.tokens = 0
        self.questions: list[str] = []

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]:
        out = []
        for q, ctx in pairs:
            self.calls += 1
            self.tokens += len(self.tokenizer(q, ctx, truncation=False)["input_ids"])
            self.questions.append(q)
            if (q, ctx) in self.oracle.valid:
                out.append(Answer.span(self.oracle.valid[(q, ctx)]))
            elif (q, ctx) in self.oracle.knowledge:
                out.append(self.oracle.knowledge[(q, ctx)])
            else:
                out.append(Answer.none())
        return out


class ConstantNLI:
    signature = "constant-nli"

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]:
        return [NLILabel.NEUTRAL] * len(pairs)


class RecordedFirst:
    """The QG wrapper of ``bench_pipeline`` (beam 1 is the recorded question where the run recorded one)."""

    signature = "bench-qg"

    def __init__(self, qg: HFQuestionGenerator, oracle: Oracle) -> None:
        self.qg, self.oracle = qg, oracle

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
        out = []
        for p, qs in zip(pairs, self.qg.generate(pairs)):
            q = self.oracle.question.get(p)
            out.append([q] + qs[1:] if q is not None else qs)
        return out


def cut_qg(qg: Path) -> Path:
    """The paper QG cut to its tokenizer's rows (the first ones; its other weights unchanged), written once beside
    it."""
    path = qg.parent / "qg_cut_to_tokenizer"
    if not (path / "BUILT").exists():
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(qg))
        model = AutoModelForSeq2SeqLM.from_pretrained(str(qg))
        model.resize_token_embeddings(len(tok))
        model.save_pretrained(path)
        tok.save_pretrained(path)
        (path / "BUILT").write_text("built\n")
    return path


def independent_qg(root: Path, data: Path) -> Path:
    """T5-base with as many embedding rows as its tokenizer has pieces (the paper QG's tokenizer: same text, seed
    and size) and weights of its own, built once beside the paper-size models."""
    path = root / "paper" / "qg_vocab_matched"
    if not (path / "BUILT").exists():
        dims = {k: v for k, v in PAPER_SIZES["qg"].items() if k != "model_vocab"}
        build_t5_qg(path, corpus=corpus(data), tokenizer_vocab=8000, **dims)
        (path / "BUILT").write_text("built\n")
    return path


def count(scorer: Q2Scorer, qa: CountingQA, records: Sequence[Any]) -> list[dict[str, int]]:
    """Per response (each scored on its own): the QA calls and tokens it cost."""
    out = []
    for r in records:
        qa.calls = qa.tokens = 0
        scorer.score(responses=[r.response], knowledge=[r.knowledge])
        out.append({"qa_calls": qa.calls, "qa_tokens": qa.tokens})
    return out


def question_tokens(tokenizer: Any, questions: Sequence[str]) -> Optional[float]:
    lengths = [len(tokenizer(q, add_special_tokens=False)["input_ids"]) for q in questions]
    return statistics.mean(lengths) if lengths else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "q2_plugins" / "data"))
    ap.add_argument("--models-dir", default=str(REPO / "out" / "bench-models"))
    ap.add_argument("--n", type=int, default=16, help="responses (bench_pipeline's workload)")
    ap.add_argument("--qg-length", type=int, default=LENGTH, help="generated question length in tokens "
                    "(default: %(default)s, the recorded run's median question in the QG tokenizer)")
    ap.add_argument("--independent", action="store_true",
                    help="also a vocabulary-matched QG with weights of its own (how much random weights matter)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    data, root = Path(args.data), Path(args.models_dir)
    paths = build_models(root, data, "paper")
    paths["qg_cut"] = cut_qg(paths["qg"])
    ways = WAYS + (("independent",) if args.independent else ())
    if args.independent:
        paths["qg_independent"] = independent_qg(root, data)
    records = load_workload(data, args.n)
    oracle = Oracle(records)
    nlp = load_spacy("en_core_web_sm")
    from transformers import AutoTokenizer

    qa_tok = AutoTokenizer.from_pretrained(str(paths["qa"]))
    per: dict[str, list[dict[str, int]]] = {}
    asked: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    models = {"raw": "qg", "in_range": "qg", "matched": "qg_cut", "independent": "qg_independent"}
    for way in ways:
        tok, model = load_model("qg", str(paths[models[way]]), None, "cpu", "float32", "seq2seq", "onednn")
        hf = HFQuestionGenerator(tok, model, batch_size=8, max_length=128,
                                 generate_overrides=fixed_length(args.qg_length))
        if way == "in_range":
            in_range_questions(hf)
        qg = RecordedFirst(hf, oracle)
        qa = CountingQA(qa_tok, oracle)
        scorer = Q2Scorer(Q2Config(), candidate_extractor=BenchCandidates(SpacyCandidateExtractor(nlp), oracle),
                          question_generator=qg, question_answerer=qa, nli=ConstantNLI(),
                          personal_filter=SpacyPersonalFilter(nlp))
        t0 = time.perf_counter()
        per[way] = count(scorer, qa, records)
        seconds[way] = time.perf_counter() - t0
        asked[way] = [q for q in qa.questions if q not in oracle.question.values()]
        print(f"{way:9} {seconds[way]:7.1f} s", flush=True)
        del model, hf, qg
    rows = []
    for i, r in enumerate(records):
        row = {"response": r.response[:60]} | {f"{way}_{k}": per[way][i][k] for way in ways
                                                for k in ("qa_calls", "qa_tokens")}
        for k in ("qa_calls", "qa_tokens"):
            row[f"{k}_in_range_vs_matched"] = row[f"in_range_{k}"] / row[f"matched_{k}"] - 1 if row[f"matched_{k}"] \
                else 0.0
        rows.append(row)
    recorded = [q.question for r in records for q in r.questions if q.question != "NO_Q"]
    report: dict[str, Any] = {
        "benchmark": "bench_qg_vocab", "settings": vars(args), "machine": {"cpu": cpu_name()},
        "qg_pieces": {"tokenizer": len(AutoTokenizer.from_pretrained(str(paths["qg"]))),
                      "model_rows": PAPER_SIZES["qg"]["model_vocab"]},
        "rows": rows, "seconds": seconds,
        "totals": {way: {k: sum(p[k] for p in per[way]) for k in ("qa_calls", "qa_tokens")} for way in ways},
        "max_abs_rel_diff": {k: max(abs(r[f"{k}_in_range_vs_matched"]) for r in rows) for k in ("qa_calls",
                                                                                                  "qa_tokens")},
        "within_5pct": sum(all(abs(r[f"{k}_in_range_vs_matched"]) <= 0.05 for k in ("qa_calls", "qa_tokens"))
                           for r in rows),
        "generated_question_qa_tokens_mean": {way: question_tokens(qa_tok, asked[way]) for way in ways},
        "recorded_question_qa_tokens_mean": question_tokens(qa_tok, recorded),
    }
    print(render_qg_vocab(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
