"""Every requirement is bounded to the major versions CI tests: an upper bound on each one, in
the dependencies, every extra and the build requirements, stopping right after the major that
is installed here."""

from __future__ import annotations

import importlib.metadata
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from conftest import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirements() -> list[tuple[str, Requirement]]:
    out = [("build-system", Requirement(r)) for r in PROJECT["build-system"]["requires"]]
    out += [("dependencies", Requirement(r)) for r in PROJECT["project"]["dependencies"]]
    for extra, reqs in PROJECT["project"]["optional-dependencies"].items():
        out += [(f"extra {extra!r}", Requirement(r)) for r in reqs]
    return out


REQUIREMENTS = _requirements()
TESTED = {Requirement(r).name for r in PROJECT["project"]["dependencies"]
          + PROJECT["project"]["optional-dependencies"]["dev"]}
"""What CI installs: the dependencies and the dev extra (which holds every other extra but the
benchmarks' reference libraries)."""
CHECKED = [(w, r) for w, r in REQUIREMENTS if r.name in TESTED]


def upper_bound(req: Requirement) -> Version | None:
    """The version a requirement stops before (``<`` or ``<=``; ``==`` pins), or ``None``."""
    bounds = [Version(s.version) for s in req.specifier if s.operator in ("<", "<=", "==")]
    return min(bounds) if bounds else None


def next_breaking(version: Version) -> Version:
    """The first release after ``version`` that may break it: the next major, or for 0.x the
    next minor."""
    major, minor = (version.release + (0,))[:2]
    return Version(f"{major + 1}") if major else Version(f"0.{minor + 1}")


def test_next_breaking():
    assert next_breaking(Version("2.4.6")) == Version("3")
    assert next_breaking(Version("0.17.6")) == Version("0.18")
    assert next_breaking(Version("30.30.0")) == Version("31")


@pytest.mark.parametrize(("where", "req"), REQUIREMENTS, ids=[f"{w}:{r}" for w, r in REQUIREMENTS])
def test_every_requirement_has_an_upper_bound(where, req):
    assert upper_bound(req) is not None, (
        f"pyproject.toml, {where}: {req} has no upper bound; add `,<N` where N is the next "
        "major release after the one CI tests (for 0.x, the next minor)")


@pytest.mark.parametrize(("where", "req"), CHECKED, ids=[f"{w}:{r}" for w, r in CHECKED])
def test_the_bound_admits_the_tested_major_and_no_later_one(where, req):
    """The release installed here satisfies the requirement and its upper bound is the very
    next major: a bound one major further would admit a release nobody ran."""
    installed = Version(importlib.metadata.version(req.name))
    bound = upper_bound(req)
    assert req.specifier.contains(installed, prereleases=True), (
        f"pyproject.toml, {where}: {req} excludes the installed {req.name} {installed}")
    assert bound == next_breaking(installed), (
        f"pyproject.toml, {where}: {req} stops at {bound}, but CI tests {req.name} "
        f"{installed}: the bound should be <{next_breaking(installed)}")
