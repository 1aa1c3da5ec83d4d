"""The report page's two parts with one job each: charts.py (SVG) and markdown.py (Markdown).

html.py is the page's view model and imports both; neither imports it back.
"""

from __future__ import annotations

import ast

import pytest

from conftest import ROOT
from evalharness.charts import confusion_svg, nice_max, reliability_svg, share_bar, svg_open
from evalharness.markdown import markdown
from evalharness.pages import Html

CORE = ROOT / "core" / "evalharness"


def test_markdown_table_with_a_right_aligned_column():
    out = markdown("| route | cases |\n|---|--:|\n| sql | 3 |\n| docs \\| faq | 4 |")
    assert isinstance(out, Html)
    assert out == ('<table class="tbl compact"><thead><tr><th>route</th><th class="r">cases'
                   '</th></tr></thead><tbody><tr><td>sql</td><td class="r">3</td></tr>'
                   '<tr><td>docs | faq</td><td class="r">4</td></tr></tbody></table>')


def test_markdown_emphasis_bold_and_code():
    out = markdown("a *soft* word, a **strong** one and `x < y`; not 2*3*4")
    assert out == ("<p>a <em>soft</em> word, a <strong>strong</strong> one and "
                   "<code>x &lt; y</code>; not 2*3*4</p>")


def test_markdown_heading_list_and_paragraph():
    out = markdown("## Notes\n\n- one\n* **two**\n\nsome\ntext")
    assert out == ("<h4>Notes</h4><ul><li>one</li><li><strong>two</strong></li></ul>"
                   "<p>some text</p>")


@pytest.mark.parametrize("text", [
    "<script>alert(1)</script>",
    "| <script>alert(1)</script> |",
    "- <script>alert(1)</script>",
    "# <script>alert(1)</script>",
    "```\n<script>alert(1)</script>\n```",
    "**<script>alert(1)</script>**",
])
def test_markdown_escapes_every_text(text):
    out = str(markdown(text))
    assert "<script" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_svg_open_escapes_its_aria_label():
    tag = svg_open("c", 10.4, 5, 'a "b" <c>', id="x")
    assert tag == ('<svg class="chart c" viewBox="0 0 10 5" width="10" height="5" role="img" '
                   'aria-label="a &quot;b&quot; &lt;c&gt;" id="x">')


def test_a_confusion_matrix_is_an_svg_with_its_aria_label_and_escaped_labels():
    svg = str(confusion_svg({"labels": ["sql", "<docs>"], "counts": [[3, 1], [0, 2]]}))
    assert svg.startswith('<svg class="chart confusion" ')
    assert 'aria-label="confusion matrix (gold × predicted)"' in svg
    assert 'id="confusion-matrix"' in svg and svg.endswith("</svg>")
    assert "&lt;docs&gt;" in svg and "<docs>" not in svg
    with pytest.raises(ValueError, match="not square"):
        confusion_svg({"labels": ["a", "b"], "counts": [[1, 2]]})


def test_other_charts_are_svgs_with_their_aria_labels():
    share = str(share_bar([("router", 30.0), ("generator", 90.0)],
                          {"router": "#111111", "generator": "#222222"}))
    assert share.startswith("<svg") and 'aria-label="share of total latency per component"' in share
    assert "75%" in share
    bins = [{"lower": 0.0, "upper": 0.5, "accuracy": 0.4, "cases": 2, "confidence": 0.3}]
    rel = str(reliability_svg(bins))
    assert rel.startswith("<svg") and 'aria-label="reliability diagram"' in rel
    assert nice_max(3.79) == 4.0 and nice_max(-1) == 1.0


def _imported(path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize(("module", "never"), [
    ("charts.py", {"evalharness.html"}),
    ("markdown.py", {"evalharness.html", "evalharness.charts"}),
])
def test_the_parts_do_not_import_the_page(module, never):
    imported = _imported(CORE / module)
    assert not imported & never, sorted(imported & never)
    assert "evalharness.pages" in imported  # both build pages.Html


def test_the_page_imports_both_parts():
    imported = _imported(CORE / "html.py")
    assert {"evalharness.charts", "evalharness.markdown"} <= imported
