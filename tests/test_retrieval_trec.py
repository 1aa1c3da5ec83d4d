"""trec_eval's own test files: our values against pytrec_eval (trec_eval's code), and the
`evalharness trec` command's output against trec_eval's expected output, line by line."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytrec_eval

from conftest import run_cli
from evalharness_retrieval import evaluate
from evalharness_retrieval.trec import TrecFormatError, read_qrels, read_run

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
TOL = 1e-9
FAMILIES = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank", "P",
            "recall", "map_cut", "ndcg_cut", "success"]
CUTS = {"P": [5, 10, 15, 20, 30, 100, 200, 500, 1000], "success": [1, 5, 10]}
MEASURES = [f"{f}_{k}" for f in ("P", "recall", "map_cut", "ndcg_cut") for k in CUTS["P"]] + [
    f"success_{k}" for k in CUTS["success"]] + ["num_ret", "num_rel", "num_rel_ret", "map",
                                                "Rprec", "recip_rank"]


def parse(path: Path, width: int, value) -> dict:
    """A plain reader, independent of the plugin's: ``qid _ docno _ ... value-column``."""
    out: dict = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        out.setdefault(fields[0], {})[fields[2]] = value(fields[width])
    return out


def reference(qrels_file: str, run_file: str, level: int = 1, complete: bool = False):
    qrels, run = parse(DATA / qrels_file, 3, int), parse(DATA / run_file, 4, float)
    if complete:  # trec_eval -c: judged queries missing from the run are empty rankings
        run = {**{q: {} for q in qrels}, **run}
    families = {m.rsplit("_", 1)[0] if m[-1].isdigit() else m for m in MEASURES}
    return pytrec_eval.RelevanceEvaluator(qrels, families, relevance_level=level).evaluate(run)


@pytest.mark.parametrize("qrels_file, run_file, level, complete", [
    ("qrels.test", "results.test", 1, False),
    ("qrels.rel_level", "results.test", 1, False),
    ("qrels.rel_level", "results.test", 2, False),
    ("qrels.rel_level", "results.test", 4, False),
    ("qrels.test", "results.trunc", 1, True),
    ("qrels.rel_level", "results.trunc", 3, True),
])
def test_trec_eval_files_equal_pytrec_eval(qrels_file, run_file, level, complete):
    ref = reference(qrels_file, run_file, level, complete)
    run, _ = read_run(DATA / run_file)
    ours = evaluate(read_qrels(DATA / qrels_file), run, MEASURES, level, per_query=True,
                    complete=complete)
    assert set(ours) == set(ref)
    for q in ref:
        for m in MEASURES:
            assert abs(ours[q][m] - ref[q][m]) <= TOL, (q, m, ours[q][m], ref[q][m])


def test_exp2_ndcg_on_trec_eval_files():
    qrels = read_qrels(DATA / "qrels.rel_level")
    run, _ = read_run(DATA / "results.test")
    relabelled = {q: {d: 2 ** g - 1 if g > 0 else g for d, g in j.items()}
                  for q, j in qrels.items()}
    ref = pytrec_eval.RelevanceEvaluator(relabelled, {"ndcg_cut"}).evaluate(run)
    ours = evaluate(qrels, run, "ndcg_exp2_cut", per_query=True)
    for q in ref:
        for k in CUTS["P"]:
            assert abs(ours[q][f"ndcg_exp2_cut_{k}"] - ref[q][f"ndcg_cut_{k}"]) <= TOL


