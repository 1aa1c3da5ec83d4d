"""Importing a user's ``.py`` file (a local plugin, a system under test) under a private name."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CONTENT = "__evalharness_sha256__"
"""The attribute of an imported module holding the sha256 of the file it was imported from."""


def import_file(path: Path, prefix: str) -> ModuleType:
    """Import ``path`` — a ``.py`` file, or a package folder (one with ``__init__.py``) — as
    ``<prefix>_<stem>_<hash of its absolute path>``, once per content.

    The module is cached in ``sys.modules`` and imported again only when the file's bytes
    changed, or for a package any of its ``.py`` files (a notebook user who edits the system
    adapter and runs again gets the new code); an exception raised while importing
    propagates (and leaves no half-imported module behind) for the caller to name in its own
    terms. A package's modules import each other relatively (``from .router import route``)
    and live under the private name too, so this copy shares nothing with another import of
    the same folder.
    """
    path = Path(path).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"{prefix}_{path.stem}_{digest}"
    package = path.is_dir()
    if package:
        content = _digest(path_sources(path))
    else:
        try:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            content = None  # let the import below say what is wrong
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, CONTENT, None) == content:
        return cached
    spec = (importlib.util.spec_from_file_location(
                name, path / "__init__.py", submodule_search_locations=[str(path)])
            if package else importlib.util.spec_from_file_location(name, path))
    if spec is None or spec.loader is None or (package and not (path / "__init__.py").is_file()):
        raise ImportError(f"{path} cannot be imported as a Python module"
                          + (" (a package folder needs an __init__.py)" if package else ""))
    module = importlib.util.module_from_spec(spec)
    setattr(module, CONTENT, content)
    _forget_submodules(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        _forget_submodules(name)
        if cached is not None:
            sys.modules[name] = cached
        else:
            del sys.modules[name]
        raise
    return module


def _forget_submodules(name: str) -> None:
    """Drop ``name.*`` from ``sys.modules`` (a package imported again imports them again)."""
    for sub in [n for n in sys.modules if n.startswith(name + ".")]:
        del sys.modules[sub]


def is_path(target: str) -> bool:
    """Whether the ``target`` of ``target:function`` is a path (a ``.py`` file or a package
    folder, relative to the scenario) rather than a dotted module name."""
    return target.endswith(".py") or "/" in target or "\\" in target


def path_sources(path: Path) -> list[Path]:
    """The files of a system or plugin named by path: the file, or every ``.py`` file of the
    package folder."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
    return [path]


def module_sources(module: str, base: Path) -> list[Path]:
    """The source files of module ``module`` as found in folder ``base`` (where a
    ``module:function`` system is imported from first): the module's file, or every ``.py``
    file of the package it belongs to, so an edit to any of them is noticed. A namespace
    package (a plain folder) is not a package of its own: ``shop.assistant`` with ``shop/`` a
    plain folder is the ``shop/assistant/`` package. A module found elsewhere (an installed
    package) has no sources here.

    >>> import tempfile, pathlib
    >>> base = pathlib.Path(tempfile.mkdtemp())
    >>> (base / "bot").mkdir(); (base / "bot" / "__init__.py").write_text("")
    0
    >>> (base / "bot" / "router.py").write_text("x = 1")
    5
    >>> [p.name for p in module_sources("bot.router", base)]
    ['__init__.py', 'router.py']
    >>> (base / "kit" / "bot").mkdir(parents=True); (base / "kit" / "tool.py").write_text("")
    0
    >>> (base / "kit" / "bot" / "__init__.py").write_text("")
    0
    >>> [p.relative_to(base).as_posix() for p in module_sources("kit.bot", base)]
    ['kit/bot/__init__.py']
    >>> module_sources("json", base)
    []
    """
    from importlib.machinery import PathFinder

    parts = module.split(".")
    locations = [str(base)]
    for depth in range(len(parts)):
        spec = PathFinder.find_spec(".".join(parts[:depth + 1]), locations)
        if spec is None:
            return []
        if spec.submodule_search_locations is None:  # a module file
            return [Path(spec.origin)] if spec.origin and spec.origin.endswith(".py") else []
        namespace = spec.loader is None or spec.origin is None
        if not namespace or depth == len(parts) - 1:
            return sorted(p for folder in spec.submodule_search_locations
                          for p in path_sources(Path(folder)))
        locations = list(spec.submodule_search_locations)
    return []


def import_module(module: str, base: Path) -> ModuleType:
    """Import ``module`` with ``base`` first on ``sys.path`` (a ``module:function`` system
    beside its scenario).

    When the module is found in ``base``, a copy already imported is used only if it was
    imported from there and none of its package's files changed since; otherwise the package
    is imported afresh (two scenarios in one process each run their own ``bot`` package, and
    a notebook user who edits any module of it gets the new code). A module found elsewhere
    (an installed package) is imported as usual.
    """
    base = Path(base).resolve()
    folder = str(base)
    if sys.path[:1] != [folder]:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    sources = module_sources(module, base)
    if sources:
        content = _digest(sources)
        loaded = sys.modules.get(module)
        if loaded is not None:
            stamp = getattr(loaded, CONTENT, None)
            here = getattr(loaded, "__file__", None) in {str(p) for p in sources}
            if here and stamp in (None, content):
                setattr(loaded, CONTENT, content)
                return loaded
            top = module.split(".")[0]
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]
        importlib.invalidate_caches()
        imported = importlib.import_module(module)
        setattr(imported, CONTENT, content)
        return imported
    return importlib.import_module(module)


def _digest(paths: list[Path]) -> str | None:
    """One sha256 over the paths and contents of ``paths`` (None if one cannot be read)."""
    digest = hashlib.sha256()
    try:
        for path in paths:
            digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()
