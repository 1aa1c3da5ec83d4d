"""The judge's per-claim verdicts, with their evidence, where people read them: under the
metric in report.html's failed cases (a ✓/✗ per claim, the reason and evidence on hover and in
a ``<details>`` toggle) and among a claim target's reasons on the review page.

The claims come from the ``claim_support`` judgment record a metric value stores in
``details["judgments"]``; records of runs made before verdicts carried ``evidence`` still
render."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from test_html import assert_balanced

from evalharness.html import MAX_CLAIMS, _claim_groups, render_html
from evalharness.models import CaseResult, Report
from evalharness.review.server import App, new_token
from evalharness.review.session import Review

EVIDENCE = ["row 1 price = 49.9: '49.90 €' matches", 'row 1 name = "Trail Runner" <b>']

VERDICTS: list[dict[str, Any]] = [
    {"claim": "The <Trail> Runner costs 49.90 €.", "supported": True,
     "reason": "row 1 has price 49.9", "confidence": 0.97, "evidence": EVIDENCE},
    {"claim": "It ships in 2 days.", "supported": False, "reason": "no row says so",
     "confidence": None, "evidence": ["no column about shipping"]},
    {"claim": "It is in stock.", "supported": True, "reason": "stock = 4"},  # an old record
    {"claim": "It comes in blue.", "supported": True, "reason": "", "evidence": None},
]

FIRST_TITLE = ("row 1 has price 49.9\nevidence:\n"
               "· row 1 price = 49.9: '49.90 €' matches\n"
               '· row 1 name = "Trail Runner" <b>')


def with_verdicts(case: dict[str, Any], verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """``case`` (a results.jsonl line as JSON) with ``verdicts`` as the output of its
    faithfulness value's ``claim_support`` record."""
    details = case["components"]["generator"]["metrics"]["faithfulness"]["details"]
    record = next(j for j in details["judgments"] if j.get("task") == "claim_support")
    record["output"] = {"verdicts": verdicts}
    return case


def failing_case(lines: list[dict[str, Any]]) -> int:
    """The index of the first case that fails end to end with a faithfulness value."""
    return next(i for i, c in enumerate(lines)
                if (c.get("end_to_end") or {}).get("status") == "fail"
                and "faithfulness" in c["components"].get("generator", {}).get("metrics", {}))


def read_lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]


class Claims(HTMLParser):
    """The ``<li>`` items of every ``ul.claims``: their class, title and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[dict[str, str]] = []
        self.depth = 0  # inside a ul.claims, how many <ul> deep
        self.item: dict[str, str] | None = None
        self.li = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.item is not None:
            self.item["text"] += " "  # elements apart (the text is compared word by word)
        if tag == "ul" and (self.depth or "claims" in (a.get("class") or "").split()):
            self.depth += 1
        elif tag == "li" and self.depth == 1 and self.item is None:
            self.item = {"class": a.get("class") or "", "title": a.get("title") or "",
                         "text": ""}
            self.li = 1
        elif tag == "li" and self.item is not None:
            self.li += 1

    def handle_endtag(self, tag):
        if tag == "ul" and self.depth:
            self.depth -= 1
        elif tag == "li" and self.item is not None:
            self.li -= 1
            if not self.li:
                self.items.append(self.item)
                self.item = None

    def handle_data(self, data):
        if self.item is not None:
            self.item["text"] += data


def claims_of(fragment: str) -> list[dict[str, str]]:
    parser = Claims()
    parser.feed(fragment)
    parser.close()
    return parser.items


def case_fragment(page: str, case_id: str) -> str:
    """The case's row of the failed-cases list, up to the next case (or the section's end)."""
    start = page.index(f'<details class="case" id="case-{case_id}"')
    ends = [i for i in (page.find('<details class="case"', start + 1),
                        page.find("</section>", start)) if i >= 0]
    return page[start:min(ends)]


def faithfulness_claims(row: str) -> str:
    """The claims row under the faithfulness metric of a case's row ("" when it has none)."""
    start = row.index("<td>faithfulness</td>")
    end = row.index("</tr>", start) + len("</tr>")
    if not row.startswith('<tr class="claims">', end):
        return ""
    return row[end:row.index("</td></tr>", end)]


@pytest.fixture
def run(shop_sample_run, tmp_path) -> Path:
    """A copy of the 12-case shop sample run that a test may write into."""
    out = tmp_path / "run"
    shutil.copytree(shop_sample_run[0], out)
    return out


def load(run: Path, lines: list[dict[str, Any]]) -> tuple[Report, list[CaseResult]]:
    report = Report.model_validate_json((run / "report.json").read_text(encoding="utf-8"))
    return report, [CaseResult.model_validate(c) for c in lines]


# -- report.html --------------------------------------------------------------------------------


