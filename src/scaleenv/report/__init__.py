"""Read-only reports over a universe: counts (``inspect``), integrity gates (``check``) and the static
viewer site (``report``: domains, tasks, trajectories, plots)."""

from scaleenv.report.counts import check_universe, universe_counts
from scaleenv.report.runs import ReportError
from scaleenv.report.site import SiteInfo, build_site

__all__ = ["ReportError", "SiteInfo", "build_site", "check_universe", "universe_counts"]
