"""report.html: self-contained, escaped, with the bottleneck chart; loaded in headless Chromium.

The browser test needs Debian's ``chromium`` (``.ci/run`` installs it). Without it the test is
skipped, except under CI (``$CI`` set), where it fails: CI must run it.

docs/images/report.png is a screenshot of the shop run's report, made with::

    evalharness scenario scenarios/shop.yaml --out /tmp/shop -q
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1760 \\
        --virtual-time-budget=2000 --screenshot=docs/images/report.png file:///tmp/shop/report.html

then reduced to 256 colours (any PNG quantiser) to stay well under 300 KB.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest

from conftest import run_cli
from evalharness import pages
from evalharness.html import CSP, render_html
from evalharness.models import CaseResult, MetricValue, Report
from evalharness.report import write_reports

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
SVG_LEAVES = {"rect", "line", "path", "circle", "polyline", "polygon", "ellipse", "stop"}


@pytest.fixture
def shop(shop_cli_run) -> Path:
    res, out = shop_cli_run  # the session's one CLI run of the shop (conftest)
    assert res.code == 0, res
    return out


def load(out: Path) -> tuple[Report, list[CaseResult]]:
    report = Report.model_validate_json((out / "report.json").read_text(encoding="utf-8"))
    results = [CaseResult.model_validate_json(line) for line in
               (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return report, results


class Balance(HTMLParser):
    """Checks that every element is closed in order (templates and the SVG code write tags by
    hand)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-3:]} at {self.getpos()}")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
        else:
            self.stack.pop()


def assert_balanced(page: str) -> None:
    parser = Balance()
    parser.feed(page)
    parser.close()
    assert not parser.problems, parser.problems[:5]
    assert not parser.stack, parser.stack


def between(page: str, start: str, end: str) -> str:
    i = page.index(start)
    return page[i:page.index(end, i)]


# --------------------------------------------------------------------------------------------
# render_html
# --------------------------------------------------------------------------------------------


