"""How much memory and time building the reports of a large run takes: every result in memory
(the old way) against the results streamed from ``results.jsonl`` (the way a run does it now).

A real run of the shop scenario (``evalharness scenario scenarios/shop.yaml --no-headroom``,
51 cases) is replicated into a synthetic run of N cases: its ``results.jsonl`` lines copied
with new unique case ids (and judgment record ids), a matching cases file, and a scenario that
replays recorded traces (so no system is ever called). Then, each in a fresh interpreter whose
wall time and peak resident memory (``os.wait4``'s ``ru_maxrss``) are measured, the reports
(report.json, .md and .html) are built and written:

* ``old``: ``read_results`` (every ``CaseResult`` at once) + ``build_report`` +
  ``write_reports``, as ``evalharness scenario`` did before the results were streamed;
* ``new``: ``Results.open`` (a lazily-read view: one pass keeps a few facts per case) +
  ``build_report`` + ``write_reports``, as a run does it now.

With ``--ref REF`` (e.g. ``HEAD``) the old way runs the code of that git revision (exported
with ``git archive``), so the comparison is against the code before the change too. The two
ways' report.json must be equal but for the ``run`` block (checked and printed).

    python benchmarks/report_memory.py                        # --sizes 10000 100000
    python benchmarks/report_memory.py --sizes 10000 100000 275000 --ref HEAD

Printed per size and way: seconds (the whole child; the reports alone, and their CPU time:
steadier on a shared machine), the child's peak
RSS, its RSS once the scenario is loaded (its cases are in memory either way), the peak RSS
while the reports are built (``VmHWM``, reset after loading), and what that adds per case:
(report peak - loaded) / N. Target: the new way adds a small footprint per case (under 1 KB
of aggregation state), and takes no longer than the old way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SHOP_YAML = ROOT / "scenarios" / "shop.yaml"

_RECORD_ID = re.compile(rb'"id":"([0-9a-f]{17,})"')
"""A judgment record's id (:func:`evalharness.judge.base.new_id`): made unique per copy, as a
real run of N cases would have them."""

# ---------------------------------------------------------------------------------------------
# The synthetic run
# ---------------------------------------------------------------------------------------------


def shop_run(work: Path) -> Path:
    """A real run of the shop scenario without headroom; its output folder."""
    out = work / "shop-run"
    if not (out / "results.jsonl").is_file():
        command = [sys.executable, "-m", "evalharness.cli", "scenario", str(SHOP_YAML),
                   "--out", str(out), "--no-headroom", "-q"]
        code = subprocess.run(command, cwd=ROOT).returncode
        if code not in (0, 1):
            raise SystemExit(f"the shop run failed with exit code {code}")
    return out


def write_run(shop: Path, folder: Path, n: int) -> Path:
    """``cases.jsonl``, ``traces.jsonl``, ``results.jsonl`` and ``scenario.yaml`` of a run of
    ``n`` cases copied from the shop run's lines; the scenario's path."""
    folder.mkdir(parents=True, exist_ok=True)
    templates = []
    cases = {}
    for line in (shop / "results.jsonl").read_bytes().splitlines():
        record = json.loads(line)
        case_id = record["case"]["id"]
        quoted = json.dumps(case_id).encode()
        assert line.count(quoted) >= 2, "a result line names its case in case and trace"
        template = _RECORD_ID.sub(b'"id":"\\1-\x01"', line.replace(quoted, b'"\x00"'))
        templates.append((case_id, template))
        cases[case_id] = record["case"]
    with open(folder / "cases.jsonl", "w", encoding="utf-8") as fc, \
            open(folder / "results.jsonl", "wb") as fr:
        for i in range(n):
            case_id, template = templates[i % len(templates)]
            copy = i // len(templates)
            new_id = f"{case_id}~{copy:06d}"
            fc.write(json.dumps({**cases[case_id], "id": new_id}, ensure_ascii=False) + "\n")
            fr.write(template.replace(b"\x00", new_id.encode())
                     .replace(b"\x01", str(copy).encode()) + b"\n")
    first = templates[0][0] + "~000000"
    (folder / "traces.jsonl").write_text(json.dumps({"case_id": first}) + "\n")
    shop_spec = yaml.safe_load(SHOP_YAML.read_text(encoding="utf-8"))
    base = SHOP_YAML.parent
    spec = {
        "name": f"shop-report-{n}",
        "cases": "cases.jsonl",
        "traces": "traces.jsonl",
        "database": {**shop_spec["database"],
                     "build": str((base / shop_spec["database"]["build"]).resolve())},
        "corpus": str((base / shop_spec["corpus"]).resolve()),
        "judge": {"backend": "heuristic"},
        "pipeline": shop_spec["pipeline"],
        "evaluators": shop_spec["evaluators"],
        "verdicts": shop_spec.get("verdicts", {}),
        "gates": shop_spec["gates"],
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# The child: build and write the reports one way
# ---------------------------------------------------------------------------------------------


def child(way: str, folder: Path, out: Path) -> None:
    """Build and write the reports of the run in ``folder`` into ``out``; print seconds and
    the peak RSS after loading the scenario as one JSON line."""
    from evalharness.report import build_report, write_reports
    from evalharness.runner import RunOutcome, prepare_context
    from evalharness.scenario import load_scenario

    scenario = load_scenario(folder / "scenario.yaml")
    out.mkdir(parents=True, exist_ok=True)
    context = prepare_context(scenario, out)
    loaded_mb = _status("VmRSS")
    phase = _reset_peak()  # from here on, VmHWM is the peak of building the reports
    start, cpu = time.perf_counter(), time.process_time()
    warnings: list[str] = []
    if way == "old":
        from evalharness.runner import read_results

        order = {c.id: i for i, c in enumerate(scenario.cases)}
        results = sorted((r for r in read_results(folder / "results.jsonl", warnings=warnings)
                          if r.case.id in order), key=lambda r: order[r.case.id])
    else:
        from evalharness.results import Results

        results = Results.open(folder / "results.jsonl",
                               order=[c.id for c in scenario.cases], warnings=warnings)
    outcome = RunOutcome(out_dir=out, results=results, context=context,
                         started_at="", duration_s=0.0, warnings=warnings)
    report = build_report(scenario, outcome)
    write_reports(report, out, outcome.results)
    context.judge.close()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak_mb = _status("VmHWM") if phase else resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"report_s": seconds, "report_cpu_s": cpu, "loaded_mb": loaded_mb,
                      "report_peak_mb": peak_mb}))


def _status(field: str) -> float:
    """A memory figure of this process from /proc/self/status, in MB."""
    for text in Path("/proc/self/status").read_text().splitlines():
        if text.startswith(field + ":"):
            return int(text.split()[1]) / 1024
    raise SystemExit(f"no {field} in /proc/self/status (Linux only)")


def _reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; whether that worked."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def export(ref: str, work: Path) -> Path:
    """The core and plugins of git revision ``ref``, for ``PYTHONPATH``."""
    target = work / f"code-{re.sub(r'[^A-Za-z0-9_.-]', '_', ref)}"
    if not target.is_dir():
        archive = subprocess.run(["git", "archive", ref, "core", "plugins"], cwd=ROOT,
                                 check=True, capture_output=True).stdout
        target.mkdir(parents=True)
        tar = work / "code.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as fh:
            fh.extractall(target, filter="data")
        tar.unlink()
    return target


def measure(way: str, folder: Path, out: Path, code: Path | None) -> dict:
    """Run the child in a fresh interpreter: its wall time, peak RSS and its own figures."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code / "core"), str(code / "plugins"),
                                             env.get("PYTHONPATH", "")])
    command = [sys.executable, str(Path(__file__).resolve()), "--child", way, str(folder),
               str(out)]
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the {way} way failed for {folder}")
    figures = json.loads(output.strip().splitlines()[-1])
    return {"wall_s": wall, "peak_mb": usage.ru_maxrss / 1024, **figures}


