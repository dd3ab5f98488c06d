"""The Ray engine's staging folder (``OUTPUT.partial/``) without Ray: only a real folder of this user is used (never
through a link), a resume counts only complete blocks at their input positions, and the result files written from
the staged blocks put every row in exactly one output."""

from __future__ import annotations

import os

import pytest

from tests.conftest import optional_import

pa = optional_import("pyarrow", "ray")

from q2_plugins.io.outputs import UnsafePathError  # noqa: E402
from q2_plugins.jobs.ray import staging  # noqa: E402
from q2_plugins.jobs.ray.staging import StagedOutput, Staging, commit_staged, write_staged  # noqa: E402


def block(start: int, n: int, **columns) -> pa.Table:
    scores = [None if (start + i) % 3 == 0 else (start + i) / 10 for i in range(n)]
    return pa.table({"row": list(range(start, start + n)), "score": scores, **columns})


@pytest.mark.parametrize("planted", ["link to a file", "link to a folder", "a file", "another user's folder"])
def test_the_staging_folder_must_be_a_real_folder_of_this_user(planted, tmp_path):
    path, victim = tmp_path / "out.parquet.partial", tmp_path / "victim"
    if planted == "link to a file":
        victim.write_text("precious\n")
        path.symlink_to(victim)
    elif planted == "link to a folder":
        victim.mkdir()
        path.symlink_to(victim)
    elif planted == "a file":
        path.write_text("precious\n")
    else:
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        path.mkdir()
        os.chown(path, 54321, 54321)
    why = "it (is a link|is not a folder|belongs to another user)"
    with pytest.raises(UnsafePathError, match=f"^output: refusing to write {path}: {why}") as e:
        Staging(path)
    assert e.value.setting == "output"
    assert not victim.exists() or (victim.read_text() == "precious\n" if victim.is_file() else
                                   list(victim.iterdir()) == [])


def test_a_new_staging_folder_is_this_users_alone(tmp_path):
    s = Staging(tmp_path / "out.csv.partial")
    s.add(block(0, 2))
    assert (os.stat(s.path).st_mode & 0o777) == 0o700
    s.close()
    os.chmod(s.path, 0o777)  # (an existing one of this user is made private again)
    Staging(s.path).close()
    assert (os.stat(s.path).st_mode & 0o777) == 0o700


def test_a_resume_counts_only_complete_blocks_at_their_input_positions(tmp_path):
    s = Staging(tmp_path / "out.parquet.partial")
    for start in (0, 4, 8):
        s.add(block(start, 4))
    s.close()
    path = s.path
    (path / "block-000003.arrow.tmp").write_bytes(b"torn")  # a block stopped while it was written
    (path / "block-000003.arrow").write_bytes(b"ARROW1 torn")  # (cannot happen: renamed when complete)
    assert Staging(path).committed() == 12
    seen = []
    again = Staging(path)
    assert again.keep(seen.append) == 12 and [t.num_rows for t in seen] == [4, 4, 4]
    assert sorted(p.name for p in path.iterdir()) == [f"block-00000{i}.arrow" for i in range(3)]
    again.add(block(20, 4))  # rows that are not the next positions of the input (another run's block)
    again.close()
    assert Staging(path).committed() == 12
    s = Staging(path)
    s.clear()
    assert list(path.iterdir()) == [] and s.committed() == 0


def test_filter_mode_puts_each_staged_row_in_exactly_one_output(tmp_path, monkeypatch):
    """Kept rows to a folder of part files (several, of PART_ROWS rows or so), dropped rows to one CSV file; the
    part files of an earlier, longer run are removed, other files of the folder left; the staging goes at the end."""
    monkeypatch.setattr(staging, "PART_ROWS", 4)
    s = Staging(tmp_path / "kept.partial")
    for start in range(0, 24, 3):
        s.add(block(start, 3, **({"extra": ["x"] * 3} if start == 9 else {})))
    kept_folder, dropped = tmp_path / "kept", tmp_path / "dropped.csv"
    kept_folder.mkdir()
    for name in ("part-00009.parquet", "notes.txt"):
        (kept_folder / name).write_text("an earlier run's\n")
    outputs = [StagedOutput(kept_folder, "parquet", folder=True, kept=True),
               StagedOutput(dropped, "csv", kept=False, setting="dropped_output")]
    write_staged(s, outputs, 0.5, keep_unscored=False)
    assert not dropped.exists() and "part-00000.parquet" not in os.listdir(kept_folder)  # nothing in place yet
    commit_staged(s, outputs)
    import csv

    import pyarrow.parquet as pq

    parts = sorted(p.name for p in kept_folder.iterdir())
    assert parts[0] == "notes.txt" and "part-00009.parquet" not in parts and len(parts) > 2
    kept = [r for p in parts[1:] for r in pq.read_table(kept_folder / p).to_pylist()]
    with dropped.open(newline="") as f:
        dropped_rows = list(csv.DictReader(f))
    assert [r["row"] for r in kept] == [i for i in range(24) if i % 3 and i / 10 >= 0.5]
    assert [int(r["row"]) for r in dropped_rows] == [i for i in range(24) if not i % 3 or i / 10 < 0.5]
    assert outputs[0].rows + outputs[1].rows == 24
    assert all(set(r) == {"row", "score", "extra"} for r in kept)  # every part has the union of the columns
    assert not s.path.exists()
