"""How well a judge agrees with people: groundedness on BEGIN, answer relevancy on ALCE.

    python benchmarks/judge_agreement.py                      # the heuristic judge, all items
    python benchmarks/judge_agreement.py --limit 200          # a quick look
    python benchmarks/judge_agreement.py --diagnostics        # + bootstrap CI, 0/1, signals
    python benchmarks/judge_agreement.py --fit                # refit the heuristic's weights
    python benchmarks/judge_agreement.py --backend openai --model M [--base-url URL]

Both measurements go through evalharness's judge machinery (``Judge.run_many`` and
``Judge.embed_many``), exactly as the generator plugin calls it, and put the judge beside naive
baselines computed in the same run on the same items.

Groundedness (``data/human_labels/groundedness_begin.jsonl``, human "fully attributable"
labels): faithfulness exactly as the generator plugin computes it — claims = CLAIMS(question,
answer), verdicts = CLAIM_SUPPORT(context, claims), each claim scoring the judge's
``confidence`` when it gives one and its 0/1 ``supported`` verdict otherwise (the plugin's own
helper, imported), faithfulness = the mean over claims; an item without claims is skipped and
counted. Per subset: ROC-AUC, balanced accuracy at the fixed threshold 0.5, and balanced
accuracy at the threshold that is best on the ``begin_wow`` dev split (the only split meant for
choosing anything), applied unchanged to the other subsets. The naive judge is the share of the
answer's distinct content words (lowercased ``[a-z0-9]+`` tokens minus the heuristic judge's
stopword list, no stemming) found in the context. The whole run reads only the copies in
``benchmarks/data/human_labels``.

``--fit`` refits the heuristic judge's logistic support weights on the ``begin_wow`` dev split
only and prints them, ready to paste into ``core/evalharness/judge/heuristic.py``.

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
from evalharness.review.stats import roc_auc, spearman  # what `evalharness agreement` uses
from evalharness_generation.judged import _support as plugin_support

DATA = Path(__file__).resolve().parent / "data" / "human_labels"
GROUNDEDNESS = DATA / "groundedness_begin.jsonl"
RELEVANCY = DATA / "relevancy_alce.jsonl"
FIXED_THRESHOLD = 0.5
DEV_SUBSET = ("begin_wow", "dev")
N_QUESTIONS = 3


# -- statistics --------------------------------------------------------------------------------


def delta_auc_interval(a: Sequence[float], b: Sequence[float], labels: Sequence[bool],
                       resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% interval of ROC-AUC(a) - ROC-AUC(b) on the same items: a paired, stratified
    bootstrap (positives and negatives resampled separately), deterministic for a seed.

    >>> lo, hi = delta_auc_interval([0.9, 0.8, 0.4, 0.1], [0.9, 0.3, 0.4, 0.1],
    ...                             [True, True, False, False], resamples=200)
    >>> bool(0.0 <= lo <= 0.25 <= hi <= 1.0)
    True
    """
    y = np.asarray(labels, dtype=bool)
    pos, neg = np.flatnonzero(y), np.flatnonzero(~y)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    deltas = []
    for _ in range(resamples):
        idx = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        yy = np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]
        deltas.append(_auc(xa[idx], yy) - _auc(xb[idx], yy))
    lo, hi = np.percentile(deltas, [2.5, 97.5])
    return float(lo), float(hi)


def _auc(x: np.ndarray, y: np.ndarray) -> float:
    # roc_auc, vectorised (average ranks through np.unique) for the bootstrap
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2)[inverse]
    n_pos = int(y.sum())
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(y) - n_pos)))


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
                        ) -> tuple[list[float | None], list[float | None], list[str | None]]:
    """Faithfulness per item exactly as the generator plugin computes it (``None`` when
    skipped), the share of claims with a 0/1 ``supported`` verdict (for comparison), and why
    an item was skipped.

    Faithfulness is the plugin's own arithmetic, through its helper
    ``evalharness_generation.judged._support``: each claim scores the judge's ``confidence``
    when it gives one, else its 0/1 verdict, and faithfulness is the mean over claims.
    """
    claims = judge.run_many(CLAIMS, [ClaimsInput(question=r["question"], answer=r["answer"])
                                     for r in items], metric="faithfulness")
    scores: list[float | None] = [None] * len(items)
    binary: list[float | None] = [None] * len(items)
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
        item_claims = claims[i].output.claims
        support = plugin_support(j, item_claims)
        if isinstance(support, str):
            skipped[i] = f"claim support: {support}"
            continue
        scores[i] = sum(support) / len(item_claims)
        binary[i] = sum(v.supported for v in j.output.verdicts) / len(item_claims)
    return scores, binary, skipped


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


