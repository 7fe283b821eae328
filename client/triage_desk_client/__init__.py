"""triage-desk-client: ships an agent runtime's failures to Triage Desk and never loses them.

    from triage_desk_client import Reporter

    reporter = Reporter("https://desk.example", api_key, spool_dir="/var/lib/myagent/spool")
    reporter.failure({"stage": "synthesize", "reason": "unsatisfied_field", ...})

Items are scrubbed and go to a spool on disk (in the caller's thread, or a few milliseconds
later with ``durability="batched"``) and to the desk from background threads; see
``triage_desk_client.reporter``. The graph-tool-call helpers are in
``triage_desk_client.gtc`` (graph-tool-call is imported only when they are used).
"""

from __future__ import annotations

from triage_desk_client.reporter import DURABILITIES, ITEM_TYPES, Reporter
from triage_desk_client.spool import UnsafeSpoolDirectory

__all__ = ["DURABILITIES", "ITEM_TYPES", "Reporter", "UnsafeSpoolDirectory"]
__version__ = "0.1.0"
