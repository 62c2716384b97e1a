"""The agent door's roots (`tracekit mcp --root`): a run is read only where it, and
every trace file in it, lies under one of them once every link is resolved."""

from __future__ import annotations

from pathlib import Path

from tracekit.errors import TracekitError


class Roots:
    """The folders the server may read runs from, resolved once at start."""

    def __init__(self, roots: list[str | Path]):
        if not roots:
            raise TracekitError("tracekit mcp: pass at least one --root DIR")
        self.roots: list[Path] = []
        for r in roots:
            p = Path(r).expanduser()
            if not p.is_dir():
                raise TracekitError(f"--root {r}: not a folder")
            self.roots.append(p.resolve())
        self.first = self.roots[0]

    def inside(self, path: Path) -> bool:
        return any(path == r or path.is_relative_to(r) for r in self.roots)

    def run(self, run: str) -> str:
        """The resolved path of `run` (relative to the first root, or absolute), refused
        unless it and every trace file in it lie under a root."""
        from tracekit.ingest.discover import find_trace_files

        if not run or "\x00" in run:
            raise TracekitError("run: pass a run folder or trace file under the roots")
        p = Path(run).expanduser()
        if not p.is_absolute():
            p = self.first / p
        try:
            real = p.resolve(strict=True)
        except (OSError, RuntimeError):
            raise TracekitError(f"run {run!r}: no such folder or file under the roots") from None
        if not self.inside(real):
            raise TracekitError(f"run {run!r} is outside the server's roots; it is not read")
        _, files = find_trace_files([real])
        for f in files:  # a link inside the run that leads out
            if not self.inside(f.resolve()):
                raise TracekitError(
                    f"run {run!r}: {f.name} leads outside the server's roots; it is not read"
                )
        return str(real)

    def names(self) -> list[str]:
        return [str(r) for r in self.roots]
