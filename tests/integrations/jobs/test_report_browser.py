"""The HTML report in headless Chromium: what the page shows for a scripted-scorer result with known questions,
sorting, filtering, expanding, pagination, and that text from the data never runs as markup.

Screenshots for people go to ``out/report_*.png`` (overview, one response opened, a filtered view, and a response of
the replayed original run).
"""

from __future__ import annotations

import json
import time

import pytest

from q2_plugins.cli import main
from q2_plugins.jobs.compare import CompareConfig, compare_files
from q2_plugins.jobs.report import write_html
from q2_plugins.metric import names as M
from q2_plugins.metric.components import NLILabel
from tests.browser import REPO, close_to, open_report, rgb, score_rgb, screenshot, start_chromium
from tests.fakes import FakeQA, scripted_scorer

LA_RESP = "I was born in LA, it is a great city."
LA_KNOW = "Kobe Bryant was born in Los Angeles, California."
COF_RESP = "Coffee is very acidic and can have a stimulating effect."
COF_KNOW = "Coffee is a brewed drink prepared from roasted coffee beans."
FB_RESP = "Hello there."
FB_KNOW = "Pandas eat bamboo."
SCRIPT = "<script>window.__pwned=1;document.title='pwned'</script>"
IMG_Q = '<img src=x onerror="window.__pwned=4;document.title=\'pwned\'">?'
INJ_RESP = f'{SCRIPT} and <img src=x onerror="window.__pwned=2">'
INJ_KNOW = 'The knowledge <img src=x onerror="window.__pwned=3"> says </script><b>bold</b>'
INJ_KANS = "</script><b>bold</b>"
BAD_KNOW = "this knowledge breaks the QA model"
TITLE = "Q² report: scripted"


def scripted_result():
    """Five responses with known questions: LA (entailed + unanswerable), coffee (exact + dropped), a fallback, an
    injection row and an error row."""
    cands = {LA_RESP: ["LA", "a great city"], COF_RESP: ["Coffee", "a stimulating effect"], FB_RESP: [],
             INJ_RESP: [SCRIPT], "Fails.": ["Fails"]}
    qg = {("LA", LA_RESP): ["Where was I born?"], ("a great city", LA_RESP): ["What is LA?"],
          ("Coffee", COF_RESP): ["What is very acidic?"], ("a stimulating effect", COF_RESP): ["What can coffee have?"],
          (SCRIPT, INJ_RESP): [IMG_Q], ("Fails", "Fails."): ["What fails?"]}
    qa = {("Where was I born?", LA_RESP): "LA", ("Where was I born?", LA_KNOW): "Los Angeles",
          ("What is LA?", LA_RESP): "a great city",
          ("What is very acidic?", COF_RESP): "Coffee", ("What is very acidic?", COF_KNOW): "Coffee",
          ("What can coffee have?", COF_RESP): "acidic",
          (IMG_Q, INJ_RESP): SCRIPT, (IMG_Q, INJ_KNOW): INJ_KANS, ("What fails?", "Fails."): "Fails"}
    nli = {("Where was I born? Los Angeles.", "Where was I born? LA."): NLILabel.ENTAILMENT,
           (FB_KNOW.lower(), FB_RESP.lower()): NLILabel.CONTRADICTION}
    scorer = scripted_scorer(cands, qg, FakeQA(qa, fail_on=[BAD_KNOW]), nli)
    responses = [LA_RESP, COF_RESP, FB_RESP, INJ_RESP, "Fails."]
    knowledge = [LA_KNOW, COF_KNOW, FB_KNOW, INJ_KNOW, BAD_KNOW]
    result = scorer.score(responses=responses, knowledge=knowledge, explain=True, label=True)
    ids = ["la", "coffee", "fallback", '<img src=x onerror="window.__pwned=5">', "error"]
    rows = [{"id": i, **r.to_dict(), "response": resp, "knowledge": know}
            for i, r, resp, know in zip(ids, result.responses, responses, knowledge)]
    return result, rows


