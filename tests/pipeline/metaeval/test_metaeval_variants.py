"""``q2 meta-eval --experiments variants``: the paper's Table 7 (cumulative pipeline variants), with scripted
components for the figures and tiny random-weight models for the command."""

from __future__ import annotations

import json
from pathlib import Path

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.cli import main
from q2_plugins.datasets.types import Example
from q2_plugins.metaeval.variants import variant_configs, variants_markdown, variants_table
from tests.fakes import FakeCandidates, FakeCoref, FakeNLI, FakePersonal, FakeQA, FakeQG


def test_variants_are_cumulative():
    names, configs = zip(*variant_configs(Q2Config(qg_num_beams=4, qg_num_return=3)))
    assert names == ("base", "+ personal-question filter", "+ top-k questions", "+ coreference")
    assert [(c.remove_personal, c.qg_num_return, c.coref) for c in configs] == [
        (False, 1, False), (True, 1, False), (True, 3, False), (True, 3, True)]


# three responses: "x" has a personal first question and a good second one; "he sang" needs coreference; "y" never
# gets a valid question
QG = {("Ann", "Ann sang"): ["Who sang?"], ("x", "I like x"): ["What do I like?", "What is liked?"],
      ("y", "y"): ["Why?"]}
QA = {("Who sang?", "Ann sang"): "Ann", ("What do I like?", "I like x"): "x", ("What is liked?", "I like x"): "x",
      ("Who sang?", "Ann sang well."): "Ann", ("What is liked?", "x is liked."): "x",
      ("What do I like?", "x is liked."): "x"}


def _make_scorer(cfg: Q2Config) -> Q2Scorer:
    """Scripted parts; the QG returns as many beam questions as the variant asks for."""
    qg = FakeQG({k: v[:cfg.qg_num_return] for k, v in QG.items()})
    return Q2Scorer(cfg, candidate_extractor=FakeCandidates({"Ann sang": ["Ann"], "he sang": [], "I like x": ["x"],
                                                             "y": ["y"]}),
                    question_generator=qg, question_answerer=FakeQA(QA), nli=FakeNLI({}),
                    personal_filter=FakePersonal(["What do I like?"]),
                    coreference=FakeCoref({("Ann was there", "he sang"): [["Ann", "he"]]}))


def test_table7_figures_with_scripted_components():
    examples = [Example(id="1", response="he sang", knowledge="Ann sang well.", consistent=True, label="c",
                        subset="a", history="Ann was there"),
                Example(id="2", response="I like x", knowledge="x is liked.", consistent=True, label="c", subset="a"),
                Example(id="3", response="y", knowledge="z", consistent=False, label="i", subset="b")]
    table = variants_table(examples, Q2Config(), _make_scorer)
    assert table["subsets"] == ["a", "b", "all"]
    coverage = [[row["cells"][s]["coverage"] for s in ("a", "b", "all")] for row in table["rows"]]
    assert coverage == [[0.5, 0.0, 1 / 3], [0.0, 0.0, 0.0], [0.5, 0.0, 1 / 3], [1.0, 0.0, 2 / 3]]
    # the rows without questions take the fallback's neutral 0.5; a valid question scores 1
    q2 = [row["cells"]["all"]["q2"] for row in table["rows"]]
    assert q2 == [(0.5 + 1 + 0.5) / 3, 0.5, (0.5 + 1 + 0.5) / 3, (1 + 1 + 0.5) / 3]
    assert "coref:fake-coref" in table["rows"][3]["signature"] and "coref" not in table["rows"][2]["signature"]
    text = variants_markdown(table)
    assert "| variant | a Q² | a coverage | b Q² | b coverage | all Q² | all coverage |" in text
    assert "| + coreference | 1.0000 | 100.00% | 0.5000 | 0.00% | 0.8333 | 66.67% |" in text


def test_meta_eval_variants_with_tiny_models(tmp_path, capsys, tiny_models):
    from q2_plugins.backends.hf.tiny import build_fcoref

    sample = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
    rows = [json.loads(line) for line in sample.read_text().splitlines()][:4]
    table = tmp_path / "table.jsonl"
    table.write_text("".join(json.dumps({"response": r["response"], "knowledge": r["knowledge"], "prev": r["history"],
                                         "human": "ok" if i % 2 else "bad"}) + "\n" for i, r in enumerate(rows)))
    coref = build_fcoref(tmp_path / "coref")
    code = main(["meta-eval", "--dataset", "table", "--data", str(table), "--label-column", "human",
                 "--consistent-labels", "ok", "--history-column", "prev", "--experiments", "variants",
                 "--no-progress", "--format", "json", "--output-dir", str(tmp_path / "out"),
                 "--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
                 "--nli-model", str(tiny_models["nli"]), "--coref-model", str(coref), "--qg-max-length", "12"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in report["rows"]] == ["base", "+ personal-question filter", "+ top-k questions",
                                                      "+ coreference"]
    assert all(r["cells"]["all"]["n"] == 4 and r["cells"]["all"]["errors"] == 0 for r in report["rows"])
    assert "coref:fcoref-head-v1:local:sha256:" in report["rows"][3]["signature"]
    assert (tmp_path / "out" / "variants.md").read_text().startswith("## Q² variants (the paper's Table 7)")
