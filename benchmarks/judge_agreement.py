"""How well a judge agrees with people: groundedness on BEGIN, answer relevancy on ALCE.

    python benchmarks/judge_agreement.py                      # the heuristic judge, all items
    python benchmarks/judge_agreement.py --limit 200          # a quick look
    python benchmarks/judge_agreement.py --diagnostics        # + graded coverage (heuristic)
    python benchmarks/judge_agreement.py --backend openai --model M [--base-url URL]

Both measurements go through evalharness's judge machinery (``Judge.run_many`` and
``Judge.embed_many``), exactly as the generator plugin calls it, and put the judge beside naive
baselines computed in the same run on the same items.

Groundedness (``data/human_labels/groundedness_begin.jsonl``, human "fully attributable"
labels): faithfulness = supported claims / claims, with claims = CLAIMS(question, answer) and
verdicts = CLAIM_SUPPORT(context, claims); an item without claims is skipped and counted. Per
subset: ROC-AUC, balanced accuracy at the fixed threshold 0.5, and balanced accuracy at the
threshold that is best on the ``begin_wow`` dev split (the only split meant for choosing
anything), applied unchanged to the other subsets. The naive judge is the share of the
answer's distinct content words (lowercased ``[a-z0-9]+`` tokens minus the heuristic judge's
stopword list, no stemming) found in the context. The whole run reads only the copies in
``benchmarks/data/human_labels``.

Answer relevancy (``data/human_labels/relevancy_alce.jsonl``, human 1-5 utility scores):
score = mean cosine similarity between the question and the QUESTIONS (n=3) the judge writes
for the answer, 0 when any question is flagged noncommittal (as ragas does); Spearman correlation
per subset beside word overlap (share of the question's content words in the answer) and
answer length (words).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalharness.judge import (
    CLAIM_SUPPORT,
    CLAIMS,
    QUESTIONS,
    ClaimsInput,
    ClaimSupportInput,
    Judge,
    JudgeConfig,
    QuestionsInput,
    heuristic,
)
from evalharness.judge.heuristic import STOPWORDS, HeuristicJudge

DATA = Path(__file__).resolve().parent / "data" / "human_labels"
GROUNDEDNESS = DATA / "groundedness_begin.jsonl"
RELEVANCY = DATA / "relevancy_alce.jsonl"
FIXED_THRESHOLD = 0.5
DEV_SUBSET = ("begin_wow", "dev")
N_QUESTIONS = 3


# -- statistics --------------------------------------------------------------------------------


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties sharing the average of the ranks they span.

    >>> average_ranks([10, 20, 20, 5]).tolist()
    [2.0, 3.5, 3.5, 1.0]
    """
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=float)
    sorted_x = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """ROC-AUC as the Mann-Whitney U statistic: the chance that a random positive scores
    above a random negative, ties counting one half. NaN when a class is missing.

    >>> roc_auc([0.9, 0.8, 0.3, 0.1], [True, True, False, False])
    1.0
    >>> roc_auc([0.5, 0.5, 0.5, 0.1], [True, False, True, False])
    0.75
    >>> roc_auc([1, 2], [True, True])
    nan
    """
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = average_ranks(scores)
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of average ranks (ties handled). NaN if constant.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 40])
    1.0
    >>> round(spearman([1, 2, 2, 3], [3, 1, 2, 0]), 4)
    -0.9487
    >>> spearman([1, 1, 1], [1, 2, 3])
    nan
    """
    rx, ry = average_ranks(x), average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom else float("nan")


def balanced_accuracy(scores: Sequence[float], labels: Sequence[bool], threshold: float
                      ) -> float:
    """Mean of the true-positive and true-negative rates, predicting positive when
    ``score >= threshold``. NaN when a class is missing.

    >>> balanced_accuracy([0.9, 0.4, 0.6, 0.1], [True, True, False, False], 0.5)
    0.5
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return float("nan")
    pred = s >= threshold
    return float(((pred & y).sum() / y.sum() + (~pred & ~y).sum() / (~y).sum()) / 2)