@pytest.fixture(scope="module")
def driver():
    yield from start_chromium()


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    result, rows = scripted_result()
    path = tmp_path_factory.mktemp("report") / "scripted.html"
    write_html(path, rows, signatures=[result.signature], title=TITLE, sources=["scripted"])
    return result, rows, path


def js(driver, code, *args):
    return driver.execute_script(code, *args)


def table_ids(driver):
    return js(driver, "return [...document.querySelectorAll('#rows tr.resp td.id')].map(td => td.textContent)")


def open_row(driver, pos):
    driver.find_element("css selector", f"#rows tr.resp[data-pos='{pos}']").click()
    return driver.find_element("css selector", f"#rows tr.detail[data-pos='{pos}']")


def marks(detail, attr):
    return [(m.text, m.get_attribute(attr), m.get_attribute("data-score"), rgb(m.value_of_css_property(
        "background-color")), "unasked" in m.get_attribute("class"))
        for m in detail.find_elements("css selector", f"mark.hl[{attr}]")]


def test_overview_shows_the_system_figures_and_every_response(driver, scripted):
    result, rows, path = scripted
    open_report(driver, path)
    assert driver.title == TITLE
    figures = {e.get_attribute("data-figure"): e.find_element("css selector", ".value").text
               for e in driver.find_elements("css selector", "#summary .figure")}
    assert figures == {"q2": f"{result.score:.4f}", "q2_no_nli": f"{result.score_no_nli:.4f}",
                       "coverage": f"{100 * result.coverage:.2f}%",
                       "fallback_rate": f"{100 * result.fallback_rate:.2f}%"}
    counts = {e.get_attribute("data-count"): int(e.find_element("css selector", "b").text)
              for e in driver.find_elements("css selector", "#summary .counts span")}
    s = result.stats
    assert counts == {"responses": 5, "scored": s.n_scored, "with questions": s.n_with_questions,
                      "fallback": s.n_fallback, "no valid question": s.n_no_valid_question, "errors": 1}
    # the short signature is shown, the full one is there on demand
    assert driver.find_element("css selector", "#summary details summary .signature").text == result.signature.short
    full = driver.find_element("css selector", "#summary details > div.signature")
    assert not full.is_displayed() and full.get_attribute("textContent") == result.signature
    cis = {e.get_attribute("data-ci"): e.text for e in driver.find_elements("css selector", "#summary .ci")}
    summary = result.stats.summary()
    assert cis == {"q2": f"95% CI [{summary['q2_ci_low']:.4f}, {summary['q2_ci_high']:.4f}]",
                   "coverage": f"95% CI [{100 * summary['coverage_ci_low']:.2f}%, "
                               f"{100 * summary['coverage_ci_high']:.2f}%]"}
    method = driver.find_element("css selector", "#summary [data-ci-method]").text  # what the intervals are
    assert M.MEAN_INTERVAL_METHOD in method and "coverage — Wilson score interval" in method
    assert not driver.find_element("css selector", "#compare").is_displayed()  # one file: nothing to compare
    assert table_ids(driver) == [r["id"] for r in rows]
    statuses = js(driver, "return [...document.querySelectorAll('#rows tr.resp')].map(t => t.dataset.status)")
    assert statuses == ["scored", "scored", "fallback", "scored", "error"]
    # histogram: one stacked rect per (bin, class); BEGIN labels colour it (entailment = consistent)
    bars = js(driver, "return [...document.querySelectorAll('#hist rect')].map(r => "
                      "[r.parentNode.dataset.bin, r.dataset.class, +r.dataset.count])")
    expected = {}
    for r in result.responses:
        if r.score is not None:
            key = (str(min(9, int(r.score * 10))), "consistent" if r.label == "entailment" else "inconsistent")
            expected[key] = expected.get(key, 0) + 1
    assert {(b, c): n for b, c, n in bars} == expected
    screenshot(driver, "report_overview.png")


