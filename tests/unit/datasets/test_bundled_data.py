"""The reference data bundled in ``q2_plugins/data``: each folder says where it comes from and under which licence,
and the package data of setup.cfg ships every file of it."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from q2_plugins.datasets import DATA_DIR, bundled_path

REPO = Path(__file__).resolve().parents[3]


def test_every_bundled_folder_names_its_source_and_licence_and_keeps_the_licence_text():
    folders = sorted(p for p in DATA_DIR.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert {p.name for p in folders} >= {"q2_wow", "q2_original_run", "begin_dev", "begin_v2_dev",
                                         "faithdial_audit_ctrl_wow", "original_run_slice"}
    index = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for folder in folders:
        readme = (folder / "README.md").read_text(encoding="utf-8")
        assert "Source" in readme or "Provenance" in readme, folder
        assert "Licence" in readme or "licensed" in readme, folder
        assert f"`{folder.name}/`" in index, folder
        licences = [p for p in folder.rglob("LICENSE*")]
        assert licences or "../q2_original_run/LICENSE" in readme, folder
    for sub in (DATA_DIR / "begin_v2_dev").iterdir():
        if sub.is_dir():
            assert (sub / "LICENSE").is_file() and (sub / "NOTICE").is_file(), sub


def test_package_data_ships_every_bundled_file():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    globs = [g.strip() for g in cfg["options.package_data"]["q2_plugins"].splitlines() if g.strip()]
    package = REPO / "q2_plugins"
    shipped = {p for g in globs if g.startswith("data/") for p in package.glob(g) if p.is_file()}
    files = {p for p in DATA_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert files - shipped == set()


def test_bundled_path_names_what_is_missing():
    assert bundled_path("q2_wow").is_dir()
    with pytest.raises(FileNotFoundError, match="'no_such_data'.*reinstall"):
        bundled_path("no_such_data")


def test_wheel_carries_the_code_licence_and_every_bundled_licence(tmp_path_factory):
    """The wheel built from the repository holds the project's LICENSE (declared in its metadata) and, as package
    data, the licence and notice files of every bundled data folder."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "_q2_plugins_hook.py", "q2_plugins_hook.pth"):
        shutil.copy(REPO / name, src / name)
    for name in ("q2_plugins", "parlai_ext", "hf_evaluate_metric"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"],
                   cwd=src, check=True, capture_output=True)
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(licence) == (REPO / "LICENSE").read_bytes()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = z.read(metadata).decode("utf-8").split("\n\n", 1)[0].splitlines()
    assert "License: Apache-2.0" in headers and "License-File: LICENSE" in headers
    assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")[:200]
    data_licences = {p.relative_to(REPO).as_posix() for p in DATA_DIR.rglob("*")
                     if p.is_file() and p.name.upper().startswith(("LICENSE", "NOTICE", "WNDB_LICENSE"))}
    assert len(data_licences) >= 8
    assert data_licences - names == set()