def same_report(a: Path, b: Path) -> bool:
    """Whether two report.json are equal but for the ``run`` block."""
    one, two = (json.loads((p / "report.json").read_text(encoding="utf-8")) for p in (a, b))
    one.pop("run"), two.pop("run")
    return one == two


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                        help="Numbers of cases (default: 10000 100000).")
    parser.add_argument("--ref", help="Run the old way with the code of this git revision "
                                      "(e.g. HEAD) instead of the working tree's.")
    parser.add_argument("--ways", nargs="+", default=["old", "new"], choices=["old", "new"])
    parser.add_argument("--keep", action="store_true",
                        help="Keep the generated runs and reports (printed).")
    parser.add_argument("--child", nargs=3, metavar=("WAY", "FOLDER", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        way, folder, out = args.child
        child(way, Path(folder), Path(out))
        return 0
    work = Path(tempfile.mkdtemp(prefix="evalharness-report-memory-"))
    try:
        shop = shop_run(work)
        code = export(args.ref, work) if args.ref else None
        print(f"reports of a synthetic run (shop results replicated), heuristic judge; "
              f"old way: {'git ' + args.ref if args.ref else 'working tree'}; "
              f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}\n")
        print(f"{'cases':>8} {'way':>4} {'wall s':>8} {'report s':>9} {'CPU s':>7} "
              f"{'peak MB':>8} {'loaded MB':>10} {'report peak MB':>15} {'KB/case':>8}")
        ok = True
        for n in sorted(args.sizes):
            folder = work / f"run-{n}"
            write_run(shop, folder, n)
            outs = {}
            for way in args.ways:
                outs[way] = folder / f"out-{way}"
                m = measure(way, folder, outs[way], code if way == "old" else None)
                per_case = (m["report_peak_mb"] - m["loaded_mb"]) * 1024 / n
                print(f"{n:>8} {way:>4} {m['wall_s']:>8.1f} {m['report_s']:>9.1f} "
                      f"{m['report_cpu_s']:>7.1f} {m['peak_mb']:>8.0f} {m['loaded_mb']:>10.0f} "
                      f"{m['report_peak_mb']:>15.0f} {per_case:>8.2f}", flush=True)
            if len(outs) == 2:
                equal = same_report(outs["old"], outs["new"])
                ok = ok and equal
                print(f"{'':>8} report.json of both ways equal (but `run`): "
                      f"{'yes' if equal else 'NO'}", flush=True)
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if args.keep:
            print(f"\nkept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
