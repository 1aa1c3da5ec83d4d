"""Packaging and layout: core/ and plugins/ are folders, never import names; lint is clean."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def test_core_and_plugins_are_not_importable(tmp_path):
    assert not (ROOT / "core" / "__init__.py").exists()
    assert not (ROOT / "plugins" / "__init__.py").exists()
    probe = ("import importlib.util as u, json; "
             "print(json.dumps([list(getattr(u.find_spec(n), 'submodule_search_locations', None)"
             " or []) if u.find_spec(n) else [] for n in ('core', 'plugins')]))")
    res = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    for locations in json.loads(res.stdout):
        assert not any(loc.startswith(str(ROOT)) for loc in locations), locations


def test_public_plugin_packages_import():
    for name in ("evalharness_router", "evalharness_sql", "evalharness_retrieval",
                 "evalharness_generation"):
        module = importlib.import_module(name)
        assert module.__doc__ and module.__version__


def test_ruff_is_clean_and_bans_core_and_plugins_imports(tmp_path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    res = subprocess.run([ruff, "check", "core", "plugins", "tests", "scenarios"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import core.evalharness\n")
    res = subprocess.run([ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                         capture_output=True, text=True)
    assert "TID251" in res.stdout


@pytest.mark.parametrize("path", ["README.md", "docs/architecture.md", "docs/scenario.md",
                                  "docs/hooks.md", "docs/writing-a-plugin.md", ".ci/run"])
def test_documents_exist(path):
    assert (ROOT / path).is_file() and (ROOT / path).read_text().strip()
