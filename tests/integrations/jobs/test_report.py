"""The HTML report's files (no browser): reading results files, the embedded data, the CLI paths that write
reports, the bundled slice of the original run, the README's explained response, and the meta-evaluation page."""

from __future__ import annotations

import base64
import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.jobs.replay import bundled_original_run, load_recorded_scores
from q2_plugins.jobs.report import load_results, render_html, summary_of_rows
from q2_plugins.metric.results import Q2Stats, ResponseResult
from tests.conftest import optional_import

REPO = Path(__file__).resolve().parents[3]


def embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="q2-data">(.*?)</script>', html, flags=re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


def row(i, status="scored", score=0.5, **extra):
    return {"row": i, "index": i, "status": status, "score": score, "score_no_nli": score, "num_questions": 1,
            **extra}


def test_data_is_embedded_as_escaped_json_that_round_trips():
    nasty = "</script><script>alert(1)</script> & <!-- \u2028\u2029 \"quotes\" é"
    rows = [row(0, response=nasty, knowledge="<b>k</b>", questions=[
        {"candidate": nasty, "question": "q?", "response_answer": nasty, "knowledge_answer": None,
         "knowledge_answer_kind": "no_answer", "f1": 0.0, "nli_label": None, "score": 0.0}])]
    html = render_html(rows, signatures=["sig|</script>"], title="</title><script>x</script>")
    assert html.count("</script>") == 2 and html.count("<script") == 2
    m = re.search(r'id="q2-data">(.*?)</script>', html, flags=re.S)
    assert not re.search("[<>&\u2028\u2029]", m.group(1))
    data = embedded(html)
    assert data["rows"][0]["response"] == nasty and data["rows"][0]["questions"][0]["candidate"] == nasty
    assert data["signatures"] == ["sig|</script>"] and data["title"] == "</title><script>x</script>"
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html


def test_summary_is_computed_from_rows_like_q2stats():
    rows = [row(0, score=1.0), row(1, "fallback", 0.5), row(2, "no_valid_question", None), row(3, "error", None),
            row(4, score=0.25)]
    expected = Q2Stats.of(ResponseResult(index=r["index"], status=r["status"], score=r["score"],
                                         score_no_nli=r["score_no_nli"]) for r in rows).summary()
    assert summary_of_rows(rows) == expected
    assert embedded(render_html(rows))["summary"] == expected


def test_unreadable_lines_are_refused_and_nested_results_are_found(tmp_path):
    f = tmp_path / "mixed.jsonl"
    lines = [json.dumps(row(0)), json.dumps({"episode_id": "e1", "turn": 2, "q2": row(5, score=0.75)}),
             json.dumps(row(7, status="odd"))]
    f.write_text("\n".join(lines) + "\n\n")
    data = load_results([f])
    statuses = [r["status"] for r in data.rows]
    assert statuses == ["scored", "scored", "error"]
    errors = [r.get("error", "") for r in data.rows]
    assert data.rows[1]["episode_id"] == "e1" and data.rows[1]["turn"] == 2 and data.rows[1]["score"] == 0.75
    assert "unknown status 'odd'" in errors[2]
    assert data.summary is None and data.signatures == []
    # a record that cannot be read, is no result row, or holds a score that is no number is refused in one line
    # naming the file and its line
    for bad, message in (("not json", "line 2 is not valid JSON"), ("[1, 2]", "line 2 is a JSON list, expected"),
                         (json.dumps({"episode": 3}), "line 2 is not a result row: no 'status' or 'score' field"),
                         (json.dumps(row(6, score="high")), "line 2: score is 'high', not a number"),
                         (json.dumps(row(6, score={"v": 1})), "line 2: score is {'v': 1}, not a number")):
        f.write_text("\n".join([lines[0], bad, *lines[1:]]) + "\n")
        with pytest.raises(ValueError, match=f"^{re.escape(str(f))} {re.escape(message)}"):
            load_results([f])


