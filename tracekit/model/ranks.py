"""Rank lists written as ranges — the one way every output names a set of ranks:
[0, 1, 2, 3, 7, 9, 10] → "0–3, 7, 9–10" (a 64-rank finding reads "0–62", not 63
numbers). `dash` / `sep` give the `--ranks` syntax ("0-3,7,9-10") where the text must
paste back into the command line."""

from __future__ import annotations

from collections.abc import Iterable


def ranges(values: Iterable[int] | None, dash: str = "–", sep: str = ", ") -> str:
    """The ranks as sorted runs of consecutive numbers; "" for none."""
    runs: list[list[int]] = []
    for r in sorted({int(v) for v in values or ()}):
        if runs and runs[-1][1] == r - 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return sep.join(str(a) if a == b else f"{a}{dash}{b}" for a, b in runs)
