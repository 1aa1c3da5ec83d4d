"""People in the loop (docs/review.md): labels, export/import, agreement statistics checked
against hand-computed values, the scenario's ``labels:`` and ``agreement.`` gates, the review
server's guards, curation, and people's preferences in ``compare``.

The browser tests of the pages are in tests/test_review_browser.py."""

from __future__ import annotations

import csv
import json
import math
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SHOP, another_run, run_cli, shop_text_elsewhere
from evalharness.cli import cli as cli_group
from evalharness.errors import InputError, ScenarioError
from evalharness.review import labels as L
from evalharness.review.agreement import compute
from evalharness.review.exchange import export, import_labels
from evalharness.review.server import App, Pairing, make_server, new_token
from evalharness.review.session import Review


@pytest.fixture
def run(shop_sample_run, tmp_path) -> Path:
    """A copy of the 12-case shop sample run that a test may write into."""
    out = tmp_path / "run"
    shutil.copytree(shop_sample_run[0], out)
    return out


def invoke(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli_group, [str(a) for a in args])
    return result.exit_code, result.output


def faithfulness_targets(review: Review, metric: str = "faithfulness"
                         ) -> list[tuple[str, float, bool]]:
    """(case, score, verdict) of every case-level target of a generator metric of the run."""
    out = []
    for result in review.run.results:
        for t in review.targets(result.case.id):
            if (t.component, t.metric, t.item) == ("generator", metric, ""):
                out.append((result.case.id, t.score, t.verdict))
    return out


def label(case, value, metric="faithfulness", component="generator", item="", who="ana",
          **extra) -> L.Label:
    return L.Label(case=case, component=component, metric=metric, item=item, label=value,
                   reviewer=who, **extra)


# -- labels ------------------------------------------------------------------------------------


