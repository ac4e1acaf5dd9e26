"""The package version, the one source: pyproject.toml reads it at build time (without
importing tilefuse, which imports torch) and tilefuse.__version__ re-exports it."""

__version__ = "0.1.0"
