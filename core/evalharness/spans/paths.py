"""Which files a ``traces.path`` names: one file, every complete file of a folder, or the
files a glob matches (docs/traces.md, "One file, a folder or a glob").

A folder is what ``evalharness traces receive`` writes into: its files are read in name
order (the receiver names them so that this is the order they were written), skipping the
file being written (``*.part``), hidden files and subfolders, and empty files. A glob
(``received/*.jsonl``) is read the same way, in name order.
"""

from __future__ import annotations

import glob
from pathlib import Path

from evalharness.context import file_hint, not_a_file
from evalharness.errors import InputError

PART = ".part"
"""The suffix of a file still being written: never read."""

_GLOB_CHARS = frozenset("*?[")


def is_glob(text: str) -> bool:
    """Whether ``text`` is a glob pattern rather than a path.

    >>> is_glob("received/*.jsonl"), is_glob("received/"), is_glob("spans-[0-9].pb")
    (True, False, True)
    """
    return any(c in _GLOB_CHARS for c in text)


def complete(path: Path) -> bool:
    """Whether a file found in a folder or by a glob is one to read: not being written
    (``*.part``), not hidden, a regular file, not empty."""
    if path.name.endswith(PART) or path.name.startswith("."):
        return False
    try:
        return not_a_file(path) is None and path.stat().st_size > 0
    except OSError:  # removed between listing and looking
        return False


def trace_files(path: Path | str, *, what: str = "traces file") -> list[Path]:
    """The files ``path`` names, in the order they are read: ``[path]`` for a file; the
    complete files of a folder (not recursive) or of a glob's matches, sorted by name.

    An error (:class:`InputError`) says what was looked at and what would be valid: a path
    that does not exist, a folder or a glob without a complete file, a file that cannot be
    read.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> for name in ("b.jsonl", "a.pb", "c.jsonl.part", ".lock"):
    ...     _ = (folder / name).write_text("x")
    >>> [p.name for p in trace_files(folder)]
    ['a.pb', 'b.jsonl']
    >>> [p.name for p in trace_files(folder / "*.jsonl")]
    ['b.jsonl']
    >>> import shutil; shutil.rmtree(folder)
    """
    path = Path(path)
    text = str(path)
    problem = not_a_file(path)
    if problem is None:
        return [path]
    if problem == "is a directory":
        found = sorted((p for p in path.iterdir() if complete(p)), key=lambda p: p.name)
        if not found:
            raise InputError(f"{what} folder {text} holds no complete trace file (files being "
                             f"written, `*{PART}`, hidden files, subfolders and empty files "
                             "are skipped); point at a folder `evalharness traces receive` "
                             "has written to, a file, or a glob like `received/*.jsonl`")
        return found
    if problem == "does not exist" and is_glob(text):
        found = sorted((Path(p) for p in glob.glob(text) if complete(Path(p))),
                       key=lambda p: (str(p.parent), p.name))
        if not found:
            raise InputError(f"{what} glob {text!r} matches no complete trace file (files "
                             f"being written, `*{PART}`, hidden and empty files are skipped); "
                             "check the pattern, or give a file or a folder")
        return found
    if problem == "does not exist":
        raise InputError(f"{what} {text} does not exist; give a file of exported spans, a "
                         "folder of them (what `evalharness traces receive` writes) or a "
                         "glob like `received/*.jsonl`")
    raise InputError(f"{what} {text} {problem}; {file_hint(problem)}")