def test_an_opened_response_highlights_its_candidates_and_answers(driver, scripted):
    result, rows, path = scripted
    open_report(driver, path)
    detail = open_row(driver, 0)
    # response: each candidate coloured by its question's score (LA entailed -> 1), except an unanswerable one (a
    # great city: no answer in the knowledge, score 0), which has a colour of its own, not the red of unsupported
    got = marks(detail, "data-cand")
    assert [(t, c, s, u) for t, c, s, _, u in got] == [("LA", "LA", "1", False), ("a great city", "a great city", "0",
                                                                                      False)]
    labels = [m.get_attribute("data-label") for m in detail.find_elements("css selector", "mark.hl[data-cand]")]
    assert labels == ["supported", "unanswerable"]
    assert close_to(got[0][3], score_rgb(1.0)) and got[0][3][1] > got[0][3][0]  # green
    assert not close_to(got[1][3], score_rgb(0.0)) and got[1][3][2] > got[1][3][1]  # not red: violet
    legend = detail.find_element("css selector", ".legend")
    assert "0 unsupported" in legend.text and "unanswerable" in legend.text
    swatch = legend.find_element("css selector", "mark.hl.unanswerable")
    assert close_to(rgb(swatch.value_of_css_property("background-color")), got[1][3])  # the legend shows the colour
    # knowledge: the answer found there, coloured by its question's score
    kmarks = marks(detail, "data-q")
    assert [(t, q, s) for t, q, s, _, _ in kmarks] == [("Los Angeles", "Q1", "1")]
    assert close_to(kmarks[0][3], score_rgb(1.0))
    cells = [[td.text for td in tr.find_elements("css selector", "td")]
             for tr in detail.find_elements("css selector", "table.questions tbody tr")]
    q = result.responses[0].questions
    assert cells == [
        ["Q1", "LA", "Where was I born?", "LA", "Los Angeles", f"{q[0].f1:.3f}", "entailment", "1.000"],
        ["Q2", "a great city", "What is LA?", "a great city", "no answer", "0.000", "—", "0.000"],
    ]
    assert detail.find_element("css selector", ".gradient").is_displayed()  # the legend
    js(driver, "arguments[0].previousElementSibling.scrollIntoView()", detail)
    screenshot(driver, "report_response.png")
    # a dropped question: grey dashed candidate, its reason in the dropped table
    detail = open_row(driver, 1)
    assert [(t, s, u) for t, _, s, _, u in marks(detail, "data-cand")] == [("Coffee", "1", False),
                                                                          ("a stimulating effect", None, True)]
    dropped = [[td.text for td in tr.find_elements("css selector", "td")]
               for tr in detail.find_elements("css selector", "table.dropped tbody tr")]
    assert dropped == [["a stimulating effect", "What can coffee have?",
                        "the answer from the response is not the candidate", "acidic"]]
    # the fallback's NLI label, and a row error
    assert "contradiction" in open_row(driver, 2).find_element("css selector", ".fallback").text
    assert "scripted failure on context" in open_row(driver, 4).find_element("css selector", ".errorbox").text
    # closing a response removes its explanation; the keyboard opens it too
    row0 = driver.find_element("css selector", "#rows tr.resp[data-pos='0']")
    row0.click()
    assert not driver.find_elements("css selector", "#rows tr.detail[data-pos='0']")
    assert row0.get_attribute("aria-expanded") == "false"
    from selenium.webdriver.common.keys import Keys

    row0.send_keys(Keys.ENTER)
    assert driver.find_elements("css selector", "#rows tr.detail[data-pos='0']")


def test_sorting_by_score(driver, scripted):
    result, rows, path = scripted
    open_report(driver, path)
    header = driver.find_element("css selector", "th[data-key='score'] button")
    scored = sorted((r for r in rows if r["score"] is not None), key=lambda r: (r["score"], rows.index(r)))
    header.click()  # descending first
    desc = sorted(scored, key=lambda r: (-r["score"], rows.index(r)))
    assert table_ids(driver) == [r["id"] for r in desc] + ["error"]  # no score: last either way
    header.click()
    assert table_ids(driver) == [r["id"] for r in scored] + ["error"]
    assert driver.find_element("css selector", "th[data-key='score']").get_attribute("aria-sort") == "ascending"


