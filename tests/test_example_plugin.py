"""Tests of the example plugin package in docs/examples/evalharness-chunk-length.

The package is pip-installed into a temporary folder and found through its ``evalharness``
entry point, exactly as a user's installed plugin would be; its functions are also checked
directly on hand-computed values.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from evalharness import Case, RetrieverStep
from evalharness.context import Chunk, EvalContext
from evalharness.plugins import load_plugins

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "evalharness-chunk-length"
MODULE_FILE = EXAMPLE / "evalharness_chunk_length" / "__init__.py"


def _load_module() -> ModuleType:
    name = "evalharness_chunk_length_under_test"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, MODULE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


chunk_length = _load_module()


def _run(args: list[str], pythonpath: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("EVALHARNESS_LOAD_PLUGINS", None)  # load every installed plugin
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example package pip-installed into a fresh folder; put it on PYTHONPATH to use it."""
    tmp = tmp_path_factory.mktemp("chunk_length")
    # Build from a copy: an in-tree setuptools build would leave build/ and *.egg-info in docs/.
    source = tmp / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                    "__pycache__"))
    target = tmp / "site"
    # The dev extra brings setuptools and wheel, so the build needs no download.
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--quiet", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip could not install the example plugin:\n{proc.stderr}"
    assert (target / "evalharness_chunk_length" / "__init__.py").is_file()
    return target


# --------------------------------------------------------------------------------------------
# The module's functions, on hand-computed values
# --------------------------------------------------------------------------------------------


def test_docstring_examples():
    assert doctest.testmod(chunk_length).failed == 0


def test_metrics_of_texts():
    row = chunk_length.chunk_length_metrics(["a" * 100, "b" * 300, "c" * 250], max_chars=250)
    assert row["mean_chunk_chars"].value == pytest.approx(650 / 3)
    assert row["mean_chunk_chars"].details["lengths"] == [100, 300, 250]
    assert row["within_limit"].value == pytest.approx(2 / 3)  # 250 <= 250 counts as within
    assert row["within_limit"].details == {"max_chars": 250, "over_limit": 1}


def test_no_chunks_is_an_error_not_a_number():
    row = chunk_length.chunk_length_metrics([], max_chars=10)
    assert set(row) == set(chunk_length.METRICS)
    assert all(v.value is None and v.error == "the retriever returned no chunks"
               for v in row.values())


def test_texts_come_from_the_step_then_the_corpus():
    corpus = {"d1": Chunk(id="d1", text="1234"), "d2": Chunk(id="d2", text="12")}
    assert chunk_length.chunk_texts(RetrieverStep(ids=["d1"], texts=["xyz"]), corpus) == ["xyz"]
    assert chunk_length.chunk_texts(RetrieverStep(ids=["d2", "d1"]), corpus) == ["12", "1234"]
    reason = chunk_length.chunk_texts(RetrieverStep(ids=["d1", "nope"]), corpus)
    assert reason == "the step records no texts and the corpus lacks chunk ids: nope"
    assert "no corpus" in chunk_length.chunk_texts(RetrieverStep(ids=["d1"]), {})


def test_evaluator_through_a_plugin_host():
    host = load_plugins(modules=[chunk_length], entry_points=False)
    plugin = chunk_length.__name__
    registered = host.registry.evaluator("retriever", "chunk_length")
    assert registered is not None and registered.plugin == plugin
    settings = chunk_length.ChunkLengthSettings(max_chars=3)
    batch = [(Case(id="a", question="?"), RetrieverStep(ids=["x", "y"], texts=["ab", "abcd"])),
             (Case(id="b", question="?"), RetrieverStep(ids=["z"]))]
    rows = registered.item.evaluate(batch=batch, settings=settings, context=EvalContext())
    assert rows[0]["mean_chunk_chars"].value == 3.0
    assert rows[0]["within_limit"].value == 0.5
    assert rows[1]["within_limit"].error == "the step records no texts and the scenario has no corpus"
    # Its metrics are declared: the default verdict, the reviewer's question, the scale.
    within = registered.item.declaration("within_limit")
    assert within.verdict == ">= 0.8" and within.question.startswith("Are the retrieved")
    assert registered.item.declaration("mean_chunk_chars").unit == "chars"