def best_threshold(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """The threshold (one of the scores) with the highest balanced accuracy; the lowest such.

    >>> best_threshold([0.9, 0.7, 0.6, 0.1], [True, True, False, False])
    0.7
    """
    candidates = sorted(set(float(s) for s in scores))
    accuracies = [balanced_accuracy(scores, labels, t) for t in candidates]
    return candidates[int(np.nanargmax(accuracies))]


# -- naive baselines ---------------------------------------------------------------------------


def naive_words(text: str) -> set[str]:
    """The naive judges' content words: lowercased ``[a-z0-9]+`` minus stopwords.

    >>> sorted(naive_words("The Coat is 100% wool, isn't it?"))
    ['100', 'coat', 'wool']
    """
    return {t for t in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower()) if t not in STOPWORDS}


def naive_groundedness(context: str, answer: str) -> float:
    """Share of the answer's distinct content words found in the context (0 without any).

    >>> naive_groundedness("a grey wool coat", "The coat is grey cashmere.")
    0.6666666666666666
    """
    words = naive_words(answer)
    return len(words & naive_words(context)) / len(words) if words else 0.0


def word_overlap(question: str, answer: str) -> float:
    """Share of the question's distinct content words found in the answer.

    >>> word_overlap("Which wool coats?", "Two wool coats.")
    1.0
    """
    words = naive_words(question)
    return len(words & naive_words(answer)) / len(words) if words else 0.0


# -- the judges --------------------------------------------------------------------------------


def make_judge(args: argparse.Namespace) -> Judge:
    """The judge to measure: the heuristic one, or a registered backend built from options."""
    if args.backend == "heuristic":
        return HeuristicJudge(JudgeConfig())
    from evalharness.plugins import load_plugins

    if args.backend == "openai" and not args.model:
        raise SystemExit("--backend openai needs --model (and --base-url for a local server)")
    try:
        host = load_plugins()
    except Exception as exc:
        raise SystemExit(f"could not load evalharness's plugins to find the {args.backend!r} "
                         f"judge backend: {exc}") from exc
    backend = host.judge_backend(args.backend)
    if backend is None:
        raise SystemExit(f"judge backend {args.backend!r} is not registered (registered: "
                         f"{', '.join(sorted(host.registry.judge_backends)) or 'none'})")
    config = JudgeConfig(backend=args.backend, model=args.model, base_url=args.base_url,
                         embedding_model=args.embedding_model,
                         concurrency=args.concurrency)
    try:
        return backend.factory(config)
    except Exception as exc:
        raise SystemExit(f"could not build the {args.backend} judge: {exc}") from exc


def read_jsonl(path: Path, limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]
    if limit is not None:
        # the first `limit` items of every subset (and split), so every row of the table shows
        seen: dict[tuple, int] = {}
        kept = []
        for r in rows:
            group = (r.get("source") or r.get("subset"), r.get("split"))
            if seen.get(group, 0) < limit:
                seen[group] = seen.get(group, 0) + 1
                kept.append(r)
        rows = kept
    return rows


def faithfulness_scores(judge: Judge, items: Sequence[dict[str, Any]]
                        ) -> tuple[list[float | None], list[str | None]]:
    """Faithfulness per item (``None`` when skipped) and why an item was skipped."""
    claims = judge.run_many(CLAIMS, [ClaimsInput(question=r["question"], answer=r["answer"])
                                     for r in items], metric="faithfulness")
    scores: list[float | None] = [None] * len(items)
    skipped: list[str | None] = [None] * len(items)
    to_verify = []
    for i, j in enumerate(claims):
        if j.output is None:
            skipped[i] = f"claims: {j.error}"
        elif not j.output.claims:
            skipped[i] = "no claims"
        else:
            to_verify.append(i)
    verdicts = judge.run_many(CLAIM_SUPPORT, [
        ClaimSupportInput(context=items[i]["context"], claims=claims[i].output.claims)
        for i in to_verify], metric="faithfulness")
    for i, j in zip(to_verify, verdicts, strict=True):
        n = len(claims[i].output.claims)
        if j.output is None:
            skipped[i] = f"claim support: {j.error}"
        elif len(j.output.verdicts) != n:
            skipped[i] = "claim support: wrong number of verdicts"
        else:
            scores[i] = sum(v.supported for v in j.output.verdicts) / n
    return scores, skipped


