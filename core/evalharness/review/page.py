"""The review pages' context: what the templates ``review.html`` and ``pairwise.html`` (which
extend the report's ``base.html``) are given. Every text is passed as data and escaped by the
template engine; the only script is the page's own, under the response's nonce."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalharness import pages
from evalharness.review.labels import Label

if TYPE_CHECKING:
    from evalharness.review.server import App

MAX_ROWS = 10

KEYS = [("y / n", "yes / no: the underlying label"),
        ("a / d", "agree / disagree with the automatic verdict"),
        ("1 – 5", "a score (judged metrics)"), ("u", "take the label back"),
        ("j / k or ↓ / ↑", "next / previous target"), ("e", "write a note"),
        ("→ / ←", "next / previous case")]

PAIR_KEYS = [("1", "the left answer is better"), ("2", "the right answer is better"),
             ("t", "a tie"), ("u", "take it back"), ("e", "write a note"),
             ("→ / ←", "next / previous case")]


def csp(nonce: str) -> str:
    return ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            f"script-src 'nonce-{nonce}'; connect-src 'self'; form-action 'none'; "
            "base-uri 'none'")


def render_review(app: App, index: int, reviewer: str, view: dict[str, Any],
                  mine: list[Label], nonce: str, warnings: Sequence[str] = ()) -> str:
    """One sampled case with its steps and targets, the reviewer's labels filled in;
    ``warnings`` (a torn last line of the labels file left out) shown above it."""
    given = {(lab.case, lab.component, lab.metric, lab.item): lab for lab in mine}
    for target in view["targets"]:
        lab = given.get((view["id"], target["component"], target["metric"], target["item"]))
        target["label"] = lab.label if lab else None
        target["note"] = lab.note if lab else ""
        target["correction"] = (lab.correction or "") if lab else ""
    for step in view["steps"]:
        raw = step["step"]
        if step["kind"] == "text2sql" and raw.get("rows"):
            step["rows_shown"] = raw["rows"][:MAX_ROWS]
            step["rows_more"] = max(0, len(raw["rows"]) - MAX_ROWS)
        if step["kind"] == "retriever":
            gold = view["gold"].get("relevant") or {}
            texts = raw.get("texts") or []
            scores = raw.get("scores") or []
            step["chunks"] = [{"rank": r + 1, "id": cid,
                               "grade": gold.get(cid) if view["gold"].get("relevant") is not None
                               else None,
                               "score": scores[r] if r < len(scores) else None,
                               "text": texts[r] if r < len(texts) else None}
                              for r, cid in enumerate(raw.get("ids") or [])]
    ids = app.ids
    done = _progress(app, reviewer, mine)
    return pages.render(
        "review.html", csp=csp(nonce), nonce=nonce, title=f"review · {view['id']}",
        run=str(app.review.run.path), scenario=app.review.run.report.scenario.get("name", ""),
        judge=app.review.run.report.judge.get("label", ""), how=app.review.how,
        case=view, index=index, total=len(ids), reviewer=reviewer, token=app.token,
        prev=index - 1 if index > 0 else None,
        next=index + 1 if index + 1 < len(ids) else None, progress=done, keys=KEYS,
        warnings=list(warnings))


def _progress(app: App, reviewer: str, mine: list[Label]) -> dict[str, int]:
    sampled = set(app.ids)
    cases = {lab.case for lab in mine if lab.case in sampled}
    return {"labels": sum(1 for lab in mine if lab.case in sampled), "cases": len(cases),
            "total": len(sampled)}


def render_pairwise(app: App, index: int, reviewer: str, mine: list[Label],
                    nonce: str) -> str:
    """One case of two runs: the question and the two answers, left and right in the
    pairing's hidden order; no run name, path, score or verdict on the page (so a warning
    about run A's pairwise file goes to the server's log only)."""
    pairing = app.pairing
    assert pairing is not None
    case_id = pairing.ids[index]
    a, b = pairing.a.result(case_id), pairing.b.result(case_id)
    sides = [_answer(a), _answer(b)]
    if not pairing.a_is_left(case_id):
        sides.reverse()
    given = {lab.case: lab for lab in mine}
    lab = given.get(case_id)
    choice = None
    if lab is not None:
        choice = app.side(lab)
    return pages.render(
        "pairwise.html", csp=csp(nonce), nonce=nonce, title=f"compare answers · {case_id}",
        case={"id": case_id, "question": a.case.question, "tags": a.case.tags,
              "reference": a.case.gold.answer},
        sides=sides, choice=choice, note=lab.note if lab else "", index=index,
        total=len(pairing.ids), reviewer=reviewer, token=app.token,
        prev=index - 1 if index > 0 else None,
        next=index + 1 if index + 1 < len(pairing.ids) else None,
        progress={"labels": len([x for x in mine if x.case in set(pairing.ids)]),
                  "total": len(pairing.ids)}, keys=PAIR_KEYS)


def _answer(result) -> dict[str, Any]:
    step = result.trace.generator
    if result.trace.error:
        return {"answer": None, "error": "the system failed for this case", "contexts": []}
    return {"answer": step.answer if step else None, "error": None,
            "contexts": list(step.contexts) if step else []}
