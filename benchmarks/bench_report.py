#!/usr/bin/env python
"""Size and responsiveness of a large HTML report in headless Chromium.

Builds N result rows (default 10,000) by repeating the replay of the bundled slice of the original run (real
questions, answers and knowledge texts; ids made unique), writes the report, opens it from disk in a fresh headless
Chromium (Debian's chromium + chromium-driver, as the tests use) and prints: file size, time to write it, time from
navigation to the rendered page (the page's own clock, and wall time seen by the driver), and the in-page time of
sorting by score, filtering by status and by score range, paging, and opening the response with the most questions.

    python benchmarks/bench_report.py [--n 10000] [--keep out/bench_report.html]

Measures and prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from q2_plugins import __version__  # noqa: E402
from q2_plugins.jobs.replay import bundled_original_run, load_original_steps, load_recorded_scores, replay  # noqa: E402
from q2_plugins.jobs.report import write_html  # noqa: E402


def build_rows(n: int) -> list[dict[str, Any]]:
    """n rows cycling through the replayed slice (40 responses), each with a unique id."""
    base = []
    for steps, scores in zip(*bundled_original_run()):
        fallback = {k: v.q2_no_nli for k, v in load_recorded_scores(scores).items()}
        records = load_original_steps(steps, fallback)
        result = replay(records, explain=True)
        source = steps.name.removesuffix("_out.steps.csv")
        base += [{"id": rec.id, "source": source, **res.to_dict(), "response": rec.response,
                  "knowledge": rec.knowledge} for rec, res in zip(records, result.responses)]
    return [{**base[i % len(base)], "id": f"{base[i % len(base)]['id']}-{i}", "index": i} for i in range(n)]


_TIMED = """
const t0 = performance.now();
%s
return performance.now() - t0;
"""


def measure(driver: Any, path: Path) -> dict[str, float]:
    """Open ``path`` in ``driver`` and time the page's work (milliseconds)."""
    from selenium.webdriver.support.ui import WebDriverWait

    t0 = time.perf_counter()
    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, 120).until(lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
    wall = 1000 * (time.perf_counter() - t0)
    ms = {"open_wall_ms": wall,
          "open_page_ms": float(driver.execute_script("return +document.body.dataset.readyMs")),
          "rows_in_dom": float(driver.execute_script("return document.querySelectorAll('#rows tr.resp').length"))}
    steps = {
        "sort_by_score_ms": "document.querySelector(\"th[data-key='score'] button\").click();",
        "filter_status_ms": "const s = document.getElementById('f-status'); s.value = 'fallback';"
                            "s.dispatchEvent(new Event('change'));",
        "filter_score_range_ms": "document.getElementById('f-reset').click();"
                                 "const m = document.getElementById('f-min'); m.value = '0.4';"
                                 "m.dispatchEvent(new Event('change'));",
        "search_ms": "document.getElementById('f-reset').click();"
                     "const q = document.getElementById('f-search'); q.value = 'youtube';"
                     "q.dispatchEvent(new Event('change'));",
        "next_page_ms": "document.querySelector('#pager-top button.next').click();",
        "open_response_ms": "const rows = [...document.querySelectorAll('#rows tr.resp')];"
                            "rows.sort((a, b) => +b.children[7].textContent - +a.children[7].textContent);"
                            "rows[0].click();",
    }
    for name, code in steps.items():
        ms[name] = float(driver.execute_script(_TIMED % code))
    return ms


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--keep", help="write the report here (default: a temporary file)")
    args = parser.parse_args(argv)
    from tests.browser import start_chromium

    rows = build_rows(args.n)
    path = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "bench_report.html"
    t0 = time.perf_counter()
    write_html(path, rows, signatures=[f"replay|norm:q2-original|q2:{__version__}"], title=f"{args.n} responses")
    write_s = time.perf_counter() - t0
    browsers = start_chromium()
    driver = next(browsers)
    try:
        ms = measure(driver, path)
    finally:
        browsers.close()
    report = {"n": args.n, "bytes": path.stat().st_size, "write_s": round(write_s, 3),
              **{k: round(v, 1) for k, v in ms.items()}}
    print(json.dumps(report, indent=2))
    print(f"{args.n} responses: {report['bytes'] / 1e6:.1f} MB, written in {write_s:.2f} s; rendered "
          f"{ms['open_page_ms']:.0f} ms after navigation ({ms['open_wall_ms']:.0f} ms wall, driver included); "
          f"sort {ms['sort_by_score_ms']:.0f} ms, filter {ms['filter_status_ms']:.0f} / "
          f"{ms['filter_score_range_ms']:.0f} ms, search {ms['search_ms']:.0f} ms, open a response "
          f"{ms['open_response_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
