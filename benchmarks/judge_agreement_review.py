"""Our own judge's agreement with people, measured through the review feature users run:
BEGIN and ALCE become a recorded-traces run, their human labels a review file.

    python benchmarks/judge_agreement_review.py                  # the heuristic judge, all items
    python benchmarks/judge_agreement_review.py --limit 10       # a quick look
    python benchmarks/judge_agreement_review.py --out DIR        # keep the run and its files
    python benchmarks/judge_agreement_review.py --backend openai --model M [--base-url URL]

Exactly what a user does with their own traces and labels:

1. write a scenario of recorded traces with one component, a generator scored by
   ``faithfulness`` and ``answer_relevancy``: ``cases.jsonl`` (one case per labelled item: its
   id, question and tags = [subset, split]) and ``traces.jsonl`` (the generator step: the
   answer, and BEGIN's knowledge snippet as its context; ALCE has none);
2. run it with ``evalharness.run_scenario`` (the judge: the scenario's ``judge:`` block);
3. write the human labels as a reviewer's file — BEGIN "supported" / "unsupported" as yes / no
   on ``generator.faithfulness`` (reviewer "BEGIN annotators"), ALCE's 1-5 utility as the
   ordinal label of ``generator.answer_relevancy`` ("ALCE annotators") — and import it with
   ``evalharness review import RUN FILE``;
4. ask ``evalharness agreement RUN --filter tag:SUBSET --json --no-report`` per subset, and once
   without a filter (every BEGIN item, every ALCE item).

Beside each figure: ``benchmarks/judge_agreement.py``'s own computation on the same items (its
``faithfulness_scores`` / ``relevancy_scores`` and ``roc_auc`` / ``spearman``), which must
agree, and how many per-item scores the two paths share. Labels ``review import`` cannot take
are left out of the review file and counted with the reason (import is all or nothing): an item
whose metric has no value (BEGIN answers without claims: the old script skips them too).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
COMPONENT = "generator"
GROUNDEDNESS = "faithfulness"
RELEVANCY = "answer_relevancy"
REVIEWERS = {GROUNDEDNESS: "BEGIN annotators", RELEVANCY: "ALCE annotators"}
THRESHOLDS = {GROUNDEDNESS: 0.5, RELEVANCY: 0.1}  # the generator's default verdict criteria


def _old_benchmark():
    """``benchmarks/judge_agreement.py`` as a module (this file may be loaded by path too)."""
    spec = importlib.util.spec_from_file_location("judge_agreement", HERE / "judge_agreement.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


jm = _old_benchmark()


# -- the work folder: scenario, cases, traces --------------------------------------------------


def subset_of(item: dict[str, Any]) -> str:
    """An item's subset: BEGIN's ``source`` or ALCE's ``subset``.

    >>> subset_of({"source": "begin_wow", "split": "dev"}), subset_of({"subset": "eli5"})
    ('begin_wow', 'eli5')
    """
    return item.get("source") or item["subset"]


def case_of(item: dict[str, Any]) -> dict[str, Any]:
    """The case of one labelled item: its id, its question, tags [subset, split].

    >>> case_of({"id": "b/1", "source": "begin_wow", "split": "dev", "question": "q"})
    {'id': 'b/1', 'question': 'q', 'tags': ['begin_wow', 'dev']}
    """
    tags = [subset_of(item)] + ([item["split"]] if item.get("split") else [])
    return {"id": item["id"], "question": item["question"], "tags": tags}


def trace_of(item: dict[str, Any]) -> dict[str, Any]:
    """The recorded trace of one item: the generator's answer and its contexts (BEGIN's
    knowledge snippet; none for ALCE).

    >>> trace_of({"id": "a/1", "answer": "Yes.", "subset": "asqa"})
    {'case_id': 'a/1', 'generator': {'answer': 'Yes.', 'contexts': []}}
    """
    contexts = [item["context"]] if "context" in item else []
    return {"case_id": item["id"], "generator": {"answer": item["answer"], "contexts": contexts}}


def judge_block(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario's ``judge:`` from the options.

    >>> judge_block(argparse.Namespace(backend="heuristic", model=None, base_url=None,
    ...                                embedding_model=None, concurrency=8))
    {'backend': 'heuristic'}
    """
    if args.backend == "heuristic":
        return {"backend": "heuristic"}
    block = {"backend": args.backend, "model": args.model, "base_url": args.base_url,
             "embedding_model": args.embedding_model, "concurrency": args.concurrency}
    return {k: v for k, v in block.items() if v is not None}


