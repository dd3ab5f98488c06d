"""The HTML report of a --coref result in headless Chromium: the response with its spans (a question about a
replaced mention marks the pronoun), the replaced pronouns, and the questions about a replaced mention."""

from __future__ import annotations

import pytest

from q2_plugins.jobs.report import write_html
from tests.browser import open_report, start_chromium
from tests.pipeline.backends.test_coref import HISTORY, KNOWLEDGE, RESPONSE, _scorer


@pytest.fixture(scope="module")
def driver():
    yield from start_chromium()


def test_report_shows_the_resolved_response_and_its_replacements(driver, tmp_path):
    scorer, _, _ = _scorer({(HISTORY, RESPONSE): [["Bob Ross", "he"]]})
    result = scorer.score(responses=[RESPONSE], knowledge=[KNOWLEDGE], history=[HISTORY], explain=True)
    rows = [{"id": "bob", **result.responses[0].to_dict(), "response": RESPONSE, "knowledge": KNOWLEDGE,
             "history": HISTORY}]
    path = tmp_path / "coref.html"
    write_html(path, rows, signatures=[result.signature], title="coref", sources=["scripted"])
    open_report(driver, path)
    driver.find_element("css selector", "#rows tr.resp[data-pos='0']").click()
    detail = driver.find_element("css selector", "#rows tr.detail[data-pos='0']")
    heads = [h.text for h in detail.find_elements("css selector", "h3")]
    assert "response" in heads
    # the response as given, coloured from its spans: the question about "Bob Ross" marks the pronoun it replaced
    shown = detail.find_element("css selector", ".two > div").text  # the response, its marks numbered
    assert shown.startswith("response\nhe") and "became famous on" in shown
    note = detail.find_element("css selector", ".note.coref").text
    assert note == f"coreference: “he” → “Bob Ross”; original: {RESPONSE}"
    marks = detail.find_elements("css selector", "mark.hl[data-cand]")
    assert [m.text for m in marks] == ["he", "youtube"]
    assert "coreference: he -> Bob Ross" in marks[0].get_attribute("title")
    cells = [tr.find_elements("css selector", "td")[1].text
             for tr in detail.find_elements("css selector", "table.questions tbody tr")]
    assert cells == ["Bob Ross (coreference: he -> Bob Ross)", "youtube"]
