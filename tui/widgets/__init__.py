"""Reusable widgets: the timeline, the memory chart, a sortable table, a level's panel."""

from tui.widgets.levelpanel import LevelPanel
from tui.widgets.memchart import MemoryChart
from tui.widgets.table import SortableTable
from tui.widgets.timeline import Timeline

__all__ = ["LevelPanel", "MemoryChart", "SortableTable", "Timeline"]
