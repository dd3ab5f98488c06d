"""Headless Chromium for the HTML report tests: Debian's ``chromium`` + ``chromium-driver`` driven by selenium.

Missing pieces skip the tests locally and fail them in CI (``CI`` set), where ``scripts/setup.sh`` installs them.
"""

from __future__ import annotations

import colorsys
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import in_ci

REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = REPO / "out"
HEADLESS_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def _binary(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    return next((p for p in map(shutil.which, names) if p), None)


def start_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """Yield a selenium driver of a fresh headless Chromium (own profile directory); skip / fail when unavailable."""
    chromium = _binary("Q2_CHROMIUM", "chromium", "chromium-browser")
    driver_bin = _binary("Q2_CHROMEDRIVER", "chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver (chromium-driver)", driver_bin))
               if not path]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (the report-tests extra)")
    if missing:
        message = (f"browser tests need {', '.join(missing)}: run scripts/setup.sh as root (apt-get install chromium "
                   f"chromium-driver) with the report-tests extra, or set Q2_CHROMIUM / Q2_CHROMEDRIVER")
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    profile = tempfile.mkdtemp(prefix="q2-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in HEADLESS_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_report(driver: Any, path: Path) -> None:
    """Load a report from disk and wait until its script has rendered the page."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def screenshot(driver: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / name
    assert driver.save_screenshot(str(path)), f"could not write {path}"
    return path


def rgb(css: str) -> tuple[int, int, int]:
    """``rgb(r, g, b)`` / ``rgba(...)`` as computed by the browser -> (r, g, b)."""
    m = re.match(r"rgba?\((\d+), (\d+), (\d+)", css)
    assert m, f"not a computed colour: {css!r}"
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def score_rgb(score: float) -> tuple[int, int, int]:
    """The report's colour of a score: hsl(120 * score, 70%, 78%), from red at 0 to green at 1."""
    r, g, b = colorsys.hls_to_rgb(round(120 * score) / 360, 0.78, 0.70)
    return round(r * 255), round(g * 255), round(b * 255)


def close_to(a: tuple[int, ...], b: tuple[int, ...], tol: int = 1) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b))
