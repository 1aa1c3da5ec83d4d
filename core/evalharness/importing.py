"""Importing a user's ``.py`` file (a local plugin, a system under test) under a private name."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_file(path: Path, prefix: str) -> ModuleType:
    """Import ``path`` once as ``<prefix>_<stem>_<hash of its absolute path>``.

    The module is cached in ``sys.modules``; an exception raised while importing propagates
    (and leaves no half-imported module behind) for the caller to name in its own terms.
    """
    path = Path(path).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"{prefix}_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