def test_lm_eval_style_samples_with_nested_details(tmp_path):
    f = tmp_path / "samples_task.jsonl"
    details = {**row(0, score=0.5), "signature": "q2:lm", "response": "r", "knowledge": "k"}
    f.write_text(json.dumps({"doc_id": 4, "doc": {"knowledge": "k"}, "resps": [["r"]], "q2": 0.5,
                             "q2_details": details}) + "\n")
    data = load_results([f])
    assert data.signatures == ["q2:lm"]
    [r] = data.rows
    assert (r["doc_id"], r["status"], r["score"], r["response"]) == (4, "scored", 0.5, "r") and "resps" not in r


def test_sidecar_gives_signature_config_and_summary_when_it_matches(tmp_path):
    f = tmp_path / "scores.jsonl"
    f.write_text("".join(json.dumps(row(i, score=i / 2)) + "\n" for i in range(3)))
    meta = {"signature": "q2:test|x", "summary": {**summary_of_rows([row(i, score=i / 2) for i in range(3)])},
            "config": {"use_nli": True}, "version": "9.9"}
    Path(str(f) + ".meta.json").write_text(json.dumps(meta))
    data = load_results([f])
    assert (data.signatures, data.config, data.version, data.summary) == (["q2:test|x"], {"use_nli": True}, "9.9",
                                                                          meta["summary"])
    meta["summary"]["n"] = 10
    Path(str(f) + ".meta.json").write_text(json.dumps(meta))
    data = load_results([f])
    assert data.summary is None and "summarises 10 responses but the file holds 3" in data.notes[0]


def test_q2_report_cli(tmp_path, capsys):
    f, g = tmp_path / "a.jsonl", tmp_path / "b.json"
    f.write_text(json.dumps(row(0, id="x", response="hello")) + "\n" + json.dumps(row(1, status="odd")) + "\n")
    g.write_text(json.dumps({"signature": "s", "responses": [row(1, score=1.0)]}))
    out = tmp_path / "r.html"
    assert main(["report", str(f), str(g), "--output", str(out)]) == 0
    assert f"{out}: 3 responses (1 error) from 2 files" in capsys.readouterr().out
    data = embedded(out.read_text(encoding="utf-8"))
    assert [r["status"] for r in data["rows"]] == ["scored", "error", "scored"]
    assert data["summary"]["n"] == 3 and data["summary"]["q2"] == 0.75
    assert main(["report", str(tmp_path / "missing.jsonl"), "--output", str(out)]) == 2
    assert "No results file" in capsys.readouterr().err


def test_a_large_file_gives_a_stated_sample_of_rows_and_figures_of_all(tmp_path, capsys):
    f = tmp_path / "big.jsonl"
    rows = [row(i, score=(i % 10) / 10 + 0.05, human_label="consistent" if i % 3 else "inconsistent")
            for i in range(300)]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.html"
    assert main(["report", str(f), "--output", str(out), "--max-rows", "40"]) == 0
    assert "300 responses (0 errors) from 1 file; the table shows a sample of 40" in capsys.readouterr().out
    data = embedded(out.read_text(encoding="utf-8"))
    positions = [r["index"] for r in data["rows"]]
    assert len(positions) == 40 and positions == sorted(positions) and positions != list(range(40))  # random, in order
    assert data["summary"]["n"] == 300 and data["summary"]["q2"] == pytest.approx(0.5)
    hist = data["histogram"]
    assert hist["n"] == 300 and hist["class_source"] == "gold"
    assert [b["consistent"] + b["inconsistent"] for b in hist["bins"]] == [30] * 10
    assert sum(b["inconsistent"] for b in hist["bins"]) == 100
    assert any("random sample of 40 of the 300 responses" in n for n in data["notes"])
    assert main(["report", str(f), "--output", str(out), "--all-rows"]) == 0
    assert len(embedded(out.read_text(encoding="utf-8"))["rows"]) == 300 and "sample" not in capsys.readouterr().out


def test_q2_report_takes_the_texts_from_the_scored_input(tmp_path, capsys):
    inp, res = tmp_path / "in.csv", tmp_path / "scores.jsonl"
    inp.write_text("text,evidence\nfirst <i>response</i>,first knowledge\nsecond,second knowledge\n")
    res.write_text(json.dumps(row(1, score=1.0)) + "\n" + json.dumps(row(0)) + "\n" + json.dumps(row(7)) + "\n")
    out = tmp_path / "r.html"
    assert main(["report", str(res), "--texts", str(inp), "--response-column", "text", "--knowledge-column",
                 "evidence", "--output", str(out)]) == 0
    capsys.readouterr()
    data = embedded(out.read_text(encoding="utf-8"))
    assert [(r.get("response"), r.get("knowledge")) for r in data["rows"]] == [
        ("second", "second knowledge"), ("first <i>response</i>", "first knowledge"), (None, None)]
    assert data["notes"] == [f"1 of 3 rows got no text from {inp} (no 'row' number within its 2 rows)"]


