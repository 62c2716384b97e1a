"""The names older code imports from here (the tests, `benchmarks/tui.py`): the session
is `tui.session`, the drill-down's queries `tui.queries`, a timeline frame `tui.frame`,
a finding's evidence `tui.evidence`."""

from tui.evidence import evidence
from tui.frame import Frame
from tui.session import Session

__all__ = ["Frame", "Session", "evidence"]