def relevancy_scores(judge: Judge, items: Sequence[dict[str, Any]]) -> list[float | None]:
    """Answer relevancy per item (``None`` on a judge error)."""
    generated = judge.run_many(QUESTIONS, [QuestionsInput(answer=r["answer"], n=N_QUESTIONS)
                                           for r in items], metric="answer_relevancy")
    groups, owners = [], []
    scores: list[float | None] = [None] * len(items)
    for i, j in enumerate(generated):
        if j.output is None or not j.output.questions:
            continue
        groups.append([items[i]["question"]] + [q.question for q in j.output.questions])
        owners.append(i)
    embeddings = judge.embed_many(groups, metric="answer_relevancy")
    for i, emb in zip(owners, embeddings, strict=True):
        if emb.vectors is None:
            continue
        v = emb.vectors / np.maximum(np.linalg.norm(emb.vectors, axis=1, keepdims=True), 1e-12)
        cosines = v[1:] @ v[0]
        if any(q.noncommittal for q in generated[i].output.questions):
            scores[i] = 0.0
        else:
            scores[i] = float(np.mean(cosines))
    return scores


# -- the report --------------------------------------------------------------------------------


def fmt(x: float, sign: bool = False) -> str:
    if x != x:  # NaN
        return "n/a"
    return f"{x:+.3f}" if sign else f"{x:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain fixed-width table.

    >>> print(table(["a", "bb"], [["1", "2"]]))
    a  bb
    -  --
    1   2
    """
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = ["  ".join(h.ljust(w) if k == 0 else h.rjust(w)
                       for k, (h, w) in enumerate(zip(header, widths, strict=True))),
             "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w)
                               for k, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


def graded_faithfulness(item: dict[str, Any]) -> float | None:
    """Diagnostic, heuristic judge only: the mean over claims of the share of content words
    found (0 for a claim failing a number, size, name, opinion, first-person or negation
    check) — what a graded rather than a supported/unsupported verdict would rank like.

    >>> graded_faithfulness({"question": "", "context": "The coat is grey wool.",
    ...                      "answer": "The coat is grey cashmere."})
    0.6667
    """
    claims = heuristic.split_claims(item["question"], item["answer"])
    if not claims:
        return None
    context = heuristic._Context(item["context"])
    values = []
    for claim in claims:
        s = heuristic.check_claim(claim, context)
        hard = (s.missing_numbers or s.missing_sizes or s.missing_names or s.missing_opinions
                or s.first_person or s.negation_mismatch)
        values.append(0.0 if hard else s.coverage)
    return round(float(np.mean(values)), 4)


def groundedness_report(judge: Judge, limit: int | None, out: Callable[[str], None],
                        diagnostics: bool = False) -> bool:
    items = read_jsonl(GROUNDEDNESS, limit)
    scores, skipped = faithfulness_scores(judge, items)
    naive = [naive_groundedness(r["context"], r["answer"]) for r in items]
    labels = [r["label"] == "supported" for r in items]

    subsets: dict[str, list[int]] = {}
    for i, r in enumerate(items):
        subsets.setdefault(r["source"], []).append(i)
        subsets.setdefault(f"{r['source']} {r['split']}", []).append(i)
    for name in [n for n in subsets if " " in n]:  # a split that is its whole source: once
        if len(subsets[name]) == len(subsets[name.split()[0]]) and name != " ".join(DEV_SUBSET):
            del subsets[name]
    names = sorted(subsets, key=lambda s: (s.split()[0], len(s.split()), s))

    dev = subsets.get(" ".join(DEV_SUBSET), [])
    dev_scored = [i for i in dev if scores[i] is not None]
    thr_judge = best_threshold([scores[i] for i in dev_scored],
                               [labels[i] for i in dev_scored]) if dev_scored else float("nan")
    thr_naive = best_threshold([naive[i] for i in dev_scored],
                               [labels[i] for i in dev_scored]) if dev_scored else float("nan")

    rows, beats = [], True
    for name in names:
        idx = [i for i in subsets[name] if scores[i] is not None]
        y = [labels[i] for i in idx]
        s = [scores[i] for i in idx]
        b = [naive[i] for i in idx]
        auc_j, auc_b = roc_auc(s, y), roc_auc(b, y)
        if len(name.split()) == 1 and not auc_j > auc_b:
            beats = False
        rows.append([name, str(len(idx)), str(sum(y)), str(len(subsets[name]) - len(idx)),
                     fmt(auc_j), fmt(auc_b), fmt(auc_j - auc_b, sign=True),
                     fmt(balanced_accuracy(s, y, FIXED_THRESHOLD)),
                     fmt(balanced_accuracy(b, y, FIXED_THRESHOLD)),
                     fmt(balanced_accuracy(s, y, thr_judge)),
                     fmt(balanced_accuracy(b, y, thr_naive))])
    out(f"Groundedness vs BEGIN human attribution labels — judge: {judge.label()}")
    out("score = supported claims / claims (faithfulness); naive = share of answer content "
        "words in the context")
    out(table(["subset", "n", "pos", "skipped", "AUC judge", "AUC naive", "ΔAUC",
               "BA@0.5 judge", "BA@0.5 naive", "BA@dev judge", "BA@dev naive"], rows))
    out(f"BA@dev: threshold best on {' '.join(DEV_SUBSET)} (judge {fmt(thr_judge)}, naive "
        f"{fmt(thr_naive)}), applied unchanged to every subset (optimistic on that split "
        f"itself).")
    reasons: dict[str, int] = {}
    for why in skipped:
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
    if reasons:
        out("skipped: " + "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items())))
    if diagnostics and isinstance(judge, HeuristicJudge):
        graded = [graded_faithfulness(r) for r in items]
        rows = []
        for name in names:
            idx = [i for i in subsets[name] if scores[i] is not None and graded[i] is not None]
            y = [labels[i] for i in idx]
            auc_g = roc_auc([graded[i] for i in idx], y)
            auc_b = roc_auc([naive[i] for i in idx], y)
            rows.append([name, str(len(idx)), fmt(auc_g), fmt(auc_b),
                         fmt(auc_g - auc_b, sign=True)])
        out("")
        out("Diagnostic (not the faithfulness score): mean claim coverage, 0 for a claim failing "
            "a hard check")
        out(table(["subset", "n", "AUC graded", "AUC naive", "ΔAUC"], rows))
    return beats


def relevancy_report(judge: Judge, limit: int | None, out: Callable[[str], None]) -> None:
    items = read_jsonl(RELEVANCY, limit)
    scores = relevancy_scores(judge, items)
    rows = []
    for subset in sorted({r["subset"] for r in items}):
        idx = [i for i, r in enumerate(items) if r["subset"] == subset and scores[i] is not None]
        human = [items[i]["score"] for i in idx]
        rows.append([subset, str(len(idx)),
                     fmt(spearman([scores[i] for i in idx], human)),
                     fmt(spearman([word_overlap(items[i]["question"], items[i]["answer"])
                                   for i in idx], human)),
                     fmt(spearman([len(items[i]["answer"].split()) for i in idx], human)),
                     str(sum(1 for i in idx if scores[i] == 0.0))])
    out(f"Answer relevancy vs ALCE human utility (1-5) — judge: {judge.label()}")
    out(f"score = mean cosine(question, generated questions), n={N_QUESTIONS}, 0 if "
        f"noncommittal; Spearman rho")
    out(table(["subset", "n", "rho judge", "rho word overlap", "rho length",
               "noncommittal"], rows))
    errors = sum(1 for s in scores if s is None)
    if errors:
        out(f"judge errors (items left out): {errors}")


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="heuristic",
                        help="judge backend: heuristic (default) or openai")
    parser.add_argument("--model", help="chat model (openai backend)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (openai backend)")
    parser.add_argument("--embedding-model", help="embedding model (openai backend)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N items of each subset (default: all)")
    parser.add_argument("--only", choices=["groundedness", "relevancy"],
                        help="run one of the two measurements")
    parser.add_argument("--diagnostics", action="store_true",
                        help="heuristic judge: also rank by graded claim coverage")
    args = parser.parse_args(argv)
    judge = make_judge(args)
    try:
        beats = True
        if args.only != "relevancy":
            beats = groundedness_report(judge, args.limit, out, args.diagnostics)
            out("")
        if args.only != "groundedness":
            relevancy_report(judge, args.limit, out)
    finally:
        judge.close()
    if not beats:
        out("\nNOTE: the judge does not beat the naive judge's ROC-AUC on every subset.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
