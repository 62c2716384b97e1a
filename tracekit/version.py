"""tracekit's version, from the installed distribution (a source tree without install
says so)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tracekit")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"
