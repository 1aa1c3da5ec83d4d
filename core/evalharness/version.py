"""evalharness's version: a module of its own, so that any module can name it without
importing the package (whose ``__init__`` reaches the whole API)."""

__version__ = "0.2.0"
