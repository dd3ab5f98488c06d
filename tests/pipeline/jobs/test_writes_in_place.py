"""Every file a command writes lands where it is named and nowhere else (tiny models): ``OUTPUT.partial`` is opened
once, before the models load, and written through that descriptor (a link swapped in while they load is never
followed; a hard-linked one is refused before they load); ``q2 replay --output``, ``q2 meta-eval --export-inputs``,
``q2 perturb --output`` and ``q2 train``'s saved files replace a planted link instead of writing its target; a run
killed after its sidecar is written leaves no old rows under the new signature."""

from __future__ import annotations

import json
import os
from pathlib import Path

from q2_plugins.cli import main
from q2_plugins.scorer import Q2Scorer
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD, jsonl
from tests.pipeline.jobs.test_shared_folder import one_line, read

model_flags = base.model_flags  # the fixture: tiny models' flags
PRECIOUS = "precious\n" * 50


def victim_and_folder(tmp_path: Path) -> tuple[Path, Path]:
    outside, run = tmp_path / "outside", tmp_path / "shared"
    outside.mkdir()
    run.mkdir()
    victim = outside / "victim.txt"
    victim.write_text(PRECIOUS)
    return victim, run


def stopped_run(run: Path, model_flags: list, monkeypatch, capsys) -> tuple[Path, Path, list]:
    """A run of 40 rows stopped after its first chunk: ``out.jsonl.partial`` and its record, to resume."""
    src = jsonl(run / "in.jsonl", [dict(GOOD, id=i, response=f"paris is in france number {i} .") for i in range(40)])
    out = run / "out.jsonl"
    real, scored = Q2Scorer.score, []

    def stops_after_the_first_chunk(self, **kw):
        if scored:
            raise KeyboardInterrupt
        scored.append(len(kw["responses"]))
        return real(self, **kw)

    monkeypatch.setattr(Q2Scorer, "score", stops_after_the_first_chunk)
    argv = ["score", "--input", str(src), "--output", str(out), "--commit-seconds", "0", *model_flags]
    assert main(argv) == 130
    monkeypatch.setattr(Q2Scorer, "score", real)
    capsys.readouterr()
    assert Path(f"{out}.partial").is_file() and Path(f"{out}.resume.json").is_file()
    return src, out, argv


# -- 1. OUTPUT.partial: opened once, before the models load ----------------------------------------------------------
def test_a_link_swapped_in_while_the_models_load_is_never_written_through(tmp_path, capsys, model_flags,
                                                                           monkeypatch):
    victim, run = victim_and_folder(tmp_path)
    src, out, argv = stopped_run(run, model_flags, monkeypatch, capsys)
    partial = Path(f"{out}.partial")
    real_load = Q2Scorer.load

    def swapped_while_loading(self, **kw):  # the checks are done: the window a planted link aims at
        partial.unlink()
        partial.symlink_to(victim)
        return real_load(self, **kw)

    monkeypatch.setattr(Q2Scorer, "load", swapped_while_loading)
    code = main(argv + ["--resume"])
    assert victim.read_text() == PRECIOUS  # neither truncated nor appended to
    assert partial.is_symlink() and not out.exists()
    line = capsys.readouterr().err.splitlines()[-1]  # (after the line that says the run resumes)
    assert code == 2 and str(partial) in line and "replaced" in line and "--resume" not in line, (code, line)


def test_a_hard_linked_partial_is_refused_before_the_models_load(tmp_path, capsys, model_flags, monkeypatch):
    victim, run = victim_and_folder(tmp_path)
    src = jsonl(run / "in.jsonl", [dict(GOOD, id=i) for i in range(3)])
    out = run / "out.jsonl"
    os.link(victim, f"{out}.partial")
    loads = []
    monkeypatch.setattr(Q2Scorer, "load", lambda self, **kw: loads.append(1))
    for resume in ([], ["--resume"]):
        assert main(["score", "--input", str(src), "--output", str(out), *resume, *model_flags]) == 2
        line = one_line(capsys.readouterr().err)
        assert f"{out}.partial" in line and "hard link" in line, line
    assert not loads and not Path(f"{out}.resume.json").exists()
    assert victim.read_text() == PRECIOUS


