"""``q2 report --help`` says what a results file holds: q2 score and q2 replay output carry the response and the
knowledge, so ``--texts`` is for results that lack them."""

from __future__ import annotations

import pytest

from q2_plugins.cli import main


def test_report_help_says_q2_score_output_holds_the_texts(capsys):
    with pytest.raises(SystemExit) as done:
        main(["report", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "has none" not in text
    assert "q2 score and q2 replay output already hold both" in text
    assert "JSONL, Parquet, CSV / TSV" in text