def test_cli_writes_report_html(shop):
    page = (shop / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert_balanced(page)
    report, _ = load(shop)
    assert report.bottleneck is not None
    assert 'id="bottleneck-chart"' in page
    assert "heuristic (offline, deterministic; not an LLM)" in page
    assert 'id="confusion-matrix"' in page  # the router plugin's section, as a heat map


def test_recorded_traces_run_writes_report_html(small, tmp_path):
    res = run_cli("scenario", small, "--out", tmp_path / "run", "-q")
    assert res.code == 0, res
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert_balanced(page)
    assert "<h1>small</h1>" in page
    report, _ = load(tmp_path / "run")
    assert ('id="bottleneck-chart"' in page) == (report.bottleneck is not None)


def test_untrusted_text_is_escaped(shop):
    report, results = load(shop)
    evil = "<script>alert(1)</script>"
    first = results[0]
    first.case.question = f"{evil} and <img src=x onerror=alert(2)>"
    first.case.tags.append(evil)
    first.case.gold.answer = evil
    first.trace.generator.answer = f"</details></section>{evil}"
    comp = next(iter(first.components.values()))
    name = next(iter(comp.metrics))
    comp.metrics[name] = MetricValue.failed(f"bad {evil}", note=evil)
    report.sections.append({"plugin": "x", "title": evil, "data": {},
                            "markdown": f"| a | b |\n|---|---|\n| {evil} | `{evil}` |\n\n{evil}"})
    page = render_html(report, results)
    assert evil not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 2  # the error hooks and the filter, both ours
    assert_balanced(page)


def test_hostile_question_and_answer_are_escaped_in_report_html(shop, tmp_path):
    report, results = load(shop)
    r = next(r for r in results if r.end_to_end and r.end_to_end.status == "fail"
             and r.trace.generator is not None)
    script, img = "<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'
    r.case.question = f"why {script}?"
    r.trace.generator.answer = f"because {img}"
    r.case.gold.answer = img
    write_reports(report, tmp_path, results)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    row = between(page, f'<details class="case" id="case-{r.case.id}"', "</details>")
    assert "why &lt;script&gt;alert(1)&lt;/script&gt;?" in row  # the summary and the body
    assert "because &quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in row
    assert "<img" not in page and "onerror=alert(1)>" not in page
    assert script not in page and page.count("<script") == 2  # only the page's own two
    assert_balanced(page)


def test_importing_the_page_does_not_import_the_report():
    """html.py renders; report.py aggregates and calls it: no import circle between them."""
    code = ("import sys, evalharness.html; "
            "print(sorted(m for m in sys.modules if m.startswith('evalharness.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    loaded = proc.stdout
    assert "'evalharness.html'" in loaded and "'evalharness.pages'" in loaded
    for module in ("report", "runner", "oracle", "cli", "api"):
        assert f"'evalharness.{module}'" not in loaded, loaded


def test_report_keeps_its_content_security_policy(shop):
    report, results = load(shop)
    page = render_html(report, results)
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert CSP == ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                   "img-src data:")


def test_another_page_shares_the_layout():
    """A second page (the review page) extends base.html with its own policy and a nonce."""
    template = pages.environment().from_string(
        '{% extends "base.html" %}{% block title %}review · {{ name }}{% endblock %}'
        '{% block content %}<p>{{ text }}</p>{% endblock %}'
        '{% block scripts %}<script nonce="{{ nonce }}">go();</script>{% endblock %}')
    csp = "default-src 'none'; connect-src 'self'; script-src 'nonce-abc123'"
    page = template.render(csp=csp, nonce="abc123", name="<shop>", text="<b>x</b> & 'y'")
    assert page.startswith("<!DOCTYPE html>")
    assert f'content="{csp}"' in page
    assert "<title>review · &lt;shop&gt;</title>" in page
    assert "<p>&lt;b&gt;x&lt;/b&gt; &amp; &#x27;y&#x27;</p>" in page
    assert page.count('<script nonce="abc123">') == 2  # the error hooks and the page's own
    assert '<style nonce="abc123">' in page and 'id="console-errors"' in page
    assert_balanced(page)
    with pytest.raises(jinja2.UndefinedError, match="csp"):  # StrictUndefined: the policy is required
        pages.render("base.html")


def test_no_network_references(shop):
    report, results = load(shop)
    results[0].case.question = "see https://example.com/x.js and http://example.org"
    page = render_html(report, results)
    assert not re.search(r"""(?:src|href|action|xlink:href|srcset)\s*=\s*["']?\s*(?:https?:)?//""",
                         page, re.I)
    assert not re.search(r"""@import|url\(\s*["']?(?!#)""", page)  # url(#hatch) is in-page
    assert "<link" not in page.replace('<link rel="icon" href="data:,">', "")
    assert "default-src 'none'" in page  # the page's CSP forbids any request anyway


def test_bottleneck_chart_names_the_ranked_components(shop):
    report, results = load(shop)
    page = render_html(report, results)
    chart = between(page, '<svg class="chart bottleneck"', "</svg>")
    assert 'id="bottleneck-chart"' in chart
    ranked = [r.component for r in report.bottleneck.ranking]
    assert set(ranked) == {"router", "text2sql", "retriever", "generator"}
    assert f'data-components="{" ".join(ranked)}"' in chart
    for name in [*ranked, "interaction"]:
        assert f'<g class="bar" data-component="{name}">' in chart
    assert "bottleneck-placeholder" not in page


def test_placeholder_without_a_bottleneck(shop):
    report, results = load(shop)
    report.bottleneck = None
    for r in results:
        r.verdicts, r.end_to_end, r.attribution = {}, None, None
    page = render_html(report, results)
    assert 'id="bottleneck-chart"' not in page
    assert 'id="bottleneck-placeholder"' in page
    assert "No end-to-end verdicts in this run" in page
    # without verdicts, the case list falls back to the lowest-scoring cases
    assert "no per-case verdicts" in page
    assert page.count('<details class="case"') >= 10
    assert_balanced(page)


def test_unbounded_metrics_are_in_a_table_not_on_the_bars(shop):
    report, results = load(shop)
    page = render_html(report, results)
    bars = between(page, 'aria-label="generator metrics with 95% CI"', "</svg>")
    assert "faithfulness" in bars
    for name in ("answer_words", "latency_ms", "total_tokens"):
        assert name not in bars
        assert f"<td>{name}</td>" in page
    retriever = between(page, 'aria-label="retriever metrics with 95% CI"', "</svg>")
    assert ">ndcg@5<" in retriever and ">dcg@5<" not in retriever


def test_failed_cases_expand_to_the_trace(shop):
    report, results = load(shop)
    page = render_html(report, results)
    failing = [r for r in results if r.end_to_end and r.end_to_end.status == "fail"]
    assert failing
    r = next(r for r in failing if r.trace.text2sql and r.trace.text2sql.rows)
    row = between(page, f'<details class="case" id="case-{r.case.id}"', "</details>")
    assert r.attribution.kind in row
    for cause in r.attribution.root_causes:
        assert cause in row.split('data-causes="')[1].split('"')[0].split("|")
    assert html.escape(r.trace.text2sql.sql) in row
    assert html.escape(str(r.trace.text2sql.rows[0][0])) in row
    assert "Verdicts and metrics" in row


# --------------------------------------------------------------------------------------------
# In a browser
# --------------------------------------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        message = ("headless Chromium is not installed (Debian: apt-get install chromium); "
                   "the HTML report's browser test needs it")
        if os.environ.get("CI"):
            pytest.fail(f"{message} — CI must install it (.ci/run does)")
        pytest.skip(message)
    return found


def browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
         "--virtual-time-budget=2000", *extra, page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def test_report_loads_in_headless_chromium(shop, tmp_path):
    page = shop / "report.html"
    proc = browse(page, tmp_path / "profile", "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-3000:]
    dom = proc.stdout
    errors = re.search(r'<pre id="console-errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert errors is not None, dom[:2000]
    assert errors.group(1).strip() == "", errors.group(1)
    assert re.search(r'<svg[^>]*id="bottleneck-chart"', dom)
    assert 'data-component="text2sql"' in dom
    # the oracle headroom chart beside it, one bar per oracle
    assert re.search(r'<svg[^>]*id="headroom-chart"', dom)
    assert 'data-oracle="router+text2sql+retriever"' in dom
    # the filter script ran to its end: it wrote the count of shown cases
    count = re.search(r'<span class="muted small" id="case-count">(\d+) of (\d+) shown</span>',
                      dom)
    assert count is not None and count.group(1) == count.group(2) != "0"

    # the hooks do catch errors: a broken copy of the page reports them
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", '<script>console.error("boom"); notAFunction();</script>'
        '<img src="https://example.invalid/x.png" alt=""></body>'), encoding="utf-8")
    proc = browse(broken, tmp_path / "profile-broken", "--dump-dom")
    caught = re.search(r'<pre id="console-errors"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    assert caught is not None, proc.stdout[:2000]
    assert "console.error: boom" in caught.group(1)
    assert "notAFunction" in caught.group(1)
    assert "blocked by the content security policy" in caught.group(1)

    shot = tmp_path / "report.png"
    proc = browse(page, tmp_path / "profile2", "--window-size=1280,1600",
                  f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