def trec_eval_lines(name: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in (DATA / name).read_text().splitlines():
        measure, qid, value = line.split("\t")
        out[measure.strip(), qid] = line
    return out


@pytest.mark.parametrize("expected, args", [
    ("out.test", ["qrels.test", "results.test"]),
    ("out.test.a", ["qrels.test", "results.test"]),
    ("out.test.aql", ["qrels.rel_level", "results.test", "-q", "-l", "2"]),
    ("out.test.aqc", ["qrels.test", "results.trunc", "-q", "-c"]),
])
def test_trec_command_prints_what_trec_eval_prints(expected, args):
    """Every line we print is, character for character, trec_eval's line for that measure
    and query; and we print every line of trec_eval's output whose measure we have."""
    files = [str(DATA / a) if not a.startswith("-") and not a.isdigit() else a for a in args]
    theirs = trec_eval_lines(expected)
    present = [f for f in FAMILIES if any(m == f or m.rsplit("_", 1)[0] == f for m, _ in theirs)]
    measures = [x for f in ["runid", *present] for x in ("-m", f)]
    res = run_cli("trec", *files, *measures)
    assert res.code == 0, res
    ours = res.out.splitlines()
    assert ours, res
    for line in ours:
        measure, qid, _ = line.split("\t")
        assert theirs.get((measure.strip(), qid)) == line, line
    ours_keys = {(line.split("\t")[0].strip(), line.split("\t")[1]) for line in ours}
    supported = {k for k in theirs if k[0] == "runid" or k[0].rsplit("_", 1)[0] in FAMILIES
                 or k[0] in FAMILIES}
    assert supported <= ours_keys, supported - ours_keys


def test_trec_command_defaults_and_own_measures():
    res = run_cli("trec", DATA / "qrels.test", DATA / "results.test")
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0] == "runid                 \tall\tSTANDARD"
    assert "map                   \tall\t0.1785" in lines
    res = run_cli("trec", DATA / "qrels.rel_level", DATA / "results.test", "-m",
                  "ndcg_exp2_cut.5,10", "-m", "F1_10", "-m", "hit_10", "-q")
    assert res.code == 0, res
    assert [line.split("\t")[:2] for line in res.out.splitlines()][:3] == [
        ["ndcg_exp2_cut_5       ", "301"], ["ndcg_exp2_cut_10      ", "301"],
        ["F1_10                 ", "301"]]


def test_trec_command_is_listed():
    res = run_cli("--help")
    assert res.code == 0 and "trec" in res.out


@pytest.mark.parametrize("which, content, message", [
    ("qrels", "301 0 D1 1\n301 0 D2\n", "qrels.txt, line 2: expected 4 fields"),
    ("qrels", "301 0 D1 high\n", "qrels.txt, line 1: the relevance 'high' is not an integer"),
    ("qrels", "301 0 D1 1\n# c\n301 0 D1 0\n", "qrels.txt, line 3: query '301' judges 'D1' "
                                              "twice (first on line 1)"),
    ("run", "301 Q0 D1 1 2.0 r\n301 Q0 D2 2 x r\n", "run.txt, line 2: the score 'x' is not a "
                                                    "number"),
    ("run", "301 Q0 D1 1 2.0\n", "run.txt, line 1: expected 6 fields"),
    ("run", "301 Q0 D1 1 2.0 r\n\n301 Q0 D1 2 1.0 r\n", "run.txt, line 3: query '301' "
                                                       "retrieves 'D1' twice (first on line 1)"),
    ("run", "301 Q0 D1 1 nan r\n", "run.txt, line 1: the score is NaN"),
])
def test_malformed_files_exit_2_naming_file_and_line(tmp_path, which, content, message):
    files = {"qrels": "301 0 D1 1\n", "run": "301 Q0 D1 1 2.0 r\n"} | {which: content}
    (tmp_path / "qrels.txt").write_text(files["qrels"])
    (tmp_path / "run.txt").write_text(files["run"])
    res = run_cli("trec", tmp_path / "qrels.txt", tmp_path / "run.txt")
    assert res.code == 2, res
    assert message in res.err, res


def test_unknown_measure_exits_2(tmp_path):
    res = run_cli("trec", DATA / "qrels.test", DATA / "results.test", "-m", "ndcg")
    assert res.code == 2 and "unknown measure 'ndcg'" in res.err, res


def test_readers_raise_with_file_and_line(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("1 0 a 1\n1 0 b\n")
    with pytest.raises(TrecFormatError) as info:
        read_qrels(path)
    assert info.value.line == 2 and info.value.path == str(path)
