"""tracekit's version: the one place it is written. pyproject.toml reads it
(`[tool.setuptools.dynamic]`), `tracekit --version` prints it, baselines record it."""

__version__ = "0.2.0"

# what `pip install` takes: "tracekit" on the package index is an unrelated project
DIST_NAME = "tracekit-torch"
