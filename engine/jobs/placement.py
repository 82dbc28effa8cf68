"""Where a job runs or ran, in words, for the Jobs and Run pages (no process code, no Ray import).

A running job's node is read from its log tail's header line, which the Ray task writes first
(``--- attempt 1 on ray node <id> (<ip>), task <id>``, engine/jobs/ray_task.py); a stored run's from
its provenance's ``placement`` (engine/measure/provenance.py). A Ray dashboard, where one is
configured (``LATENCYLAB_RAY_DASHBOARD_URL``), gets a link to the node.
"""

from __future__ import annotations

import re

from engine.jsonvalue import JSONMapping

_RAY_HEADER = re.compile(
    r"^--- attempt \d+ on ray node (?P<node_id>\S+) \((?P<node_ip>[^)]*)\), task (?P<task_id>\S+?),", re.M
)


def short(ident: str, keep: int = 12) -> str:
    """A Ray id cut to its first ``keep`` characters (they are 56 hex digits)."""
    return ident if len(ident) <= keep else ident[:keep] + "…"


def from_log_tail(log_tail: str | None) -> dict[str, str] | None:
    """The placement of the job's latest attempt on Ray, from its log tail; None when it did not run on Ray."""
    found = [m.groupdict() for m in _RAY_HEADER.finditer(log_tail or "")]
    return {"executor": "ray", **found[-1]} if found else None


def in_words(placement: JSONMapping | None) -> str | None:
    """``ray node 5c2f0a1b9d3e… (10.0.0.7) · task 1a2b3c4d5e6f…`` or ``local worker on gpu-host-3``."""
    if not placement:
        return None
    if placement.get("executor") == "ray":
        words = f"ray node {short(str(placement.get('node_id', '?')))} ({placement.get('node_ip', '?')})"
        return words + (f" · task {short(str(placement['task_id']))}" if placement.get("task_id") else "")
    if placement.get("executor") == "local":
        return f"local worker on {placement.get('host', '?')}"
    return f"{placement.get('executor', '?')} on {placement.get('host', '?')}"


def dashboard_link(placement: JSONMapping | None, dashboard_url: str | None) -> str | None:
    """The Ray dashboard's page of the node the job ran on, where a dashboard is configured."""
    url = (placement or {}).get("ray_dashboard") or dashboard_url
    node = (placement or {}).get("node_id")
    if not url or not node or (placement or {}).get("executor") != "ray":
        return None
    return f"{str(url).rstrip('/')}/#/cluster/nodes/{node}"
