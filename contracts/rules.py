"""Seed 004's retry rules, judged on one operation's attempts (pure: no database).

An attempt is one call of the operation as a receipt or a failure record reported it; a
status lookup is a receipt whose `result` is `lookup`. The rules, with the tool's policy
overriding the seed's numbers where it says otherwise:

- read_retry_limit: a retry-safe read retried more than `retry_max_attempts` times (2);
- retry_after_stop: a call within the budget window after the failure that made N failures
  within W seconds (3 in 300 s), which stops automatic retries;
- reconcile_retry: a call after reconcile_first work and before a finding (a person's
  reconciliation or a lookup that completed); a call after the finding is allowed;
- policy_block_retry: any call after a policy block;
- lookup_not_escalated: a lookup that timed out (or left the state unknown) and that its
  runtime did not send to manual_investigation;
- double_completion: two completed runs of one operation (the duplicate the seed fears).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from triage.vocabulary.lanes import SUCCESS_RESULTS
from triage.vocabulary.taxonomy import LANE_NEXT_ACTION

LOOKUP_RESULTS = frozenset({"lookup"})
ESCALATED_LANE = "manual_investigation"
ESCALATED_NEXT_ACTION = LANE_NEXT_ACTION[ESCALATED_LANE]
TIMEOUT_REASONS = frozenset({"timeout"})


@dataclass(frozen=True)
class Limits:
    """The numbers a tool is held to: its policy's, else the seed's."""

    retry_max_attempts: int = 2
    budget_failures: int = 3
    budget_window_seconds: int = 300

    @property
    def budget_window(self) -> timedelta:
        return timedelta(seconds=self.budget_window_seconds)


SEED_LIMITS = Limits()


@dataclass(frozen=True)
class Attempt:
    at: datetime
    kind: str  # "receipt" | "record"
    id: int
    lane: str = ""
    failed: bool = True
    lookup: bool = False
    reason: str = ""
    execution_state: str = ""
    sent_lane: str = ""
    next_action: str = ""
    retry_count: int = 0
    attempt: int = 1
    side_effect: str = ""
    group_id: int | None = None
    run: str = ""

    @property
    def timed_out(self) -> bool:
        return (
            self.reason in TIMEOUT_REASONS
            or "timeout" in self.reason.lower()
            or self.execution_state == "started_unknown"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "at": self.at.isoformat(),
            "kind": self.kind,
            "id": self.id,
            "lane": self.lane,
            "failed": self.failed,
            "lookup": self.lookup,
            "reason": self.reason,
            "execution_state": self.execution_state,
            "sent_lane": self.sent_lane,
            "next_action": self.next_action,
            "retry_count": self.retry_count,
            "attempt": self.attempt,
            "side_effect": self.side_effect,
            "group_id": self.group_id,
            "run": self.run,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Attempt:
        values = dict(data)
        values["at"] = datetime.fromisoformat(str(values["at"]))
        return cls(**values)  # type: ignore[arg-type]


def receipt_is_lookup(result: str) -> bool:
    return result.lower() in LOOKUP_RESULTS


def receipt_failed(*, result: str, execution_state: str) -> bool:
    return not (result.lower() in SUCCESS_RESULTS and execution_state == "completed")


@dataclass(frozen=True)
class Broken:
    kind: str
    attempt: Attempt  # the call that broke the rule (the example)
    detail: dict[str, object]


def _order(attempt: Attempt) -> tuple[datetime, str, int]:
    return (attempt.at, attempt.kind, attempt.id)


def ordered(attempts: Iterable[Attempt]) -> list[Attempt]:
    return sorted(attempts, key=_order)


def calls(attempts: list[Attempt]) -> list[Attempt]:
    """The operation's calls, lookups aside. A runtime that sends receipts reports each call
    there, and may also send a failure record of the same call: receipts win, so no call is
    counted twice."""
    receipts = [a for a in attempts if a.kind == "receipt" and not a.lookup]
    return receipts if receipts else [a for a in attempts if a.kind == "record"]


def retries(attempts: list[Attempt]) -> int:
    """Calls after the first, or what the runtime itself reported (retry_count, attempt)."""
    made = calls(attempts)
    reported = max(
        [0, *(a.retry_count for a in made), *(a.attempt - 1 for a in made)],
    )
    return max(len(made) - 1, reported)


def judge(
    attempts: list[Attempt], *, limits: Limits, findings_at: Iterable[datetime] = ()
) -> list[Broken]:
    """Every rule the operation broke, at most once each (its first breaking call)."""
    attempts = ordered(attempts)
    made = calls(attempts)
    broken: list[Broken] = []

    def add(kind: str, attempt: Attempt, **detail: object) -> None:
        if all(item.kind != kind for item in broken):
            broken.append(Broken(kind=kind, attempt=attempt, detail=detail))

    # A retry-safe read retried more often than its limit.
    is_read = any(a.side_effect == "read" for a in made)
    if is_read and any(a.lane == "retry_safe" for a in made):
        count = retries(attempts)
        if count > limits.retry_max_attempts:
            first_over = limits.retry_max_attempts + 1
            over = made[first_over] if len(made) > first_over else made[-1]
            add("read_retry_limit", over, retries=count, limit=limits.retry_max_attempts)

    # Calls after the failures that stop automatic retries.
    failed = [a for a in made if a.failed]
    needed = max(1, limits.budget_failures)
    for index in range(needed - 1, len(failed)):
        if failed[index].at - failed[index - needed + 1].at <= limits.budget_window:
            stop = failed[index]
            later = [
                a
                for a in made
                if _order(a) > _order(stop) and a.at - stop.at <= limits.budget_window
            ]
            if later:
                add(
                    "retry_after_stop",
                    later[0],
                    stopped_at=stop.at.isoformat(),
                    failures=needed,
                    window_seconds=limits.budget_window_seconds,
                )
            break

    # reconcile_first work: a call before its finding.
    found = sorted(findings_at)
    for attempt in made:
        if not attempt.failed or attempt.lane != "reconcile_first":
            continue
        lookups = [
            a.at
            for a in attempts
            if a.lookup
            and a.at >= attempt.at
            and a.execution_state == "completed"
            and not a.timed_out
        ]
        finding = min([*(at for at in found if at >= attempt.at), *lookups], default=None)
        retry = next((a for a in made if _order(a) > _order(attempt)), None)
        if retry is not None and (finding is None or retry.at < finding):
            add("reconcile_retry", retry, reconcile_at=attempt.at.isoformat())
        break

    # A policy block, called again.
    for position, attempt in enumerate(made):
        if attempt.lane == "policy_blocked" and position + 1 < len(made):
            add("policy_block_retry", made[position + 1], blocked_at=attempt.at.isoformat())
            break

    # A lookup that timed out and was not escalated.
    for attempt in attempts:
        if attempt.lookup and attempt.timed_out:
            escalated = (
                attempt.sent_lane == ESCALATED_LANE or attempt.next_action == ESCALATED_NEXT_ACTION
            )
            if not escalated:
                add("lookup_not_escalated", attempt)
                break

    # The same operation completed more than once.
    completed = [a for a in made if a.kind == "receipt" and not a.failed]
    if len(completed) > 1:
        add("double_completion", completed[1], completions=len(completed))
    return broken
