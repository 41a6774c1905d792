"""A value from the address is echoed on a page as inert text (issue 45): no Markdown or HTML in it is
interpreted, and a long one is cut with a notice. `url_text`'s Markdown goes through a CommonMark
parser (markdown-it-py, which Streamlit's rich brings) and the pages through AppTest; the browser
check is in test_dashboard_browser.py."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from dashboards.cached import URL_TEXT_CHARS, url_text
from tests.dashboard.test_dashboard import APP, STUDY, AppTest, open_page, synthetic_project  # noqa: F401

HOSTILE = [
    "x[click me](https://evil.example)y",
    "<a href='https://evil.example'>click</a><script>alert(1)</script>",
    "<https://evil.example>",
    "`code` and ``more`` and a trailing `",
    "**bold** _em_ # heading :red[red] :material/warning: $x^2$ ![img](https://evil.example/i.png)",
    "line one\n\n# a heading\n- a list [link](https://evil.example)",
    "  spaces at both ends  ",
    " ",
    "`",
]


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


def code_text(page_html: str) -> str:
    """The text of the one <code> element of a rendered paragraph."""
    found = re.findall(r"<code>(.*?)</code>", page_html, flags=re.S)
    assert len(found) == 1, page_html
    return html.unescape(found[0])


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_renders_as_exactly_its_own_text(value: str) -> None:
    page_html = rendered(f"The address asks for highlight = {url_text(value)}, which this project does not have.")
    assert "<a " not in page_html and "<script" not in page_html and "<img" not in page_html and "<h1" not in page_html
    assert page_html.count("<p>") == 1, page_html  # one paragraph: no heading or list broke out
    assert code_text(page_html) == value.replace("\n", "\\n")


def test_an_empty_value_says_so() -> None:
    assert rendered(url_text("")) == "<p>(empty)</p>\n"


def test_a_long_value_is_cut_with_its_length() -> None:
    value = "x" * 9_990 + "[click](https://evil.example)"
    shown = url_text(value)
    assert shown.endswith(" (truncated, 10,019 characters)")
    assert len(shown) < URL_TEXT_CHARS + 60
    assert code_text(rendered(shown)) == value[:URL_TEXT_CHARS]
    assert url_text("y" * URL_TEXT_CHARS).count("truncated") == 0  # exactly at the limit: whole


def test_a_hostile_highlight_in_the_url_renders_no_link(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"highlight": ["x`[click](https://example.com)`y", "z" * 10_000]})
    at.run()
    assert not at.exception
    said = [w.value for w in at.warning if "highlight" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]
    page_html = rendered(said[0])
    assert "<a " not in page_html and "example.com" in page_html
    assert "(truncated, 10,000 characters)" in said[0] and len(said[0]) < 1_000
    assert said[0].endswith("showing none instead.")  # the default highlights nothing


def test_an_invalid_regex_filter_is_echoed_inert(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = open_page(AppTest.from_file(APP, default_timeout=60), "studies")
    at.text_input(key="method_regex").input("([click](https://example.com)").run()
    assert not at.exception
    said = [w.value for w in at.warning if "regular expression" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]
    assert "<a " not in rendered(said[0]) and code_text(rendered(said[0])) == "([click](https://example.com)"
