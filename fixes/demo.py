"""The demo's fixes: two releases of a checkout collection, a fix that held, one that did not,
and one verified by Quality Lab.

- checkout declares releases 2.3 (ten days ago) and 2.4 (eight days ago); its runtime sends
  the release on every item;
- getCart failed one call in ten until 2.4 shipped a retry budget, then one in two hundred:
  resolved in 2.4 with that code change, the fix held;
- applyCoupon's runbook step (restart the coupon cache) left its rate where it was: the fix
  did not hold;
- the shop's getOrderDetail group gets the search case made from it, and its fix is
  verified by a Quality Lab run in the worker (the demo waits for it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef

from fixes import measure, services
from fixes.models import Fix
from qualitylab.models import CaseRun, Collection, QualityCase
from triage.models import FailureGroup, FailureRecord, Release
from triage.services import runbook_set

OWNER = "demo-fixes"
COLLECTION = "checkout"
RELEASES = {"2.3": timedelta(days=10), "2.4": timedelta(days=8)}
# (tool, reason, failures before, successes before, failures after, successes after)
SHAPES = (
    ("getCart", "timeout", 60, 540, 3, 597),
    ("applyCoupon", "http_5xx", 40, 360, 38, 342),
)
VERIFIED_CASE = "search-order-detail-en"


def _spread(count: int, start: datetime, hours: float) -> list[datetime]:
    return [start + timedelta(hours=hours * (n + 0.5) / count) for n in range(count)]


def _failure(tool: str, reason: str, release: str, n: int, at: datetime) -> dict[str, Any]:
    message = f"{tool} did not answer in time" if reason == "timeout" else "upstream said 503"
    body = {
        "stage": "execute",
        "reason": reason,
        "tool": tool,
        "collection": COLLECTION,
        "release": release,
        "message": message,
        "occurred_at": at.isoformat(),
    }
    return {"type": "failure", "id": f"{OWNER}-{tool}-{release}-f{n}", "body": body}


def _success(tool: str, release: str, n: int, at: datetime) -> dict[str, Any]:
    body = {
        "type": "step.completed",
        "tool": tool,
        "collection": COLLECTION,
        "plan_id": f"plan_{n}",
        "step_id": "s1",
        "occurred_at": at.isoformat(),
    }
    return {"type": "runner_event", "id": f"{OWNER}-{tool}-{release}-s{n}", "body": body}


def items(now: datetime) -> list[dict[str, Any]]:
    """Failures and runner successes in the day before and the day after release 2.4."""
    fixed_at = now - RELEASES["2.4"]
    sent: list[dict[str, Any]] = []
    for tool, reason, *counts in SHAPES:
        for failures, successes, start, release in (
            (counts[0], counts[1], fixed_at - timedelta(hours=22), "2.3"),
            (counts[2], counts[3], fixed_at + timedelta(minutes=30), "2.4"),
        ):
            sent += [
                _failure(tool, reason, release, n, moment)
                for n, moment in enumerate(_spread(failures, start, 21))
            ]
            sent += [
                _success(tool, release, n, moment)
                for n, moment in enumerate(_spread(successes, start, 21))
            ]
    return sent


def install(
    *, now: datetime, ingest: Callable[[list[dict[str, Any]]], None], actor: Any
) -> list[Fix]:
    """Declare the releases, send the traffic, resolve the two groups with their fixes (set
    at release 2.4's deployment) and measure them."""
    for version, age in RELEASES.items():
        Release.objects.get_or_create(
            collection=COLLECTION, version=version, defaults={"deployed_at": now - age}
        )
    ingest(items(now))
    runbook_set(
        subject="tool", reason="", tool="applyCoupon", collection=COLLECTION,
        url="https://wiki.example.com/runbooks/coupon-cache",
        note="Restart the coupon cache, then watch the error rate for an hour.", actor=actor,
    )  # fmt: skip
    fixes = []
    for tool, kind, url, note in (
        ("getCart", "code_change", "https://git.example.com/checkout/pull/418",
         "A retry budget of 2 on the cart read."),
        ("applyCoupon", "runbook_step", "", "Restarted the coupon cache."),
    ):  # fmt: skip
        group = FailureGroup.objects.get(collection=COLLECTION, tool=tool)
        runbooks = services.group_runbooks(group)
        recorded = services.fix_record(
            group=group, actor=actor, kind=kind, url=url, note=note, resolved_in_release="2.4",
            runbook=runbooks[0] if kind == "runbook_step" and runbooks else None,
        )  # fmt: skip
        assert recorded.fix is not None
        Fix.objects.filter(pk=recorded.fix.pk).update(fixed_at=now - RELEASES["2.4"])
        recorded.fix.refresh_from_db()
        fixes.append(measure.fix_measure(recorded.fix, now=now))
    return fixes


def verify(*, collection: Collection, actor: Any) -> CaseRun | None:
    """The shop's getOrderDetail group, protected by the search case made from it, resolved
    by a fix that Quality Lab verifies (the run goes to the worker: wait for it)."""
    from_runtimes = FailureRecord.objects.filter(group=OuterRef("pk"), source="runtime")
    group = (
        FailureGroup.objects.filter(collection=collection.name, tool="getOrderDetail")
        .filter(Exists(from_runtimes))  # a production failure, not Quality Lab's own
        .exclude(status="resolved")
        .order_by("-count")
        .first()
    )
    if group is None:
        return None
    QualityCase.objects.filter(collection=collection, case_id=VERIFIED_CASE).update(
        failure_group=group
    )
    recorded = services.fix_record(
        group=group, actor=actor, kind="code_change", verify=True,
        url="https://git.example.com/shop/pull/77",
        note="The detail call retries once on 503 with the same idempotency key.",
    )  # fmt: skip
    assert recorded.fix is not None
    return recorded.fix.verification_run