def scenario_of(judge: dict[str, Any]) -> dict[str, Any]:
    """The scenario: recorded traces, one generator, the two judged metrics."""
    return {
        "name": "judge-agreement",
        "description": "BEGIN (groundedness) and ALCE (utility) items as recorded traces; "
                       "written by benchmarks/judge_agreement_review.py",
        "cases": "cases.jsonl",
        "traces": "traces.jsonl",
        "judge": judge,
        "pipeline": {COMPONENT: {"kind": "generator"}},
        "evaluators": {COMPONENT: [GROUNDEDNESS, RELEVANCY]},
        "verdicts": {COMPONENT: [f"{m} >= {t}" for m, t in THRESHOLDS.items()]},
    }


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def write_work_folder(work: Path, items: Sequence[dict[str, Any]],
                      judge: dict[str, Any]) -> Path:
    """scenario.yaml, cases.jsonl and traces.jsonl in ``work``; the scenario's path."""
    work.mkdir(parents=True, exist_ok=True)
    write_jsonl(work / "cases.jsonl", [case_of(r) for r in items])
    write_jsonl(work / "traces.jsonl", [trace_of(r) for r in items])
    path = work / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario_of(judge), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
    return path


# -- the review file -----------------------------------------------------------------------------


def label_of(item: dict[str, Any]) -> tuple[str, str | int]:
    """(metric, label) of an item's human judgment.

    >>> label_of({"label": "supported"}), label_of({"label": "unsupported"}), label_of({"score": 4})
    (('faithfulness', 'yes'), ('faithfulness', 'no'), ('answer_relevancy', 4))
    """
    if "label" in item:
        return GROUNDEDNESS, {"supported": "yes", "unsupported": "no"}[item["label"]]
    return RELEVANCY, int(item["score"])


def why_left_out(metric_value, label: str | int) -> str | None:
    """Why a label must stay out of the review file, or ``None``: ``review import`` is all or
    nothing and refuses a label of a value that has none (the metric's error), so those are
    left out and counted (BEGIN answers without claims; the old script skips them too)."""
    if metric_value is None:
        return "the metric was not computed"
    if metric_value.error is not None or metric_value.value is None:
        return metric_value.error or "no value"
    return None


def write_review_file(path: Path, items: Sequence[dict[str, Any]], results: dict[str, Any]
                      ) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """The human labels as a reviewer's JSONL file; the rows written and, per subset, the
    labels left out by reason."""
    rows, left_out = [], {}
    for item in items:
        metric, label = label_of(item)
        result = results[item["id"]]
        comp = result.components.get(COMPONENT)
        why = why_left_out(comp.metrics.get(metric) if comp else None, label)
        if why is not None:
            counts = left_out.setdefault(subset_of(item), {})
            counts[why] = counts.get(why, 0) + 1
            continue
        rows.append({"case": item["id"], "component": COMPONENT, "metric": metric, "item": "",
                     "label": label, "reviewer": REVIEWERS[metric]})
    write_jsonl(path, rows)
    return rows, left_out


# -- the public command line ---------------------------------------------------------------------


def cli(*argv: str) -> str:
    """``evalharness ARGV…`` in this process (click's runner on ``evalharness.cli.cli``); its
    standard output. A failing command stops the benchmark with its message."""
    from click.testing import CliRunner

    from evalharness.cli import cli as command

    result = CliRunner().invoke(command, list(argv), catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"`evalharness {' '.join(argv)}` failed (exit {result.exit_code}):\n"
                         f"{result.output}")
    return result.stdout


def agreement(run: Path, filters: Sequence[str]) -> dict[str, Any]:
    """``evalharness agreement RUN --filter F… --json --no-report``, parsed."""
    args = ["agreement", str(run), "--json", "--no-report"]
    for f in filters:
        args += ["--filter", f]
    return json.loads(cli(*args))


