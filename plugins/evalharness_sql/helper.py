"""A helper process's main: it serves the normal-form and chunk requests of
:mod:`evalharness_sql.workers`, running chunks through the cascade
(:func:`evalharness_sql.parallel.check_chunk`). It sits above both, so that the cascade and
the helpers' plumbing never import each other.
"""

from __future__ import annotations

from evalharness_sql import parallel, workers


def main() -> None:
    """Answer requests on stdin until it closes."""
    workers.serve(chunk=parallel.check_chunk)