def test_filtering_by_status_label_range_and_search(driver, scripted):
    from selenium.webdriver.support.ui import Select

    result, rows, path = scripted
    open_report(driver, path)
    Select(driver.find_element("id", "f-status")).select_by_value("fallback")
    assert table_ids(driver) == ["fallback"]
    driver.find_element("id", "f-reset").click()
    Select(driver.find_element("id", "f-label")).select_by_value("generic")
    assert table_ids(driver) == [r["id"] for r in rows if r["label"] == "generic"]
    Select(driver.find_element("id", "f-label")).select_by_value("__none__")
    assert table_ids(driver) == [r["id"] for r in rows if r["label"] is None]
    driver.find_element("id", "f-reset").click()
    driver.find_element("id", "f-min").send_keys("0.4")
    driver.find_element("id", "f-max").send_keys("0.6\n")
    js(driver, "document.getElementById('f-max').dispatchEvent(new Event('change'))")
    assert table_ids(driver) == [r["id"] for r in rows if r["score"] is not None and 0.4 <= r["score"] <= 0.6]
    driver.find_element("id", "f-reset").click()
    driver.find_element("id", "f-search").send_keys("ACIDIC")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 5).until(lambda d: table_ids(d) == ["coffee"])
    assert "1 of 1 matching (5 responses)" in driver.find_element("css selector", "#pager-top .shown").text
    screenshot(driver, "report_filtered.png")


def test_text_from_the_data_runs_nothing(driver, scripted):
    result, rows, path = scripted
    html = path.read_text(encoding="utf-8")
    assert html.count("</script>") == 2 and "<img" not in html  # our two closing tags; no markup from the data
    open_report(driver, path)
    for pos in range(len(rows)):
        open_row(driver, pos)
    assert js(driver, "return window.__pwned === undefined")
    assert driver.title == TITLE
    assert js(driver, "return document.images.length") == 0
    assert js(driver, "return document.scripts.length") == 2
    assert js(driver, "return performance.getEntriesByType('resource').length") == 0  # nothing was fetched
    detail = driver.find_element("css selector", "#rows tr.detail[data-pos='3']")
    assert [m.text for m in detail.find_elements("css selector", "mark.hl[data-cand]")] == [SCRIPT]
    shown = js(driver, "return [...arguments[0].querySelectorAll('.text-block')].map(b => [...b.childNodes]"
                       ".filter(n => n.nodeName !== 'SUP').map(n => n.textContent).join(''))", detail)
    assert shown == [INJ_RESP, INJ_KNOW]  # shown as text, character for character
    assert IMG_Q in detail.text and INJ_KANS in detail.text
    assert [m.text for m in detail.find_elements("css selector", "mark.hl[data-q]")] == [INJ_KANS]
    assert rows[3]["id"] in driver.find_element("css selector", "#rows tr.resp[data-pos='3'] td.id").text
    # and were markup ever to reach the page, its Content-Security-Policy (our one script, by hash) blocks it
    js(driver, "document.body.insertAdjacentHTML('beforeend', '<img src=x onerror=\"window.__csp=1\">')")
    js(driver, "const s = document.createElement('script'); s.textContent = 'window.__csp = 2';"
               "document.body.append(s)")
    time.sleep(0.3)
    assert js(driver, "return window.__csp === undefined")


def test_large_reports_render_one_page_of_rows(driver, tmp_path):
    rows = [{"id": f"r{i}", "index": i, "status": "scored", "score": (i % 101) / 100, "score_no_nli": 0.0,
             "num_questions": 1, "response": f"response number {i}", "knowledge": "k"} for i in range(2000)]
    rows[1]["knowledge"] = ["first passage", "second passage"]  # evaluate accepts several passages
    path = write_html(tmp_path / "big.html", rows, signatures=["sig"], page_size=50)
    open_report(driver, path)
    assert len(table_ids(driver)) == 50
    assert js(driver, "return document.querySelectorAll('tr.detail').length") == 0  # explanations render on open
    blocks = open_row(driver, 1).find_elements("css selector", ".text-block")
    assert [b.get_attribute("textContent") for b in blocks] == ["response number 1", "first passage\nsecond passage"]
    driver.find_element("css selector", "#pager-top button.next").click()
    assert table_ids(driver) == [f"r{i}" for i in range(50, 100)]
    driver.find_element("id", "f-search").send_keys("number 1999")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 5).until(lambda d: table_ids(d) == ["r1999"])


