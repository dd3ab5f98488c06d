"""Where the reference data bundled with the package lives (``q2_plugins/data``, whose README lists each data set,
its source and licence)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "bundled_path"]

#: the folder of the bundled reference data
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def bundled_path(name: str) -> Path:
    """The path of ``name`` (a file or folder under :data:`DATA_DIR`, e.g. ``"q2_wow"``); it must exist."""
    path = DATA_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"no bundled data {name!r} in {DATA_DIR}: the package is installed without its data "
                                f"files; reinstall q2-plugins from a wheel or a checkout, which carry them")
    return path
