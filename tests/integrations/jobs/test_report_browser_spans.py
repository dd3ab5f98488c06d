"""The HTML report colours a response from its ``spans`` (docs/spans.md's example, in headless Chromium): one mark
per span, coloured by its score, titled with its label (after emoji too: the offsets count characters, the page's
strings UTF-16 units); the screenshot is the one docs/spans.md shows."""

from __future__ import annotations

import pytest

from q2_plugins.jobs.report import write_html
from tests.browser import close_to, open_report, rgb, score_rgb, screenshot, start_chromium
from tests.pipeline.metric.test_spans import DOC_KNOWLEDGE, DOC_RESPONSE, doc_example


@pytest.fixture(scope="module")
def driver():
    yield from start_chromium(width=1100, height=700)


def test_the_report_marks_the_spans_the_row_carries(driver, tmp_path):
    result = doc_example()
    res = result.responses[0]
    rows = [{"id": "bob-ross", "response": DOC_RESPONSE, "knowledge": DOC_KNOWLEDGE, **res.to_dict()}]
    path = tmp_path / "spans.html"
    write_html(path, rows, signatures=[result.signature], title="spans", sources=["docs/spans.md"])
    open_report(driver, path)
    driver.find_element("css selector", "#rows tr.resp[data-pos='0']").click()
    detail = driver.find_element("css selector", "#rows tr.detail[data-pos='0']")
    marks = detail.find_elements("css selector", "mark.hl[data-cand]")
    assert [m.text for m in marks] == [s.text for s in res.spans]
    for m, s in zip(marks, res.spans):
        assert float(m.get_attribute("data-score")) == s.score and s.label in m.get_attribute("title")
        colour = rgb(m.value_of_css_property("background-color"))
        if s.label == "unanswerable":  # a colour of its own (the legend's), not the red of a score of 0
            swatch = detail.find_element("css selector", ".legend mark.hl.unanswerable")
            assert close_to(colour, rgb(swatch.value_of_css_property("background-color")))
            assert not close_to(colour, score_rgb(s.score))
        else:
            assert close_to(colour, score_rgb(s.score))
    driver.execute_script("arguments[0].previousElementSibling.scrollIntoView()", detail)
    screenshot(driver, "report_spans.png")


def test_spans_after_emoji_mark_the_same_characters(driver, tmp_path):
    result = doc_example()
    row = result.responses[0].to_dict()
    prefix = "\U0001F3A8\U0001F600 \u00e9 "  # two characters beyond the BMP (two UTF-16 units each), then one within
    shift = len(prefix)
    for item in row["spans"] + row["questions"]:
        if isinstance(item.get("start"), int):
            item["start"], item["end"] = item["start"] + shift, item["end"] + shift
    response = prefix + DOC_RESPONSE
    assert all(response[s["start"]:s["end"]] == s["text"] for s in row["spans"])  # the offsets, as Python counts
    path = tmp_path / "emoji.html"
    write_html(path, [{"id": "emoji", "response": response, "knowledge": DOC_KNOWLEDGE, **row}],
               signatures=[result.signature], title="emoji", sources=["test"])
    open_report(driver, path)
    driver.find_element("css selector", "#rows tr.resp[data-pos='0']").click()
    detail = driver.find_element("css selector", "#rows tr.detail[data-pos='0']")
    marks = detail.find_elements("css selector", "mark.hl[data-cand]")
    assert [m.text for m in marks] == [s["text"] for s in row["spans"]]
