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
    """Import ``path`` as ``<prefix>_<stem>_<hash of its absolute path>``, once per content.

    The module is cached in ``sys.modules`` and imported again only when the file's bytes
    changed (a notebook user who edits the system adapter and runs again gets the new code);
    an exception raised while importing propagates (and leaves no half-imported module behind)
    for the caller to name in its own terms.
    """
    path = Path(path).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"{prefix}_{path.stem}_{digest}"
    try:
        content = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        content = None  # let the import below say what is wrong
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, CONTENT, None) == content:
        return cached
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    setattr(module, CONTENT, content)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if cached is not None:
            sys.modules[name] = cached
        else:
            del sys.modules[name]
        raise
    return module
