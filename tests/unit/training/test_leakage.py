"""No evidence passage or response of an evaluation file in a training set scored against it: ``q2 perturb
--exclude``, ``make_training_set(held_out=...)`` and bench_train's split each drop what overlaps and count it; these
tests fail when an overlap is left."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.datasets.grounded import SourceRow
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.training.examples import LEAKED, EvaluationTexts, TrainingRow, evaluation_texts, normalised
from q2_plugins.training.recipes import make_training_set

REPO = Path(__file__).resolve().parents[3]
ROWS = [
    SourceRow("a", "rome was built by romulus in rome .", "Rome was built by Romulus in 753 BC.", "who built rome?",
              "d1"),
    SourceRow("c", "the pacific ocean is the largest ocean .", "The Pacific Ocean is the largest ocean on Earth.",
              "i love the sea", "d2"),
    SourceRow("d", "pizza is a dish from naples in italy .", "Pizza is a dish that originated in Naples, Italy.",
              "do you like pizza?", "d3"),
    SourceRow("e", "jazz music was born in new orleans .", "Jazz music originated in New Orleans in the 1910s.",
              "what about jazz?", "d4"),
]


@pytest.fixture(scope="module")
def nlp():
    return load_spacy("en_core_web_sm")


@pytest.fixture
def eval_file(tmp_path: Path) -> Path:
    """A BEGIN-like TSV holding row c's passage (other case and spacing) and row e's response, of any label."""
    path = tmp_path / "eval.tsv"
    path.write_text("evidence\tresponse\tgold label\n"
                    "the pacific  ocean is the LARGEST ocean on earth.\tsomething else .\toff-topic\n"
                    "Some passage.\tJazz music was born in New Orleans .\thallucination\n")
    return path


def leaks(rows: list[TrainingRow], texts: EvaluationTexts) -> list[str]:
    return [r.id for r in rows if texts.shares(r.evidence, r.response)]


def test_evaluation_texts_are_normalised_and_read_whatever_the_label(eval_file):
    texts = evaluation_texts([str(eval_file)])
    assert normalised("The Pacific  Ocean is the largest ocean on Earth.") in texts.passages
    assert texts.shares("x", "jazz music was born in new orleans .") and not texts.shares("x", "y")


def test_make_training_set_drops_and_counts_what_an_evaluation_file_holds(nlp, eval_file):
    texts = evaluation_texts([str(eval_file)])
    for recipe in ("begin", "conv-fever"):
        made, report = make_training_set(ROWS, recipe=recipe, balance=False, nlp=nlp, held_out=texts)
        assert leaks(made, texts) == [], recipe
        assert report.skipped["original"][LEAKED] == 2, recipe  # rows c and e
        assert not {"c", "e"} & {t.source_id for t in made}
    made, _ = make_training_set(ROWS, recipe="begin", balance=False, nlp=nlp)
    assert leaks(made, texts)  # without held_out the overlap is there: the check above can fail


def test_q2_perturb_exclude_reports_what_it_removed(eval_file, tmp_path, capsys):
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps({"response": r.response, "knowledge": r.knowledge}) + "\n" for r in ROWS))
    out = tmp_path / "o.jsonl"
    assert main(["perturb", "--recipe", "begin", "--input", str(table), "--output", str(out), "--no-balance",
                 "--exclude", str(eval_file)]) == 0
    assert f"excluded: 2 grounded rows and 0 examples sharing an evidence passage or a response with {eval_file}" \
        in capsys.readouterr().out
    rows = [TrainingRow(**json.loads(line)) for line in out.read_text().splitlines()]
    assert rows and leaks(rows, evaluation_texts([str(eval_file)])) == []
    meta = json.loads((tmp_path / "o.jsonl.meta.json").read_text())
    assert meta["summary"]["excluded"]["grounded_rows"] == 2 and meta["settings"]["exclude"] == [str(eval_file)]
    assert main(["perturb", "--input", str(table), "--output", str(out), "--exclude", str(eval_file)]) == 2


def bench_train():
    spec = importlib.util.spec_from_file_location("bench_train", REPO / "benchmarks" / "bench_train.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO))
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def row(i: int, evidence: str, response: str, method: str = "original") -> TrainingRow:
    return TrainingRow(f"{i}:{method}", str(i), "begin", method, "entailment", "entailment", evidence, "", response,
                       "")


def test_bench_train_split_leaves_no_passage_or_response_of_the_held_out_part_in_training():
    bt = bench_train()
    made = [row(i, f"passage {i % 7}", f"response {i % 11}") for i in range(60)]
    made += [row(i, f"passage {i % 7}", "well, that's great!", "generic_response") for i in range(60, 70)]
    train, held, dropped = bt.split_by_passage(made, seed=0, held_out=0.3)
    held_texts = EvaluationTexts(frozenset(normalised(r.evidence) for r in held),
                                 frozenset(normalised(r.response) for r in held if not bt.stock(r)))
    assert held and train and dropped > 0
    assert bt.overlap_left(train, held_texts) == 0
    assert bt.overlap_left(train + held[:1], held_texts) == 1  # a leak is seen
    assert any(r.method == "generic_response" for r in train)  # stock replies repeat across the split by design