def test_labels_log_keeps_the_last_label_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "review" / "labels.jsonl"
    L.append(path, [label("q1", "yes"), label("q1", "no"), label("q2", 4)])
    L.append(path, [label("q2", None)])  # taken back
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"case": "q3", "comp')  # a crash mid-write
    rows = L.read(path)
    assert [r.label for r in rows] == ["yes", "no", 4, None]
    assert all(r.at.endswith("Z") for r in rows)
    assert [(r.case, r.label) for r in L.latest(rows)] == [("q1", "no")]
    path.write_text('{"case": "q1"}\n{"case": "q2", "component": "g", "metric": "m", '
                    '"label": "yes", "reviewer": "x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"labels.jsonl, line 1: .*component"):
        L.read(path)
    with pytest.raises(ValueError, match="maybe.*yes or no"):
        L.parse_value("maybe")


# -- export / import ---------------------------------------------------------------------------


def test_export_then_import_round_trip_and_row_errors(run, tmp_path):
    review = Review.open(run, sample=4, stratify="component,verdict", seed=3)
    assert len(review.chosen) == 4
    text = export(review, "csv")
    rows = list(csv.DictReader(text.splitlines()))
    assert {r["case"] for r in rows} == {review.run.results[i].case.id for i in review.chosen}
    assert {"router", "generator"} <= {r["component"] for r in rows}
    for r in rows:
        r["label"] = "yes" if r["verdict"] == "pass" else "no" if r["verdict"] else ""
    filled = tmp_path / "filled.csv"
    with open(filled, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    stored = import_labels(review, filled, "bea")
    assert len(stored) == sum(1 for r in rows if r["label"])
    assert len(L.read(review.labels_path)) == len(stored)
    # the same sample (seeded) in JSONL, and the same targets
    again = [json.loads(x) for x in export(Review.open(run, sample=4, stratify="component,"
                                                       "verdict", seed=3), "jsonl",
                                           "bea").splitlines()]
    assert [(r["case"], r["metric"], r["item"]) for r in again] == [
        (r["case"], r["metric"], r["item"]) for r in rows]
    assert {r["label"] for r in again if r["verdict"]} == {"yes", "no"}

    case = rows[0]["case"]
    bad = {"unknown case": ({"case": "nope"}, r"row 3: no case 'nope'"),
           "unknown metric": ({"metric": "faithfulnes"}, r"row 3: .*no target "
                              r"generator\.faithfulnes; its targets are"),
           "bad label": ({"label": "maybe"}, r"row 3 \(case .*\): label: 'maybe' is not a "
                         "valid label"),
           "a score on a route": ({"component": "router", "metric": "route_accuracy",
                                   "label": "3"}, "router.route_accuracy takes yes/no or "
                                  "agree/disagree, not a 1-5 score")}
    before = L.read(review.labels_path)
    for name, (change, message) in bad.items():
        path = tmp_path / f"{name}.csv"
        row = {"case": case, "component": "generator", "metric": "faithfulness",
               "item": "", "label": "yes", "reviewer": "bea"}
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, list(row))
            writer.writeheader()
            writer.writerow(row)
            writer.writerow({**row, **change})
        code, out = invoke("review", "import", run, path)
        assert code == 2, (name, out)
        assert "nothing imported" in out and path.name in out
        with pytest.raises(InputError, match=message):
            import_labels(review, path, None)
    assert L.read(review.labels_path) == before  # all or nothing


# -- agreement ---------------------------------------------------------------------------------


def hand_kappa(pairs: list[tuple[bool, bool]]) -> float:
    """Cohen's κ of (judge, person) pairs, written out: (p_o − p_e) / (1 − p_e)."""
    n = len(pairs)
    p_o = sum(a == b for a, b in pairs) / n
    judge_yes = sum(a for a, _ in pairs) / n
    person_yes = sum(b for _, b in pairs) / n
    p_e = judge_yes * person_yes + (1 - judge_yes) * (1 - person_yes)
    return (p_o - p_e) / (1 - p_e)


def hand_auc(scores: list[float], truth: list[bool]) -> float:
    """ROC-AUC by counting pairs: a positive above a negative 1, a tie ½."""
    pos = [s for s, t in zip(scores, truth, strict=True) if t]
    neg = [s for s, t in zip(scores, truth, strict=True) if not t]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def test_agreement_statistics_equal_hand_computed_values(run):
    review = Review.open(run)
    targets = faithfulness_targets(review)
    assert len(targets) >= 8
    # people agree with the judge's verdict except on two cases, one each way
    flips = {targets[0][0], targets[-1][0]}
    given = {case: (verdict != (case in flips)) for case, _, verdict in targets}
    rows = [{"case": case, "component": "generator", "metric": "faithfulness",
             "label": "yes" if ok else "no"} for case, ok in given.items()]
    file = run.parent / "reviewed.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out = invoke("review", "import", run, file, "--reviewer", "ana")
    assert code == 0 and f"imported {len(rows)} labels by ana" in out, out

    code, out = invoke("agreement", run, "--json", "--no-report")
    assert code == 0, out
    result = json.loads(out)
    row = next(r for r in result["rows"] if (r["component"], r["metric"], r["kind"]) ==
               ("generator", "faithfulness", "binary"))
    pairs = [(verdict, given[case]) for case, _, verdict in targets]
    assert row["n"] == len(targets)
    assert row["kappa"]["value"] == pytest.approx(hand_kappa(pairs), abs=1e-12)
    assert row["auc"]["value"] == pytest.approx(hand_auc([s for _, s, _ in targets],
                                                         [given[c] for c, _, _ in targets]))
    tp = sum(v and p for v, p in pairs)
    fn = sum(p and not v for v, p in pairs)
    fp = sum(v and not p for v, p in pairs)
    tn = sum(not v and not p for v, p in pairs)
    assert row["confusion"]["matrix"] == [[tp, fn], [fp, tn]]
    assert row["balanced_accuracy"]["value"] == pytest.approx(
        (tp / (tp + fn) + tn / (tn + fp)) / 2)
    for stat in ("auc", "kappa", "balanced_accuracy"):
        lo, hi = row[stat]["ci95"]
        assert lo <= row[stat]["value"] <= hi
    # written next to the run, and the terminal view shows κ, AUC and the confusion matrix
    assert json.loads((run / "review" / "agreement.json").read_text())["rows"]
    proc = run_cli("agreement", run)
    assert proc.code == 0, proc
    assert "AUC" in proc.out and "κ" in proc.out and "[" in proc.out
    assert "generator.faithfulness confusion (people × judge): " \
           f"people yes: {tp} pass / {fn} fail; people no: {fp} pass / {tn} fail" in proc.out
    # and the reports got the section
    assert "## Agreement with people" in (run / "report.md").read_text()
    assert "Agreement with people" in (run / "report.html").read_text()
    assert json.loads((run / "report.json").read_text())["agreement"]["rows"]


def test_ordinal_marks_and_inter_reviewer_agreement(run):
    scipy_stats = pytest.importorskip("scipy.stats")
    review = Review.open(run)
    targets = faithfulness_targets(review)
    scores = [1, 2, 2, 3, 4, 5, 5, 3, 1, 4, 2, 5][: len(targets)]
    # one label per reviewer and target (the page's buttons exclude each other): dan scores,
    # ana marks the verdict (agrees on all but one), cy and bea say yes/no (two apart)
    labels = [label(c, g, who="dan") for (c, _, _), g in zip(targets, scores, strict=False)]
    labels += [label(c, "disagree" if i == 0 else "agree", who="ana")
               for i, (c, _, _) in enumerate(targets)]
    ana = ["yes" if v else "no" for _, _, v in targets]
    bea = [("no" if a == "yes" else "yes") if i in (1, 2) else a for i, a in enumerate(ana)]
    labels += [label(c, a, who="cy") for (c, _, _), a in zip(targets, ana, strict=True)]
    labels += [label(c, b, who="bea") for (c, _, _), b in zip(targets, bea, strict=True)]
    result = compute(review, L.latest(labels), what_if=False, resamples=200)
    rows = {r["kind"]: r for r in result["rows"] if r["metric"] == "faithfulness"}
    rho = scipy_stats.spearmanr([s for _, s, _ in targets], scores[: len(targets)])[0]
    assert rows["ordinal"]["spearman"]["value"] == pytest.approx(rho)
    tau = scipy_stats.kendalltau([s for _, s, _ in targets], scores[: len(targets)])[0]
    assert rows["ordinal"]["kendall"]["value"] == pytest.approx(tau)
    assert rows["mark"]["accuracy"]["value"] == pytest.approx(1 - 1 / len(targets))
    inter = next(i for i in result["inter_reviewer"] if i["metric"] == "faithfulness")
    (pair,) = inter["pairs"]
    assert pair["reviewers"] == ["bea", "cy"]
    expected = hand_kappa([(a == "yes", b == "yes") for a, b in zip(ana, bea, strict=True)])
    assert pair["kappa"]["value"] == pytest.approx(expected)
    # two reviewers who split evenly leave the target out of the judge's statistics
    assert rows["binary"]["split"] == 2 and rows["binary"]["n"] == len(targets) - 2


def test_a_better_threshold_says_what_it_would_change(run):
    review = Review.open(run)
    recall = [(r.case.id, r.components["retriever"].metrics["recall@5"].value)
              for r in review.run.results if "retriever" in r.components
              and r.components["retriever"].status == "evaluated"]
    # people accept every retrieval with recall ≥ 0.6: the criterion is recall@5 >= 0.75
    labels = [label(c, "yes" if v >= 0.6 else "no", component="retriever", metric="recall@5")
              for c, v in recall]
    result = compute(review, labels, resamples=200)
    row = next(r for r in result["rows"] if r["metric"] == "recall@5")
    between = [v for _, v in recall if 0.6 <= v < 0.75]
    assert between and any(v < 0.6 for _, v in recall)  # the sample has both (2/3 and 1/2)
    best = row["best_threshold"]
    assert best["threshold"] == pytest.approx(2 / 3) and best["balanced_accuracy"] == 1.0
    change = row["what_if"]
    values = dict(recall)
    flipped = sum(1 for r in review.run.results
                  if r.verdicts.get("retriever") and r.verdicts["retriever"].status == "fail"
                  and 0.6 <= (values.get(r.case.id) or 0) < 0.75)
    assert flipped and change["fail_to_pass"] == flipped and change["pass_to_fail"] == 0
    assert change["bottleneck"] and change["bottleneck"][-1]["component"] == \
        "end to end pass rate"


# -- the scenario's labels and agreement gates ------------------------------------------------


def test_scenario_labels_and_agreement_gates(run, tmp_path):
    review = Review.open(run)
    # answer relevancy: the sample's verdicts are of both kinds (its faithfulness verdicts, all
    # supported by the rows since the row verifier, would leave kappa undefined)
    targets = faithfulness_targets(review, "answer_relevancy")
    assert {v for _, _, v in targets} == {True, False}
    labels_file = tmp_path / "labels.jsonl"
    L.append(labels_file, [label(c, "yes" if v else "no", metric="answer_relevancy")
                           for c, _, v in targets])
    scenario = tmp_path / "shop.yaml"
    text = shop_text_elsewhere() + (
        f"\nlabels: {labels_file}\n"
        "gates_extra: x\n")
    text = text.replace("gates_extra: x\n", "")
    text = text.replace("gates:\n", "gates:\n  - agreement.generator.answer_relevancy.kappa >= 0.99"
                        "\n  - agreement.generator.claim_support.auc >= 0.5\n", 1)
    scenario.write_text(text, encoding="utf-8")
    out = tmp_path / "gated"
    proc = run_cli("scenario", scenario, "--out", out, "--sample", "12", "--seed", "1",
                   "--no-headroom")
    report = json.loads((out / "report.json").read_text())
    gates = {g["name"]: g for g in report["gates"]}
    kappa = gates["agreement.generator.answer_relevancy.kappa >= 0.99"]
    assert kappa["passed"] and kappa["value"] == pytest.approx(1.0), proc
    claims = gates["agreement.generator.claim_support.auc >= 0.5"]
    assert not claims["passed"] and "no labels of it" in claims["reason"]
    assert proc.code == 1  # a failed gate
    assert "## Agreement with people" in (out / "report.md").read_text()

    for gate, message in (
            ("agreement.generator.faithfulness.kapa >= 0.6", "'kapa' is not an agreement "
             "statistic; valid: n, auc, kappa"),
            ("agreement.generatr.faithfulness.kappa >= 0.6", "'generatr' is not a component"),
            ("agreement.generator.faithfulnes.kappa >= 0.6", "Did you mean 'faithfulness'")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text.replace("agreement.generator.answer_relevancy.kappa >= 0.99", gate),
                       encoding="utf-8")
        with pytest.raises(ScenarioError, match=message):
            from evalharness.scenario import load_scenario

            load_scenario(bad)
    without = tmp_path / "nolabels.yaml"
    without.write_text(text.replace(f"\nlabels: {labels_file}\n", "\n"), encoding="utf-8")
    proc = run_cli("validate", without)
    assert proc.code == 2 and "has no `labels:`" in proc.err and "gates" in proc.err


# -- the server's guards -------------------------------------------------------------------


def serve(app: App):
    server = make_server(app, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def request(url: str, *, data: dict | None = None, headers: dict | None = None):
    body = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def test_server_needs_token_host_and_json_and_writes_at_once(run):
    review = Review.open(run, sample=3)
    app = App(review, new_token(), set(), "ana")
    server, base = serve(app)
    try:
        case = review.run.results[review.chosen[0]].case.id
        status, page, headers = request(f"{base}/?t={app.token}&r=ana")
        assert status == 200 and "script-src 'nonce-" in headers["Content-Security-Policy"]
        assert f'data-case="{case}"' in page
        assert request(f"{base}/?t=wrong")[0] == 403
        assert request(f"{base}/?t={app.token}", headers={"Host": "evil.example:80"})[0] == 403
        good = {"case": case, "component": "router", "metric": "route_accuracy", "item": "",
                "label": "no", "reviewer": "ana", "correction": "sql"}
        json_token = {"Content-Type": "application/json", "X-Review-Token": app.token}
        assert request(f"{base}/label", data=good,
                       headers={"Content-Type": "application/json"})[0] == 403
        assert request(f"{base}/label", data=good, headers={
            "Content-Type": "text/plain", "X-Review-Token": app.token})[0] == 415
        status, body, _ = request(f"{base}/label", data=good, headers=json_token)
        assert status == 200 and json.loads(body)["label"] == "no"
        stored = L.read(review.labels_path)  # on disk before the answer came back
        assert [(x.case, x.label, x.correction) for x in stored] == [(case, "no", "sql")]
        status, body, _ = request(f"{base}/label", data={**good, "label": 7},
                                  headers=json_token)
        assert status == 400 and "7 is not a valid label" in json.loads(body)["error"]
        status, body, _ = request(f"{base}/label", data={**good, "metric": "nope"},
                                  headers=json_token)
        assert status == 400 and "no target router.nope" in json.loads(body)["error"]
        status, body, _ = request(f"{base}/labels?t={app.token}&r=ana")
        assert [x["label"] for x in json.loads(body)] == ["no"]
    finally:
        server.shutdown()
        server.server_close()


# -- curation ---------------------------------------------------------------------------------


def test_promote_writes_gold_and_who_reviewed_it(run, tmp_path):
    review = Review.open(run)
    first = review.run.results[0]
    retrieved = next(r for r in review.run.results if r.trace.retriever is not None
                     and r.trace.retriever.ids)
    chunk = retrieved.trace.retriever.ids[0]
    labels = [label(first.case.id, "no", component="router", metric="route_accuracy",
                    correction="sql, blog"),
              label(retrieved.case.id, "no", component="retriever", metric="chunk_relevance",
                    item=f"chunk:{chunk}"),
              label(first.case.id, 2, correction="A better answer.")]
    L.append(review.labels_path, labels)
    cases = tmp_path / "cases.jsonl"
    shutil.copy(SHOP.parent / "shop" / "cases.jsonl", cases)
    before = cases.read_text(encoding="utf-8").splitlines()
    code, out = invoke("review", "promote", run, "--into", cases)
    assert code == 0, out
    assert "updated" in out
    after = cases.read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before)
    changed = {json.loads(line)["id"]: json.loads(line) for line in after
               if line not in before}
    assert set(changed) == {first.case.id, retrieved.case.id}
    promoted = changed[first.case.id]
    assert promoted["gold"]["routes"] == ["blog", "sql"]
    assert promoted["gold"]["answer"] == "A better answer."
    assert promoted["metadata"]["review"]["reviewed_by"] == ["ana"]
    assert promoted["metadata"]["review"]["run"] == review.id
    assert changed[retrieved.case.id]["gold"]["relevant"][chunk] == 0
    code, out = invoke("review", "promote", run, "--into", cases, "--case", "nope")
    assert code == 2 and "no case 'nope'" in out


# -- pairwise preferences in compare ---------------------------------------------------------


def test_compare_reports_peoples_preferences(run, tmp_path):
    other = another_run(run, tmp_path / "other")
    a, b = Review.open(run), Review.open(other)
    assert a.id != b.id
    ids = list(a.index)
    app = App(a, new_token(), set(), "ana", Pairing(a, b, new_token(), ids))
    # 7 cases B better, 2 A better, 1 tie (the page sends sides; the server maps them)
    wanted = ["b"] * 7 + ["a"] * 2 + ["tie"]
    for case, want in zip(ids, wanted, strict=False):
        left_is_a = app.pairing.a_is_left(case)
        choice = "tie" if want == "tie" else (
            "left" if (want == "a") == left_is_a else "right")
        app.store({"case": case, "choice": choice, "reviewer": "ana"})
    stored = L.read(run / L.PAIRWISE)
    assert [x.label for x in stored] == [{"a": "A", "b": "B", "tie": "tie"}[w]
                                         for w in wanted[: len(ids)]]
    from evalharness.compare import compare_runs

    human = compare_runs(run, other, resamples=200, permutations=200).human
    assert (human["b_wins"], human["a_wins"], human["ties"]) == (7, 2, 1)
    assert human["win_rate_b"] == pytest.approx(7.5 / 10)
    # exact two-sided sign test: 2 * P(X <= 2), X ~ Bin(9, 1/2)
    assert human["sign_test_p"] == pytest.approx(2 * sum(math.comb(9, k)
                                                          for k in range(3)) / 2 ** 9)
    # the same system twice: the judge ties every case, so it matches the one tie
    assert human["judge"]["matches"] == 1 and human["judge"]["cases"] == 10
    proc = run_cli("compare", run, other)
    assert "B preferred 7, A 2, ties 1; B's win rate 0.75" in proc.out, proc


def test_review_serve_from_the_command_line(run):
    """`evalharness review serve` as a user starts it: it prints the URL with its token and
    serves the page there until stopped; a bad --stratify is a usage error."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "evalharness.cli", "review", "serve", str(run), "--sample", "3",
         "--stratify", "component,verdict", "--reviewer", "ana"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        first = proc.stdout.readline()
        assert first.startswith("reviewing 3 of 12 cases, a sample stratified by component, "
                                "verdict"), first + proc.stderr.read()
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://localhost:") and "?t=" in url
        status, page, _ = request(url.replace("localhost", "127.0.0.1") + "&r=ana")
        assert status == 200 and 'id="review"' in page
        assert json.loads((run / "review" / "sample.json").read_text())["stratify"] == [
            "component", "verdict"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
    code, out = invoke("review", "serve", run, "--stratify", "colour")
    assert code == 2 and "--stratify 'colour'" in out and "component" in out