def test_report_lists_the_claims_with_marks_and_evidence_on_hover(run):
    lines = read_lines(run)
    i = failing_case(lines)
    with_verdicts(lines[i], VERDICTS)
    report, results = load(run, lines)
    page = render_html(report, results)
    assert_balanced(page)
    row = case_fragment(page, results[i].case.id)
    claims = claims_of(faithfulness_claims(row))
    assert [c["class"] for c in claims] == ["ok", "no", "ok", "ok"]
    assert [c["title"] for c in claims] == [
        FIRST_TITLE, "no row says so\nevidence:\n· no column about shipping", "stock = 4",
        "supported"]
    texts = [" ".join(c["text"].split()) for c in claims]
    assert texts[0] == ("✓ The <Trail> Runner costs 49.90 €. 0.97 evidence row 1 has price "
                        "49.9 row 1 price = 49.9: '49.90 €' matches "
                        'row 1 name = "Trail Runner" <b>')
    assert texts[1].startswith("✗ It ships in 2 days. evidence")
    assert texts[2] == "✓ It is in stock. evidence stock = 4"  # no evidence recorded
    assert texts[3] == "✓ It comes in blue."  # nothing to expand: no toggle
    # escaped in the markup: the title attribute and the text
    assert ('title="row 1 has price 49.9\nevidence:\n'
            "· row 1 price = 49.9: &#x27;49.90 €&#x27; matches\n"
            "· row 1 name = &quot;Trail Runner&quot; &lt;b&gt;\"") in row
    assert "The &lt;Trail&gt; Runner" in row and "<Trail>" not in page
    assert "&lt;b&gt;" in row and '"Trail Runner" <b>' not in page
    assert faithfulness_claims(row).count("<details><summary>") == 3
    # under the faithfulness row of the generator's metrics
    metrics = row[row.index("Verdicts and metrics"):]
    assert metrics.index("<td>faithfulness</td>") < metrics.index('<tr class="claims">')


def test_report_without_evidence_or_with_broken_records_still_renders(run):
    lines = read_lines(run)
    i = failing_case(lines)
    old = [{k: v for k, v in x.items() if k not in ("evidence", "confidence")}
           for x in VERDICTS[:2]]
    with_verdicts(lines[i], [*old, "not a verdict", {"claim": "no verdict"},
                             {"claim": "x", "supported": True, "evidence": "not a list"}])
    j = failing_case(lines[i + 1:]) + i + 1
    with_verdicts(lines[j], "nonsense")  # type: ignore[arg-type]
    report, results = load(run, lines)
    page = render_html(report, results)
    assert_balanced(page)
    listed = faithfulness_claims(case_fragment(page, results[i].case.id))
    claims = claims_of(listed)
    assert [(c["class"], c["title"]) for c in claims] == [
        ("ok", "row 1 has price 49.9"), ("no", "no row says so"), ("ok", "supported")]
    assert "evidence:" not in listed and "<ul>" not in listed  # no evidence list
    assert faithfulness_claims(case_fragment(page, results[j].case.id)) == ""


def test_claim_groups_are_labelled_and_capped():
    def record(n: int) -> dict[str, Any]:
        return {"task": "claim_support", "output": {"verdicts": [
            {"claim": f"claim {k}", "supported": bool(k % 2), "reason": "r"} for k in range(n)]}}

    groups = _claim_groups({"judgments": [record(2), {"task": "claims"}, record(MAX_CLAIMS + 3)]})
    assert [(g.label, len(g.claims), g.more) for g in groups] == [
        ("check 1 of 2", 2, 0), ("check 2 of 2", MAX_CLAIMS, 3)]
    assert _claim_groups({"judgments": [{"task": "claim_support", "output": None}]}) == ()
    many = _claim_groups({"judgments": [{"task": "claim_support", "output": {"verdicts": [
        {"claim": "c", "supported": True, "evidence": [f"e{k}" for k in range(20)]}]}}]})
    assert many[0].claims[0].evidence[-1] == "(and 8 more)"


# -- the review page ----------------------------------------------------------------------------


def test_review_claim_targets_carry_the_evidence(run):
    lines = read_lines(run)
    i = failing_case(lines)
    with_verdicts(lines[i], VERDICTS)
    (run / "results.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in lines), encoding="utf-8")
    case_id = lines[i]["case"]["id"]
    review = Review.open(run)
    claims = [t for t in review.targets(case_id) if t.metric == "claim_support"]
    assert [t.reasons for t in claims] == [
        ["row 1 has price 49.9", *(f"evidence: {e}" for e in EVIDENCE)],
        ["no row says so", "evidence: no column about shipping"],
        ["stock = 4"],  # an old record: no evidence
        [""],
    ]
    assert [t.view()["reasons"] for t in claims] == [t.reasons for t in claims]
    app = App(review, new_token(), set(), "ana")
    page = app.page(app.ids.index(case_id), "ana", "n0nce")
    assert_balanced(page)
    assert ('<p class="reason small">evidence: row 1 price = 49.9: &#x27;49.90 €&#x27; '
            "matches</p>") in page
    assert ('<p class="reason small">evidence: row 1 name = &quot;Trail Runner&quot; '
            "&lt;b&gt;</p>") in page
    assert ('<p class="t-text" title="row 1 has price 49.9\nevidence: row 1 price = 49.9: '
            "&#x27;49.90 €&#x27; matches\nevidence: row 1 name = &quot;Trail Runner&quot; "
            '&lt;b&gt;">The &lt;Trail&gt; Runner costs 49.90 €.</p>') in page
    assert '<p class="t-text">It comes in blue.</p>' in page  # no reason: no title
    assert "<Trail>" not in page and '"Trail Runner" <b>' not in page