def row_of(report: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """The agreement row of ``generator.METRIC``."""
    return next((r for r in report["rows"]
                 if (r["component"], r["metric"]) == (COMPONENT, metric)), None)


# -- subsets -------------------------------------------------------------------------------------


def subsets(items: Sequence[dict[str, Any]]) -> dict[str, tuple[list[str], list[str]]]:
    """name -> (``--filter`` terms, ids), as the old script's rows: each source, each of its
    splits unless it is the whole source (the dev split always), then every item of the
    dataset (no filter).

    >>> sorted(subsets([{"id": "1", "source": "begin_cmu", "split": "dev"},
    ...                 {"id": "2", "source": "begin_wow", "split": "dev"},
    ...                 {"id": "3", "source": "begin_wow", "split": "test"}]))
    ['BEGIN, all', 'begin_cmu', 'begin_wow', 'begin_wow dev', 'begin_wow test']
    """
    out: dict[str, tuple[list[str], list[str]]] = {}
    for r in items:
        name = subset_of(r)
        out.setdefault(name, ([f"tag:{name}"], []))[1].append(r["id"])
        if r.get("split"):
            out.setdefault(f"{name} {r['split']}", ([f"tag:{name}", f"tag:{r['split']}"],
                                                   []))[1].append(r["id"])
    dev = " ".join(jm.DEV_SUBSET)
    for name in [n for n in out if " " in n]:
        if len(out[name][1]) == len(out[name.split()[0]][1]) and name != dev:
            del out[name]
    dataset = "BEGIN" if items and "source" in items[0] else "ALCE"
    ordered = dict(sorted(out.items(), key=lambda kv: (kv[0].split()[0], len(kv[0].split()),
                                                       kv[0])))
    ordered[f"{dataset}, all"] = ([], [r["id"] for r in items])
    return ordered


# -- the measurement -----------------------------------------------------------------------------


def measure(args: argparse.Namespace, work: Path, out: Callable[[str], None]
            ) -> dict[str, Any]:
    """Steps 1-4 of the module text and the old script's figures on the same items; plain
    data for :func:`print_report`."""
    import evalharness

    started = time.perf_counter()
    begin = jm.read_jsonl(jm.GROUNDEDNESS, args.limit)
    alce = jm.read_jsonl(jm.RELEVANCY, args.limit)
    items = begin + alce
    run = work / "run"
    if run.exists():
        raise SystemExit(f"{run} exists already (a run of this benchmark?); give --out a new "
                         "folder")
    scenario = write_work_folder(work, items, judge_block(args))
    out(f"work folder: {work} ({len(begin)} BEGIN + {len(alce)} ALCE cases"
        + ("; removed at the end, --out DIR keeps it)" if args.out is None else ")"))

    t = time.perf_counter()
    report = evalharness.run_scenario(scenario, out=run, headroom=False)
    timings = {"run": time.perf_counter() - t}
    out(f"ran the scenario into {run} ({timings['run']:.1f} s)")
    folder = evalharness.load_run(run)
    results = {r.case.id: r for r in folder.results}

    review_file = work / "human_labels.jsonl"
    rows, left_out = write_review_file(review_file, items, results)
    t = time.perf_counter()
    imported = cli("review", "import", str(run), str(review_file)).strip()
    timings["import"] = time.perf_counter() - t
    out(imported)

    t = time.perf_counter()
    reports, asked = {}, {}
    for dataset in (begin, alce):
        for name, (filters, _) in subsets(dataset).items():
            key = tuple(filters)  # "BEGIN, all" and "ALCE, all" are the same call
            if key not in asked:
                asked[key] = agreement(run, filters)
            reports[name] = asked[key]
    timings["agreement"] = time.perf_counter() - t
    out(f"asked `evalharness agreement` {len(asked)} times ({timings['agreement']:.1f} s)")
    (work / "agreement").mkdir(exist_ok=True)
    for name, rep in reports.items():
        (work / "agreement" / f"{name.replace(' ', '_').replace(',', '')}.json").write_text(
            json.dumps(rep, indent=1) + "\n", encoding="utf-8")

    # the old script's computation on the same items, with a judge built as it builds one
    t = time.perf_counter()
    judge = jm.make_judge(args)
    try:
        old_faith, _, _ = jm.faithfulness_scores(judge, begin)
        old_relevancy = jm.relevancy_scores(judge, alce)
    finally:
        judge.close()
    timings["old script"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    old = {r["id"]: s for r, s in zip(items, old_faith + old_relevancy, strict=True)}
    return {"work": work, "run": run, "report": report, "results": results, "begin": begin,
            "alce": alce, "rows": rows, "left_out": left_out, "imported": imported,
            "agreement": reports, "calls": len(asked), "old": old, "timings": timings,
            "labels_path": run / "review" / "labels.jsonl"}


def new_value(results: dict[str, Any], case_id: str, metric: str) -> float | None:
    comp = results[case_id].components.get(COMPONENT)
    mv = comp.metrics.get(metric) if comp else None
    return None if mv is None or mv.error is not None else mv.value


def _close(a: float | None, b: float | None) -> bool:
    """Equal up to floating-point noise: the plugin and the old script take cosines in
    different orders, so answer relevancy may differ in the last bits.

    >>> _close(0.1 + 0.2, 0.3), _close(None, None), _close(0.0, None)
    (True, True, False)
    """
    return a == b if a is None or b is None else abs(a - b) <= 1e-12


def groundedness_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Per BEGIN subset: the agreement row and the old script's figures on the labelled items
    the agreement used."""
    labelled = {r["case"]: r["label"] == "yes" for r in m["rows"] if r["metric"] == GROUNDEDNESS}
    truth = {r["id"]: r["label"] == "supported" for r in m["begin"]}
    out = []
    for name, (_, ids) in subsets(m["begin"]).items():
        row = row_of(m["agreement"][name], GROUNDEDNESS)
        used = [i for i in ids if i in labelled]
        old_ids = [i for i in ids if m["old"][i] is not None]
        scores = [m["old"][i] for i in old_ids]
        y = [truth[i] for i in old_ids]
        same = sum(1 for i in ids if m["old"][i] == new_value(m["results"], i, GROUNDEDNESS))
        out.append({"subset": name, "row": row, "labelled": len(used),
                    "old_n": len(old_ids), "old_auc": jm.roc_auc(scores, y),
                    "old_ba": jm.balanced_accuracy(scores, y, jm.FIXED_THRESHOLD),
                    "same_scores": same, "items": len(ids)})
    return out


def relevancy_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    """Per ALCE subset: the agreement row; on the same items the old script's ρ and its two
    naive cues (word overlap, answer length) and the noncommittal answers; the old ρ on every
    item."""
    labelled = {r["case"] for r in m["rows"] if r["metric"] == RELEVANCY}
    human = {r["id"]: r["score"] for r in m["alce"]}
    by_id = {r["id"]: r for r in m["alce"]}
    out = []
    for name, (_, ids) in subsets(m["alce"]).items():
        row = row_of(m["agreement"][name], RELEVANCY)
        used = [i for i in ids if i in labelled and m["old"][i] is not None]
        every = [i for i in ids if m["old"][i] is not None]
        y = [human[i] for i in used]
        same = sum(1 for i in ids if _close(m["old"][i], new_value(m["results"], i, RELEVANCY)))
        out.append({"subset": name, "row": row, "labelled": len(used),
                    "old_rho": jm.spearman([m["old"][i] for i in used], y),
                    "overlap_rho": jm.spearman([jm.word_overlap(by_id[i]["question"],
                                                                by_id[i]["answer"])
                                                for i in used], y),
                    "length_rho": jm.spearman([len(by_id[i]["answer"].split()) for i in used],
                                              y),
                    "noncommittal": sum(1 for i in used if m["old"][i] == 0.0),
                    "old_rho_all": jm.spearman([m["old"][i] for i in every],
                                               [human[i] for i in every]),
                    "old_n_all": len(every), "same_scores": same, "items": len(ids)})
    return out


# -- the report ----------------------------------------------------------------------------------


def est(row: dict[str, Any] | None, stat: str, ci: bool = True) -> str:
    """An agreement estimate as ``0.941 [0.934, 0.948]``.

    >>> est({"auc": {"value": 0.94123, "ci95": [0.93, 0.95]}}, "auc")
    '0.941 [0.930, 0.950]'
    >>> est(None, "auc"), est({"auc": {"value": None, "ci95": None}}, "auc")
    ('n/a', 'n/a')
    """
    value = (row or {}).get(stat) or {}
    if value.get("value") is None:
        return "n/a"
    text = jm.fmt(value["value"])
    if ci and value.get("ci95"):
        text += f" [{jm.fmt(value['ci95'][0])}, {jm.fmt(value['ci95'][1])}]"
    return text


def best(row: dict[str, Any] | None) -> str:
    b = (row or {}).get("best_threshold")
    if not b:
        return "n/a"
    return f"{b['threshold']:.3f} ({jm.fmt(b['balanced_accuracy'])})"


def print_report(m: dict[str, Any], judge_label: str, out: Callable[[str], None]) -> None:
    report = m["report"]
    out(f"run: {m['run']} — {len(m['results'])} cases, judge {judge_label}")
    out(f"review file: {m['work'] / 'human_labels.jsonl'} ({len(m['rows'])} labels)")
    for subset, reasons in sorted(m["left_out"].items()):
        out(f"left out of the review file ({subset}): " + "; ".join(
            f"{why}: {n}" for why, n in sorted(reasons.items())))
    out("")
    g = groundedness_rows(m)
    out("Groundedness vs BEGIN human attribution labels, through `evalharness agreement` "
        "(generator.faithfulness, yes/no labels)")
    out("AUC against the score; κ and balanced accuracy against the verdict faithfulness >= "
        f"{THRESHOLDS[GROUNDEDNESS]}; best = the threshold with the highest balanced accuracy "
        "on that subset (and it); old = benchmarks/judge_agreement.py on the same items")
    out(jm.table(["subset", "n", "AUC [95% CI]", "κ", "BA@0.5", "best threshold (BA)",
                  "AUC old", "BA@0.5 old", "ΔAUC", "same scores"],
                 [[r["subset"], str((r["row"] or {}).get("n", 0)), est(r["row"], "auc"),
                   est(r["row"], "kappa", ci=False),
                   est(r["row"], "balanced_accuracy", ci=False), best(r["row"]),
                   jm.fmt(r["old_auc"]), jm.fmt(r["old_ba"]),
                   _delta((r["row"] or {}).get("auc"), r["old_auc"]),
                   f"{r['same_scores']}/{r['items']}"] for r in g]))
    out("")
    a = relevancy_rows(m)
    out("Answer relevancy vs ALCE human utility (1-5), through `evalharness agreement` "
        "(generator.answer_relevancy, 1-5 labels)")
    out("ρ old = benchmarks/judge_agreement.py's Spearman on the same items (and on every item, "
        "empty answers included); word overlap, length: its naive cues' ρ on the same items; "
        "noncommittal: answers scored 0")
    out(jm.table(["subset", "n", "Spearman [95% CI]", "Kendall τb [95% CI]", "weighted κ",
                  "ρ old", "Δρ", "ρ word overlap", "ρ length", "noncommittal",
                  "ρ old, all items (n)", "same scores"],
                 [[r["subset"], str((r["row"] or {}).get("n", 0)), est(r["row"], "spearman"),
                   est(r["row"], "kendall"), est(r["row"], "weighted_kappa", ci=False),
                   jm.fmt(r["old_rho"]), _delta((r["row"] or {}).get("spearman"), r["old_rho"]),
                   jm.fmt(r["overlap_rho"]), jm.fmt(r["length_rho"]), str(r["noncommittal"]),
                   f"{jm.fmt(r['old_rho_all'])} ({r['old_n_all']})",
                   f"{r['same_scores']}/{r['items']}"] for r in a]))
    out("")
    t = m["timings"]
    out(f"time: run {t['run']:.1f} s, import {t['import']:.1f} s, agreement "
        f"({m['calls']} calls) {t['agreement']:.1f} s, old script {t['old script']:.1f} "
        f"s; total {t['total']:.1f} s")
    for name, summary in report.components[COMPONENT].metrics.items():
        if summary.errors:
            out(f"run errors, {name} ({summary.errors} cases, no value to label): " + "; ".join(
                f"{why}: {n}" for why, n in summary.error_reasons.items()))


def _delta(row_est: dict[str, Any] | None, old: float) -> str:
    value = (row_est or {}).get("value")
    if value is None or old != old:
        return "n/a"
    return f"{value - old:+.1e}" if value != old else "0"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = jm.judge_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="work folder to keep (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    if args.backend == "openai" and not args.model:
        raise SystemExit("--backend openai needs --model (and --base-url for a local server)")
    return args


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    args = parse_args(argv)
    if args.out is not None:
        m = measure(args, args.out, out)
        print_report(m, _judge_label(m), out)
        return 0
    with tempfile.TemporaryDirectory(prefix="judge-agreement-") as tmp:
        m = measure(args, Path(tmp), out)
        print_report(m, _judge_label(m), out)
    return 0


def _judge_label(m: dict[str, Any]) -> str:
    judge = m["report"].judge
    return f"{judge.get('backend')}:{judge.get('model')}"


if __name__ == "__main__":
    sys.exit(main())
