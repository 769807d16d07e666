"""Eviction plans for starving gangs (ARCHITECTURE.md, "The agent's cycle", step 3), by concern:

- ``base``: the planner's shared state, the victim order's helpers;
- ``admissibility``: which candidates may be victims for a gang;
- ``index``: the node index the search prunes with, its invariants at the top;
- ``search``: the fewest victims per needed pod, node by node, then minimized;
- ``share_victims``: own-queue victims when the gang's queue is above its admitted share;
- ``planner``: ``Planner.plan_gang``, one gang after another, and ``starving_gangs``.

The ordering rules are in ``policy/ordering.py``; the queue-share rules in ``policy/sharemodel.py``.
"""

from .base import GangPlan, SearchMode
from .planner import Planner, starving_gangs

__all__ = ["GangPlan", "Planner", "SearchMode", "starving_gangs"]
