"""``q2 report`` of the replay file the sample script writes: its subsets repeat ids (``0`` in each), and the page
shows every row, keyed by its place, with a note counting the repeats."""

from __future__ import annotations

import json

from q2_plugins.cli import main
from q2_plugins.jobs.replay import bundled_original_run
from q2_plugins.jobs.report import load_results


def test_a_replay_whose_subsets_repeat_ids_is_reported_row_by_row(tmp_path, capsys):
    steps, scores = bundled_original_run()
    replayed = tmp_path / "replay.jsonl"
    assert main(["replay", "--steps", *map(str, steps), "--scores", *map(str, scores), "--output", str(replayed),
                 "--format", "json"]) == 0
    rows = [json.loads(line) for line in replayed.read_text(encoding="utf-8").splitlines()]
    repeats = len(rows) - len({r["id"] for r in rows})
    assert repeats > 0  # (the case: ids restart in each subset)
    capsys.readouterr()
    page = tmp_path / "replay.html"
    assert main(["report", str(replayed), "--output", str(page)]) == 0
    assert capsys.readouterr().out.startswith(f"{page}: {len(rows)} responses")
    data = load_results([replayed])
    assert [(r["source"], r["id"]) for r in data.rows] == [(r["source"], r["id"]) for r in rows]
    assert any(n.startswith(f"{repeats} rows have an id an earlier row has") for n in data.notes), data.notes