# --------------------------------------------------------------------------------------------
# Installed through its entry point
# --------------------------------------------------------------------------------------------


def test_installed_plugin_is_listed(installed: Path, tmp_path: Path):
    proc = _run(["-m", "evalharness.cli", "plugins", "--json"], installed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    assert "chunk_length" in plugins, sorted(plugins)
    plugin = plugins["chunk_length"]
    assert plugin["source"] == "entry point"
    assert plugin["version"] == "0.1.0"
    assert plugin["hooks"] == ["register_evaluators"]
    [evaluator] = plugin["evaluators"]
    assert evaluator["name"] == "chunk_length"
    assert evaluator["component"] == "retriever"
    assert evaluator["metrics"] == ["mean_chunk_chars", "within_limit"]
    assert evaluator["settings"]["max_chars"]["default"] == 600


def _jsonl(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_installed_plugin_runs_in_a_scenario(installed: Path, tmp_path: Path):
    _jsonl(tmp_path / "corpus.jsonl", [{"id": "d1", "text": "x" * 400},
                                       {"id": "d2", "text": "y" * 200}])
    _jsonl(tmp_path / "traces.jsonl", [
        # texts recorded in the trace: lengths 100 and 300 -> mean 200, 1 of 2 within 250
        {"case_id": "q1", "retriever": {"ids": ["a", "b"], "texts": ["a" * 100, "b" * 300]}},
        # one text of 50 -> mean 50, 1 of 1 within
        {"case_id": "q2", "retriever": {"ids": ["c"], "texts": ["c" * 50]}},
        # no texts: looked up in the corpus, 400 and 200 -> mean 300, 1 of 2 within
        {"case_id": "q3", "retriever": {"ids": ["d1", "d2"]}},
        # no texts and an id the corpus lacks -> an error with its reason, not a number
        {"case_id": "q4", "retriever": {"ids": ["missing"]}},
    ])
    (tmp_path / "scenario.yaml").write_text(
        "name: chunk-length-test\n"
        "cases:\n"
        + "".join(f"  - {{id: q{i}, question: 'question {i}?'}}\n" for i in range(1, 5))
        + "traces: traces.jsonl\n"
        "corpus: corpus.jsonl\n"
        "pipeline:\n"
        "  retriever: {}\n"
        "evaluators:\n"
        "  retriever:\n"
        "    - chunk_length: {max_chars: 250}\n"
        "gates:\n"
        "  # one case of four has no chunk texts: an error the gate must allow explicitly\n"
        "  - {gate: retriever.within_limit >= 0.6, max_error_rate: 0.25}\n",
        encoding="utf-8")
    out = tmp_path / "run"
    proc = _run(["-m", "evalharness.cli", "scenario", "scenario.yaml", "--out", str(out),
                 "--quiet"], installed, tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    metrics = report["components"]["retriever"]["metrics"]
    assert metrics["mean_chunk_chars"]["mean"] == pytest.approx((200 + 50 + 300) / 3)
    assert metrics["mean_chunk_chars"]["n"] == 3
    assert metrics["within_limit"]["mean"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert metrics["within_limit"]["errors"] == 1
    assert metrics["within_limit"]["error_reasons"] == {
        "the step records no texts and the corpus lacks chunk ids: missing": 1}
    [run] = report["components"]["retriever"]["evaluators"]
    assert (run["plugin"], run["version"], run["settings"]) == ("chunk_length", "0.1.0",
                                                                 {"max_chars": 250})
    assert report["gates"][0]["passed"] is True
