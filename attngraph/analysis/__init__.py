"""Analysis of the IR: ``describe`` (taxonomy of attention sites) and ``diff``.

Reads the inferred graph only; never imports torch.
"""

from attngraph.analysis.axes import AXES, Axis, Site, find_sites
from attngraph.analysis.describe import Description, describe
from attngraph.analysis.diff import Diff, diff, render_diff
from attngraph.analysis.formats import axes_table, render

__all__ = [
    "AXES", "Axis", "Description", "Diff", "Site", "axes_table", "describe", "diff",
    "find_sites", "render", "render_diff",
]