# -- 2. every other command that writes a file: a planted link is replaced, its target untouched --------------------
def planted(path: Path, victim: Path) -> Path:
    path.symlink_to(victim)
    return path


def assert_replaced(path: Path, victim: Path) -> None:
    assert victim.read_text() == PRECIOUS
    assert not path.is_symlink() and path.is_file() and path.read_text() != PRECIOUS


def test_replay_output_replaces_a_planted_link(tmp_path, shared_data, capsys):
    victim, run = victim_and_folder(tmp_path)
    folder = shared_data / "q2_original_run" / "memnet_consistent"
    out = planted(run / "replay.jsonl", victim)
    assert main(["replay", "--steps", str(folder / "memnet_consistent_out.steps.csv"), "--scores",
                 str(folder / "memnet_consistent_scores.csv"), "--output", str(out)]) == 0
    assert_replaced(out, victim)
    assert len(read(out)) == 150


def test_meta_eval_export_inputs_replaces_a_planted_link(tmp_path, shared_data, capsys):
    victim, run = victim_and_folder(tmp_path)
    out = planted(run / "inputs.jsonl", victim)
    assert main(["meta-eval", "--dataset", "wow", "--data", str(shared_data / "q2_wow"), "--export-inputs",
                 str(out)]) == 0
    assert_replaced(out, victim)


def test_perturb_output_replaces_a_planted_link(tmp_path, capsys):
    victim, run = victim_and_folder(tmp_path)
    src = jsonl(run / "dialogue.jsonl", [{"response": "Rome was built by Romulus.",
                                          "knowledge": "Rome was built by Romulus in 753 BC."}])
    out = planted(run / "pairs.jsonl", victim)
    assert main(["perturb", "--input", str(src), "--output", str(out), "--methods", "negation"]) == 0
    assert_replaced(out, victim)


def test_train_saves_its_files_replacing_planted_links(tmp_path):
    from q2_plugins.training.train import _save

    victim, run = victim_and_folder(tmp_path)
    out = run / "model"
    out.mkdir()
    links = [planted(out / name, victim) for name in ("config.json", "tokenizer.json")]

    class Writes:  # as transformers' save methods do: open(folder / name, "w")
        def __init__(self, name):
            self.name = name

        def save_model(self, folder):
            Path(folder, self.name).write_text("{}\n")

        save_pretrained = save_model

    _save(Writes("config.json"), Writes("tokenizer.json"), str(out))
    for link in links:
        assert_replaced(link, victim)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "tokenizer.json"]  # no staging folder left


# -- 3. a run killed between its sidecar and its results ------------------------------------------------------------
def test_a_kill_after_the_sidecar_leaves_no_old_rows_under_the_new_signature(tmp_path, capsys, model_flags,
                                                                               monkeypatch):
    import q2_plugins.io.outputs as outputs

    src = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(3)])
    out = tmp_path / "out.jsonl"
    argv = ["score", "--input", str(src), "--output", str(out), *model_flags]
    assert main(argv) == 0
    old_signature = json.loads(Path(f"{out}.meta.json").read_text())["signature"]
    real = outputs.replace_own

    def killed_before_the_rows_go_in_place(src_path, target, **kw):
        if str(src_path).endswith(".partial"):
            raise KeyboardInterrupt
        return real(src_path, target, **kw)

    monkeypatch.setattr(outputs, "replace_own", killed_before_the_rows_go_in_place)
    assert main(argv + ["--qg-max-length", "5"]) == 130  # other settings: another signature
    capsys.readouterr()
    new_signature = json.loads(Path(f"{out}.meta.json").read_text())["signature"]
    assert new_signature != old_signature
    assert not out.exists()  # the old rows are not left beside the new sidecar
    assert main(["report", str(out), "--output", str(tmp_path / "r.html")]) != 0  # nothing to show under it
    monkeypatch.setattr(outputs, "replace_own", real)
    assert main(argv + ["--qg-max-length", "5", "--resume"]) == 0  # the stopped run completes
    assert len(read(out)) == 3 and json.loads(Path(f"{out}.meta.json").read_text())["signature"] == new_signature