# -- the heuristic's support weights: signals and the fit -----------------------------------


def signal_rows(items: Sequence[dict[str, Any]]) -> list[np.ndarray | None]:
    """Heuristic judge only: per item, its claims' :data:`heuristic.SIGNALS` as an array
    (claims x signals), ``None`` for an item without claims. The claims and signals are the
    heuristic's own (``split_claims``, ``claim_signals``), as the judge computes them.

    >>> signal_rows([{"question": "", "context": "The coat is grey wool.",
    ...               "answer": "The coat is grey wool. Hi!"}])[0].shape
    (1, 8)
    """
    out: list[np.ndarray | None] = []
    for r in items:
        claims = heuristic.split_claims(r["question"], r["answer"])
        if not claims:
            out.append(None)
            continue
        context = heuristic._Context(r["context"])
        out.append(np.array([[heuristic.claim_signals(c, context)[k] for k in heuristic.SIGNALS]
                             for c in claims], dtype=float))
    return out


FIT_L2 = 1e-3
FIT_STEPS = 3000
FIT_LEARNING_RATE = 0.05


def fit_support_weights(rows: Sequence[np.ndarray], labels: Sequence[bool],
                        fixed: dict[int, float] | None = None) -> np.ndarray:
    """Fit the heuristic's logistic support weights: [bias, one weight per signal].

    An answer's score is the mean over its claims of sigmoid(bias + w . signals) — the
    faithfulness the plugin computes from the judge's confidences — and the fit minimises the
    cross-entropy between that score and the human label, plus ``FIT_L2 / 2 * |w|^2`` (the
    bias is not penalised), with ``FIT_STEPS`` full-batch Adam steps from zero: deterministic.
    ``fixed`` maps signal columns to weights that are set, not fitted.

    >>> x = [np.array([[1.0, 0]]), np.array([[0.9, 0], [1.0, 0]]), np.array([[0.1, 1]]),
    ...      np.array([[0.0, 0]])]
    >>> w = fit_support_weights(x, [True, True, False, False], fixed={1: -3.0})
    >>> bool(w[1] > 2 and w[0] < 0), float(w[2])
    (True, -3.0)
    """
    fixed = fixed or {}
    X = np.vstack(rows)
    free = [j for j in range(X.shape[1]) if j not in fixed]
    offset = X[:, list(fixed)] @ np.array(list(fixed.values())) if fixed else np.zeros(len(X))
    owner = np.concatenate([[i] * len(r) for i, r in enumerate(rows)])
    count = np.bincount(owner).astype(float)
    y = np.asarray(labels, dtype=float)
    Z = np.hstack([np.ones((len(X), 1)), X[:, free]])
    w = np.zeros(Z.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    ridge = np.r_[0.0, np.ones(len(free))] * FIT_L2
    for t in range(1, FIT_STEPS + 1):
        p = 1.0 / (1.0 + np.exp(-(Z @ w + offset)))
        score = np.clip(np.bincount(owner, p, minlength=len(y)) / count, 1e-9, 1 - 1e-9)
        d_score = (score - y) / (score * (1 - score)) / len(y)
        grad = Z.T @ (d_score[owner] / count[owner] * p * (1 - p)) + ridge * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= FIT_LEARNING_RATE * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    out = np.zeros(X.shape[1] + 1)
    out[0] = w[0]
    out[1 + np.array(free, dtype=int)] = w[1:]
    for j, value in fixed.items():
        out[1 + j] = value
    return out


def fit_report(out: Callable[[str], None]) -> np.ndarray:
    """``--fit``: fit the weights on the BEGIN WoW dev split (those in
    ``heuristic.FIXED_SUPPORT_WEIGHTS`` are kept) and print them as Python."""
    items = [r for r in read_jsonl(GROUNDEDNESS, None)
             if (r["source"], r["split"]) == DEV_SUBSET]
    rows = signal_rows(items)
    keep = [i for i, r in enumerate(rows) if r is not None]
    labels = [items[i]["label"] == "supported" for i in keep]
    fixed = {heuristic.SIGNALS.index(k): v for k, v in heuristic.FIXED_SUPPORT_WEIGHTS.items()}
    w = fit_support_weights([rows[i] for i in keep], labels, fixed)
    scores = [float(np.mean(1 / (1 + np.exp(-(w[0] + rows[i] @ w[1:]))))) for i in keep]
    out(f"# fitted on {' '.join(DEV_SUBSET)} (n = {len(keep)} answers with claims, "
        f"{sum(labels)} supported); dev ROC-AUC {fmt(roc_auc(scores, labels))}")
    out(f"SUPPORT_BIAS = {w[0]:.2f}")
    out("SUPPORT_WEIGHTS = {")
    for name, weight in zip(heuristic.SIGNALS, w[1:], strict=True):
        note = "  # fixed, not fitted" if name in heuristic.FIXED_SUPPORT_WEIGHTS else ""
        out(f'    "{name}": {weight:.2f},{note}')
    out("}")
    return w


def groundedness_report(judge: Judge, limit: int | None, out: Callable[[str], None],
                        diagnostics: bool = False) -> bool:
    """Print the groundedness table; True when the judge beats the naive judge on every
    subset in ROC-AUC and in both balanced accuracies."""
    items = read_jsonl(GROUNDEDNESS, limit)
    scores, binary, skipped = faithfulness_scores(judge, items)
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

    rows, beaten = [], {"AUC": True, "BA@0.5": True, "BA@dev": True}
    for name in names:
        idx = [i for i in subsets[name] if scores[i] is not None]
        y = [labels[i] for i in idx]
        s = [scores[i] for i in idx]
        b = [naive[i] for i in idx]
        pairs = {"AUC": (roc_auc(s, y), roc_auc(b, y)),
                 "BA@0.5": (balanced_accuracy(s, y, FIXED_THRESHOLD),
                            balanced_accuracy(b, y, FIXED_THRESHOLD)),
                 "BA@dev": (balanced_accuracy(s, y, thr_judge),
                            balanced_accuracy(b, y, thr_naive))}
        for k, (mine, theirs) in pairs.items():
            beaten[k] = beaten[k] and mine > theirs
        (auc_j, auc_b), (ba_j, ba_b), (bd_j, bd_b) = pairs.values()
        rows.append([name, str(len(idx)), str(sum(y)), str(len(subsets[name]) - len(idx)),
                     fmt(auc_j), fmt(auc_b), fmt(auc_j - auc_b, sign=True), fmt(ba_j),
                     fmt(ba_b), fmt(bd_j), fmt(bd_b)])
    out(f"Groundedness vs BEGIN human attribution labels — judge: {judge.label()}")
    out("score = faithfulness as the plugin computes it (mean over claims of the judge's "
        "confidence, else its 0/1 verdict); naive = share of answer content words in the "
        "context")
    out(table(["subset", "n", "pos", "skipped", "AUC judge", "AUC naive", "ΔAUC",
               "BA@0.5 judge", "BA@0.5 naive", "BA@dev judge", "BA@dev naive"], rows))
    out(f"BA@dev: threshold best on {' '.join(DEV_SUBSET)} (judge {fmt(thr_judge)}, naive "
        f"{fmt(thr_naive)}), applied unchanged to every subset (optimistic on that split "
        f"itself).")
    out("beats the naive judge on every subset: " + ", ".join(
        f"{k} {'yes' if v else 'NO'}" for k, v in beaten.items()))
    reasons: dict[str, int] = {}
    for why in skipped:
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
    if reasons:
        out("skipped: " + "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items())))
    if diagnostics:
        signals = signal_rows(items) if isinstance(judge, HeuristicJudge) else None
        header = ["subset", "n", "ΔAUC 95% CI", "AUC score", "AUC 0/1 verdicts"]
        if signals is not None:
            header += [f"AUC {k}" for k in heuristic.SIGNALS]
        rows = []
        for name in names:
            idx = [i for i in subsets[name] if scores[i] is not None]
            y = [labels[i] for i in idx]
            lo, hi = delta_auc_interval([scores[i] for i in idx], [naive[i] for i in idx], y)
            row = [name, str(len(idx)), f"{fmt(lo, sign=True)}..{fmt(hi, sign=True)}",
                   fmt(roc_auc([scores[i] for i in idx], y)),
                   fmt(roc_auc([binary[i] for i in idx], y))]
            if signals is not None:
                means = np.array([signals[i].mean(axis=0) for i in idx])
                # oriented by the sign of the fitted weight: higher = more supported
                row += [fmt(roc_auc(np.sign(heuristic.SUPPORT_WEIGHTS[k] or 1.0)
                                    * means[:, n], y))
                        for n, k in enumerate(heuristic.SIGNALS)]
            rows.append(row)
        out("")
        out("Diagnostics: a paired bootstrap 95% interval of ΔAUC (judge - naive; 1000 "
            "resamples, seed 0), the score, the share of claims with a 0/1 supported verdict"
            + (", and each signal alone (mean over claims, oriented by its weight's sign)"
               if signals is not None else ""))
        out(table(header, rows))
    return all(beaten.values())


def plugin_faithfulness(judge: Judge, items: Sequence[dict[str, Any]], rows: str
                        ) -> tuple[list[float | None], int]:
    """Faithfulness through the generation plugin's evaluator, as a run computes it (each
    item's context as the generator's one context, no trace): with ``rows: table`` a context
    that reads as rows (``column: value`` lines, a Markdown table) is parsed back and checked
    by the row verifier; ``rows: text`` is the judge before it. Also: how many items' contexts
    were read as rows."""
    from evalharness.context import EvalContext
    from evalharness.models import Case, GeneratorStep
    from evalharness.registry import run_evaluator
    from evalharness_generation import register_evaluators
    from evalharness_generation.sources import generator_evidence

    batch = [(Case(id=r["id"], question=r["question"]),
              GeneratorStep(answer=r["answer"], contexts=[r["context"]])) for r in items]
    context = EvalContext(judge=judge)
    as_rows = sum(bool(generator_evidence(c, s, context).tables) for c, s in batch)
    values = run_evaluator(register_evaluators, "faithfulness", batch, {"rows": rows},
                           context=context)
    return [v["faithfulness"].value for v in values], as_rows


def row_linking_report(judge: Judge, limit: int | None, out: Callable[[str], None]) -> None:
    """No regression on prose: faithfulness with the row verifier on (the plugin's default)
    beside the judge before it (rows as text), on the same BEGIN items."""
    items = read_jsonl(GROUNDEDNESS, limit)
    labels = [r["label"] == "supported" for r in items]
    now, parsed = plugin_faithfulness(judge, items, "table")
    before, _ = plugin_faithfulness(judge, items, "text")
    subsets: dict[str, list[int]] = {}
    for i, r in enumerate(items):
        subsets.setdefault(r["source"], []).append(i)
    rows = []
    for name, idx in sorted(subsets.items()):
        idx = [i for i in idx if now[i] is not None and before[i] is not None]
        y = [labels[i] for i in idx]
        a, b = [now[i] for i in idx], [before[i] for i in idx]
        rows.append([name, str(len(idx)), fmt(roc_auc(a, y)), fmt(roc_auc(b, y)),
                     fmt(balanced_accuracy(a, y, FIXED_THRESHOLD)),
                     fmt(balanced_accuracy(b, y, FIXED_THRESHOLD)),
                     str(sum(x != z for x, z in zip(a, b, strict=True)))])
    out("Prose contexts with the row verifier on (rows: table, the default) beside the judge "
        "before it (rows: text), faithfulness through the generation plugin")
    out(table(["subset", "n", "AUC now", "AUC before", "BA@0.5 now", "BA@0.5 before",
               "items changed"], rows))
    out(f"contexts read as rows: {parsed} of {len(items)}")


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


def judge_arguments(description: str) -> argparse.ArgumentParser:
    """A parser with the options that choose and limit the judge to measure (shared with
    ``judge_agreement_review.py``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", default="heuristic",
                        help="judge backend: heuristic (default) or openai")
    parser.add_argument("--model", help="chat model (openai backend)")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint (openai backend)")
    parser.add_argument("--embedding-model", help="embedding model (openai backend)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N items of each subset (default: all)")
    return parser


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = judge_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["groundedness", "relevancy"],
                        help="run one of the two measurements")
    parser.add_argument("--diagnostics", action="store_true",
                        help="also rank by 0/1 verdicts and (heuristic judge) by each signal")
    parser.add_argument("--fit", action="store_true",
                        help="fit the heuristic judge's support weights on BEGIN WoW dev and "
                             "print them (paste into core/evalharness/judge/heuristic.py)")
    args = parser.parse_args(argv)
    if args.fit:
        fit_report(out)
        return 0
    judge = make_judge(args)
    try:
        beats = True
        if args.only != "relevancy":
            beats = groundedness_report(judge, args.limit, out, args.diagnostics)
            out("")
            row_linking_report(judge, args.limit, out)
            out("")
        if args.only != "groundedness":
            relevancy_report(judge, args.limit, out)
    finally:
        judge.close()
    if not beats:
        out("\nNOTE: the judge does not beat the naive judge on every subset in ROC-AUC and "
            "balanced accuracy.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
