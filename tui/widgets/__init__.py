"""Reusable widgets: the timeline, the memory chart, a sortable table."""

from tui.widgets.memchart import MemoryChart
from tui.widgets.table import SortableTable
from tui.widgets.timeline import Timeline

__all__ = ["MemoryChart", "SortableTable", "Timeline"]
