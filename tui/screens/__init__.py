"""The screens: one per digit key (1 overview … 8 regions), plus the pages Enter opens (and
the what-if page, `w` on the overview; the critical path's, `c` on the timeline). A screen
is made with the session and asks the app for the rest by message (`tui.messages`); the
table screens share `table.TableScreen`."""

from tui.screens.collectives import CollectivesScreen, InstancesScreen
from tui.screens.common import ErrorScreen, HelpScreen, LoadingScreen, PromptScreen
from tui.screens.finding import FindingScreen
from tui.screens.levels import LevelsScreen
from tui.screens.memory import MemoryScreen
from tui.screens.ops import KernelsScreen, OpsScreen
from tui.screens.overview import OverviewScreen
from tui.screens.path import PathScreen
from tui.screens.ranks import RanksScreen
from tui.screens.regions import RegionsScreen
from tui.screens.sql import SqlScreen
from tui.screens.timeline import TimelineScreen
from tui.screens.whatif import WhatIfScreen

__all__ = [
    "CollectivesScreen",
    "ErrorScreen",
    "FindingScreen",
    "HelpScreen",
    "InstancesScreen",
    "KernelsScreen",
    "LevelsScreen",
    "LoadingScreen",
    "MemoryScreen",
    "OpsScreen",
    "OverviewScreen",
    "PathScreen",
    "PromptScreen",
    "RanksScreen",
    "RegionsScreen",
    "SqlScreen",
    "TimelineScreen",
    "WhatIfScreen",
]