def test_replay_of_the_bundled_run_opens_with_real_questions(driver, tmp_path, capsys):
    from q2_plugins.jobs.replay import bundled_original_run

    steps, scores = bundled_original_run()
    out, html = tmp_path / "replay.jsonl", tmp_path / "replay.html"
    assert main(["replay", "--steps", *map(str, steps), "--scores", *map(str, scores), "--explain",
                 "--output", str(out), "--html", str(html)]) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    open_report(driver, html)
    pos = next(i for i, r in enumerate(rows) if r["response"].startswith("he became famous on youtube"))
    detail = open_row(driver, pos)
    got = {t: s for t, _, s, _, _ in marks(detail, "data-cand")}
    expected = {q["candidate"]: q["score"] for q in rows[pos]["questions"]}
    assert {c: float(s) for c, s in got.items()} == expected
    js(driver, "arguments[0].previousElementSibling.scrollIntoView()", detail)
    screenshot(driver, "report_replay_response.png")


def test_a_report_of_several_systems_shows_the_paired_test_and_the_largest_differences(driver, tmp_path, capsys):
    from q2_plugins.jobs.replay import bundled_original_run

    paths = []
    for steps, scores in zip(*bundled_original_run()):  # the four annotated subsets as four systems
        paths.append(str(tmp_path / steps.name.replace("_out.steps.csv", ".jsonl")))
        assert main(["replay", "--steps", str(steps), "--scores", str(scores), "--output", paths[-1]]) == 0
    html = tmp_path / "systems.html"
    assert main(["report", *paths, "--output", str(html)]) == 0
    capsys.readouterr()
    comparison = compare_files(paths, CompareConfig())  # what q2 compare prints, as objects
    open_report(driver, html)
    assert driver.find_element("css selector", "#compare").is_displayed()
    cells = js(driver, "return [...document.querySelectorAll('#compare table.cmp[data-figure=q2] tbody tr')]"
                       ".map(tr => [...tr.children].map(td => td.textContent))")
    for system, figure, row in zip(comparison.systems, comparison.figures["q2"], cells):
        assert row[0] == system.name and row[1] == f"{figure.value:.4f}"
        assert row[2] == f"[{figure.interval.low:.4f}, {figure.interval.high:.4f}]"
        if figure.p_value is not None:
            assert row[5] == f"{figure.p_value:.4f}" + (" *" if figure.p_value < 0.05 else "")
    gaps = js(driver, "return [...document.querySelectorAll('#compare table.diffs tbody tr')]"
                      ".map(tr => [tr.dataset.id, tr.lastChild.textContent])")
    largest = comparison.largest_differences()
    assert gaps == [[str(d["id"]), f"{d['largest_gap']:.4f}"] for d in largest]
    driver.find_element("css selector", f"#compare table.diffs tr[data-id='{largest[0]['id']}'] button").click()
    shown = table_ids(driver)
    assert len(shown) == len(paths) and all(i.endswith(f" {largest[0]['id']}") for i in shown)  # that id's rows
    screenshot(driver, "report_systems_compared.png")


def test_benchmark_script_measures_a_report(driver, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "bench_report.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.build_rows(120)
    assert len({r["id"] for r in rows}) == 120 and rows[40]["response"] == rows[0]["response"]
    path = write_html(tmp_path / "bench.html", rows)
    ms = bench.measure(driver, path)
    assert ms["rows_in_dom"] == 50 and set(ms) >= {"open_page_ms", "sort_by_score_ms", "search_ms"}
    assert driver.find_elements("css selector", "#rows tr.detail")  # the benchmark opened a response