def test_docs_python_example_writes_a_report(tmp_path, monkeypatch):
    from tests.conftest import _doc_blocks

    [(lang, code)] = _doc_blocks(REPO / "docs" / "report.md", "report-python")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/report.md", "exec"), {})
    data = embedded((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert len(data["rows"]) == 10 and data["rows"][1]["questions"] and data["rows"][1]["response"]
    assert len(data["signatures"]) == 1 and "|replay:recorded-steps|" in data["signatures"][0]


def test_q2_score_html_keeps_every_row_and_its_texts(tiny_models, tmp_path, capsys):
    # Rows that cannot be scored: the report still lists each, with its text and error (and the run exits 1:
    # no row could be scored, docs/failures.md)
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "a", "response": "<b>hi</b>", "knowledge": ""}\nnot json\n')
    html, out = tmp_path / "s.html", tmp_path / "s.jsonl"
    models = [f"--{r}-model={tiny_models[r]}" for r in ("qg", "qa", "nli")]
    assert main(["score", "--input", str(inp), "--output", str(out), "--html", str(html), "--no-progress",
                 "--no-fallback", *models]) == 1
    assert f"HTML report: {html}" in capsys.readouterr().err
    data = embedded(html.read_text(encoding="utf-8"))
    assert [r["status"] for r in data["rows"]] == ["error", "error"]
    assert data["rows"][0]["response"] == "<b>hi</b>" and data["rows"][0]["id"] == "a"
    assert "knowledge is empty" in data["rows"][0]["error"] and "not valid JSON" in data["rows"][1]["error"]
    assert data["summary"]["n_errors"] == 2 and data["signatures"][0].startswith("q2:")
    assert [json.loads(x)["status"] for x in out.read_text().splitlines()] == ["error", "error"]


def test_replay_html_of_the_bundled_slice(tmp_path, capsys):
    steps, scores = bundled_original_run()
    assert [p.name.split("_out")[0] for p in steps] == ["dodeca_consistent", "dodeca_inconsistent",
                                                        "memnet_consistent", "memnet_inconsistent"]
    out, html = tmp_path / "r.jsonl", tmp_path / "r.html"
    assert main(["replay", "--steps", *map(str, steps), "--scores", *map(str, scores), "--output", str(out),
                 "--html", str(html), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == summary["n"] == 40
    assert {r["gold"] for r in rows[:10]} == {"consistent"} and {r["gold"] for r in rows[10:20]} == {"inconsistent"}
    assert all(r["response"] and r["knowledge"] and r["questions"] is not None for r in rows)
    data = embedded(html.read_text(encoding="utf-8"))
    assert len(data["rows"]) == 40 and data["signatures"] == [summary.pop("signature")]
    summary.pop("signature_short")
    assert data["summary"] == summary


def test_bundled_slice_is_the_first_ten_responses_of_the_recorded_run(shared_data):
    steps, scores = bundled_original_run()
    for path in steps + scores:
        subset = path.name.split("_out")[0].split("_scores")[0]
        with (shared_data / "q2_original_run" / subset / path.name).open(newline="", encoding="utf-8") as f:
            full = [r for r in csv.DictReader(f) if int(r["id"]) < 10]
        with path.open(newline="", encoding="utf-8") as f:
            assert list(csv.DictReader(f)) == full, path
    readme = (steps[0].parent / "README.md").read_text()
    assert "a5cd24d" in readme and "../q2_original_run/LICENSE" in readme
    assert (shared_data / "q2_original_run" / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]


def test_readme_example_is_what_the_replay_gives(tmp_path, capsys):
    """The explained response shown near the top of the README comes from replaying the bundled slice."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- replayed example: (\w+) (\d+) -->\n```text\n(.*?)\n```", text, flags=re.S)
    assert m, "README has no replayed example block"
    subset, rid, block = m.group(1), m.group(2), m.group(3)
    steps, scores = bundled_original_run()
    out = tmp_path / "r.jsonl"
    assert main(["replay", "--steps", *map(str, steps), "--scores", *map(str, scores), "--explain",
                 "--output", str(out)]) == 0
    capsys.readouterr()
    rec = next(json.loads(x) for x in out.read_text().splitlines()
               if json.loads(x)["source"] == subset and json.loads(x)["id"] == rid)
    fields = dict(re.findall(r"^(\S.*?)\s{2,}(.*)$", block, flags=re.M))
    assert fields["response"] == rec["response"]
    assert fields["knowledge"] == rec["knowledge"]
    recorded = load_recorded_scores(next(p for p in scores if p.name.startswith(subset + "_")))[rid]
    assert fields["response score"] == (f"{rec['score']:.3f} (mean of its {rec['num_questions']} questions; the "
                                        f"original run's Q² with NLI: {recorded.q2:.3f})")
    q = next(q for q in rec["questions"] if q["question"] == fields["question"])
    assert fields["answer (response)"] == q["response_answer"]
    assert fields["answer (knowledge)"] == (q["knowledge_answer"] if q["knowledge_answer"] is not None
                                            else "no answer")
    assert fields["F1"] == f"{q['f1']:.3f}" and fields["score"] == f"{q['score']:.3f}"
    assert fields["NLI"].startswith(q["nli_label"] or "not recorded")


def test_meta_eval_saves_markdown_and_html_with_embedded_plots(shared_data, tmp_path, capsys):
    optional_import("matplotlib", "metaeval")
    out = tmp_path / "out"
    assert main(["meta-eval", "--dataset", "wow", "--data", str(shared_data / "q2_wow"), "--replay",
                 str(shared_data / "q2_original_run"), "--baselines", "none", "--reps", "20",
                 "--experiments", "response,subsets", "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.strip() in printed and "| Q2 | 600 | 77.33% |" in md
    html = (out / "report.html").read_text(encoding="utf-8")
    report = json.loads((out / "report.json").read_text())
    assert report["plots"]
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)">', html)
    assert [name for name, _ in images] == [Path(p).name for p in report["plots"]]
    for (_, data), p in zip(images, report["plots"]):
        assert base64.b64decode(data) == Path(p).read_bytes()
    assert "<td>77.33%</td>" in html and html.count("<table>") == len(re.findall(r"^\|(-+\|)+$", md, flags=re.M))
    assert "<script" not in html and "http" not in html.split("</head>")[1]


@pytest.mark.parametrize("uid, present, env, installs", [
    ("0", (), {}, True),                                        # CI: root, apt-get, no Chromium -> install
    ("0", ("chromium", "chromedriver"), {}, False),             # already there
    ("0", ("chromium",), {}, True),                             # the driver missing
    ("0", (), {"Q2_BROWSER": "0"}, False),                      # switched off
    ("1000", (), {}, False),                                    # not root: tests will skip (fail in CI)
])
def test_setup_installs_chromium_only_when_missing_as_root(tmp_path, uid, present, env, installs):
    import os
    import shutil
    import subprocess

    bin_dir, log = tmp_path / "bin", tmp_path / "apt.log"
    bin_dir.mkdir()
    stubs = {"id": f"echo {uid}", "apt-get": f'echo "$*" >> {log}',
             **{name: "true" for name in present}}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!{shutil.which('bash')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    proc = subprocess.run([shutil.which("bash"), str(REPO / "scripts" / "install_chromium.sh")], text=True,
                          capture_output=True, env={**{k: v for k, v in os.environ.items() if k != "Q2_BROWSER"},
                                                    "PATH": str(bin_dir), **env})
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines() if log.exists() else []
    assert calls == (["update -qq", "install -y -qq chromium chromium-driver"] if installs else [])
    assert ("browser tests will skip" in proc.stderr) == (uid != "0" and not present and not env)


def test_q2_report_refuses_a_file_that_holds_no_result_rows(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "a", "response": "r", "knowledge": "k"}\nnot json\n')
    out = tmp_path / "r.html"
    assert main(["report", str(inp), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"q2 report: error: {inp} line 1 is not a result row: no 'status' or 'score' field "
                                "(its fields: ['id', 'knowledge', 'response']); give q2 score output (an input file: "
                                "score it first)"]
    assert not out.exists()
    # a results file whose every row is an error is still reported (the rows say why)
    res = tmp_path / "errors.jsonl"
    res.write_text(json.dumps(row(0, "error", None, error="line 1: not valid JSON")) + "\n")
    assert main(["report", str(res), "--output", str(out)]) == 0 and out.exists()


def test_the_page_splits_by_human_labels_and_shows_short_signatures_and_why_na(tmp_path, capsys):
    from q2_plugins.metric.signature import Signature

    rows = [row(0, score=1.0, human_label="inconsistent", label="hallucination", label_reason="personal: I / we"),
            row(1, score=1.0, human_label="consistent", label="entailment")]
    sig = Signature([("q2", "0.1.0"), ("qg", "local:sha256:abc"), ("rest", "x" * 300)], [("q2", "0.1.0")])
    data = embedded(render_html(rows, signatures=[sig], summary={**summary_of_rows(rows), "q2": None,
                                                                  "note": "Q2 n/a: no NLI here"}))
    assert [r["human_label"] for r in data["rows"]] == ["inconsistent", "consistent"]
    assert data["signatures"] == [str(sig)] and data["signatures_short"] == [sig.short]
    assert data["rows"][0]["label_reason"] == "personal: I / we"
    # q2 score --html carries the input's human labels into the page; q2 report --texts too
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"response": "r", "knowledge": "k", "human_label": "consistent"}) + "\n")
    res, out = tmp_path / "s.jsonl", tmp_path / "r.html"
    res.write_text(json.dumps(row(0)) + "\n")
    assert main(["report", str(res), "--texts", str(inp), "--output", str(out)]) == 0
    assert embedded(out.read_text(encoding="utf-8"))["rows"][0]["human_label"] == "consistent"


def test_a_page_of_random_weight_models_says_its_scores_mean_nothing(tiny_models, tmp_path):
    """The tiny models' cards carry the random-weights mark, which the page turns into a note; a real model's folder
    (no such card) gets none, and the card leaves the model's identity alone."""
    from q2_plugins.backends.loading import RANDOM_WEIGHTS_MARK, random_weight_models
    from q2_plugins.jobs.report import render_html
    from q2_plugins.metric.signature import model_id

    config = {"qg_model": str(tiny_models["qg_short"]), "qa_model": str(tiny_models["qa"]),
              "nli_model": str(tiny_models["nli"]), "coref_model": None}
    assert random_weight_models(config) == ["nli_model", "qa_model", "qg_model"]
    assert "random-weight test models (nli_model, qa_model, qg_model" in render_html([], config=config)
    real = tmp_path / "real"
    shutil.copytree(tiny_models["nli"], real)
    (real / "README.md").write_text("# a fine-tuned NLI model\n")
    assert random_weight_models({"nli_model": str(real)}) == []
    assert RANDOM_WEIGHTS_MARK not in render_html([], config={"nli_model": str(real)})
    assert model_id(str(real)) == model_id(str(tiny_models["nli"]))


def test_a_sidecar_naming_test_models_gives_the_note_where_their_paths_do_not_resolve(tmp_path, capsys):
    """A report made elsewhere than the run (relative model paths no longer resolve) still says the scores mean
    nothing: the sidecar names the test models it found when the run wrote it."""
    res, out = tmp_path / "s.jsonl", tmp_path / "r.html"
    res.write_text(json.dumps(row(0)) + "\n")
    meta = {"signature": "q2:test", "config": {"qa_model": "models/qa"}, "random_weights": ["qa_model"]}
    (tmp_path / "s.jsonl.meta.json").write_text(json.dumps(meta))
    assert main(["report", str(res), "--output", str(out)]) == 0
    assert "random-weight test models (qa_model" in out.read_text(encoding="utf-8")
    del meta["random_weights"]
    (tmp_path / "s.jsonl.meta.json").write_text(json.dumps(meta))
    assert main(["report", str(res), "--output", str(out)]) == 0
    assert "random-weight test models" not in out.read_text(encoding="utf-8")
