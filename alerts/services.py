"""Writes of alerts: channels and rules, firing a rule for what it matched, and delivering.

The flow: ingest publishes what a committed batch did (new and regressed groups); the
listener hands that to the queue (`evaluate_batch`), or, with the broker down, to a row the
beat task picks up. The beat task evaluates the other kinds every minute. Firing claims each
subject under its rule's minimum interval and queues one delivery per channel (one digest
when a single evaluation matched more than ALERTS_DIGEST_THRESHOLD subjects); a delivery
is claimed with a conditional UPDATE before it is sent, retried with backoff when the far
side failed, and logged with its attempts, answer and error.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext as _
from kombu.exceptions import KombuError

from alerts import channels as channel_sending
from alerts.models import (
    INGEST_KINDS,
    Channel,
    ChannelKind,
    Delivery,
    DeliveryStatus,
    PendingEvaluation,
    Rule,
    RuleKind,
    RuleSubjectState,
)
from alerts.selectors import BEAT_MATCHERS, Match, absolute_url, ingest_matches
from config.celery import publish
from organisation import audit
from triage.intake.ingest import BatchCommitted
from triage.selectors import runbooks_for

logger = logging.getLogger(__name__)

_NEVER = datetime(1970, 1, 1, tzinfo=UTC)
# The n-th retry waits BACKOFF_SECONDS[n - 1] (the last value for every later one).
BACKOFF_SECONDS = (10, 30, 120, 600)
_BROKER_ERRORS = (KombuError, OSError)


# --- channels -------------------------------------------------------------------------------


class ChannelError(ValueError):
    """A channel that cannot be saved; `field` names the form field, `code` is stable."""

    def __init__(self, code: str, message: str, *, field: str = "target") -> None:
        super().__init__(message)
        self.code = code
        self.field = field


def _checked_target(kind: str, target: str) -> str:
    target = target.strip()
    if kind == ChannelKind.EMAIL:
        try:
            validate_email(target)
        except ValidationError:
            raise ChannelError("invalid_email", _("Enter a valid email address.")) from None
        return target
    if kind not in (ChannelKind.WEBHOOK, ChannelKind.SLACK):
        raise ChannelError("invalid_kind", _("Unknown channel kind."), field="kind")
    try:
        channel_sending.webhook_url_check(target)
    except channel_sending.ChannelRefused as exc:
        raise ChannelError(exc.code, str(exc)) from None
    return target


def channel_create(*, name: str, kind: str, target: str, user: Any = None) -> tuple[Channel, str]:
    """A new channel and its signing secret ("" unless it is a signed webhook), shown once."""
    target = _checked_target(kind, target)
    if Channel.objects.filter(name=name).exists():
        raise ChannelError("duplicate_name", _("A channel with this name exists."), field="name")
    secret = Channel.new_signing_secret() if kind == ChannelKind.WEBHOOK else ""
    channel = Channel.objects.create(
        name=name,
        kind=kind,
        target=target,
        signing_secret=secret,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return channel, secret


def channel_update(*, channel: Channel, target: str) -> Channel:
    """A new address for a channel (checked like a new one); its secret stays."""
    channel.target = _checked_target(channel.kind, target)
    channel.save(update_fields=["target"])
    return channel


def channel_delete(*, channel: Channel) -> None:
    channel.delete()


def channel_test(*, channel: Channel) -> Delivery:
    """Send a test message now and return its delivery row (with the answer)."""
    now = timezone.now()
    key = f"test:{channel.pk}:{uuid.uuid4().hex}"
    delivery = Delivery.objects.create(
        channel=channel,
        idempotency_key=key,
        subject="test",
        summary=str(_("Test message from Triage Desk")),
        payload={
            "rule": "test",
            "kind": "test",
            "group": {
                "id": None,
                "stage": "",
                "reason": "",
                "tool": "",
                "collection": "",
                "lane": "",
                "url": absolute_url("/alerts/"),
            },
            "count": 0,
            "window_start": now.isoformat(),
            "window_end": now.isoformat(),
            "first_seen": None,
        },
        is_test=True,
        # One attempt: a person is waiting for the answer.
        next_attempt_at=now,
    )
    delivery_attempt(delivery_id=delivery.pk, now=now, final=True)
    delivery.refresh_from_db()
    return delivery


# --- rules ----------------------------------------------------------------------------------

RULE_FIELDS = (
    "kind", "enabled", "collection", "stage", "reason", "tool", "lane", "source",
    "execution_state", "min_interval_minutes", "spike_count", "spike_factor",
    "spike_window_hours", "wait_minutes", "pass_rate_floor",
)  # fmt: skip


def rule_create(
    *, name: str, kind: str, channels: Sequence[Channel], user: Any = None, **fields: Any
) -> Rule:
    """A validated rule (ValidationError names the fields at fault)."""
    unknown = set(fields) - set(RULE_FIELDS)
    if unknown:
        raise TypeError(f"unknown rule fields: {sorted(unknown)}")
    if not channels:
        raise ValidationError({"channels": _("Choose at least one channel.")})
    rule = Rule(
        name=name,
        kind=kind,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        **fields,
    )
    rule.full_clean()
    with transaction.atomic():
        rule.save()
        rule.channels.set(channels)
        _audit_rule(rule, "alert_rule.created", user=user, channels=channels)
    _rules_changed()
    return rule


def _audit_rule(
    rule: Rule, action: str, *, user: Any, channels: Sequence[Channel] = (), **extra: Any
) -> None:
    """The audit entry of a rule change: who, and the rule's settings after it."""
    settings_after = {name: getattr(rule, name) for name in RULE_FIELDS}
    audit.record(
        user if getattr(user, "is_authenticated", False) else audit.acting_person(),
        action,
        f"alert rule {rule.name}",
        collection=rule.collection,
        detail={
            "rule": rule.pk,
            **{name: value for name, value in settings_after.items() if value not in ("", None)},
            **({"channels": sorted(channel.name for channel in channels)} if channels else {}),
            **extra,
        },
    )


def rule_update(
    *, rule: Rule, channels: Sequence[Channel], user: Any = None, **fields: Any
) -> Rule:
    before = {name: getattr(rule, name) for name in RULE_FIELDS}
    for name, value in fields.items():
        if name not in RULE_FIELDS:
            raise TypeError(f"unknown rule field {name}")
        setattr(rule, name, value)
    if not channels:
        raise ValidationError({"channels": _("Choose at least one channel.")})
    rule.full_clean()
    changed = sorted(name for name in RULE_FIELDS if getattr(rule, name) != before[name])
    with transaction.atomic():
        rule.save()
        rule.channels.set(channels)
        _audit_rule(rule, "alert_rule.changed", user=user, channels=channels, changed=changed)
    _rules_changed()
    return rule


def rule_delete(*, rule: Rule, user: Any = None) -> None:
    with transaction.atomic():
        _audit_rule(rule, "alert_rule.deleted", user=user)
        rule.delete()
    _rules_changed()


# --- what ingest published ------------------------------------------------------------------


# Whether an enabled new_group or regression rule exists, read at most every few seconds
# per process (a batch's hook then costs no query); rule changes here forget it at once.
_INGEST_RULES_TTL_SECONDS = 5.0
_ingest_rules_known: tuple[float, bool] | None = None


def _ingest_rules_exist() -> bool:
    global _ingest_rules_known
    now = time.monotonic()
    if _ingest_rules_known is None or now - _ingest_rules_known[0] > _INGEST_RULES_TTL_SECONDS:
        exists = Rule.objects.filter(enabled=True, kind__in=INGEST_KINDS).exists()
        _ingest_rules_known = (now, exists)
    return _ingest_rules_known[1]


def _rules_changed() -> None:
    global _ingest_rules_known
    _ingest_rules_known = None


def batch_committed_hand_on(event: BatchCommitted) -> None:
    """Ingest's listener, after the batch committed: hand the ids to the queue (one message
    per batch that created or regressed a group, only while an ingest-kind rule exists)."""
    if not _ingest_rules_exist():
        return
    from alerts.tasks import evaluate_batch

    try:
        publish(
            evaluate_batch,
            batch_id=event.batch_id,
            new_group_ids=list(event.new_group_ids),
            regressed_group_ids=list(event.regressed_group_ids),
        )
    except _BROKER_ERRORS:
        # The broker is down: the beat task evaluates this once it is back.
        PendingEvaluation.objects.create(
            batch_id=event.batch_id,
            new_group_ids=list(event.new_group_ids),
            regressed_group_ids=list(event.regressed_group_ids),
            committed_at=event.committed_at,
        )


def batch_evaluate(
    *,
    new_group_ids: Iterable[int],
    regressed_group_ids: Iterable[int],
    now: datetime | None = None,
    enqueue: bool = True,
) -> list[int]:
    """Fire the new_group and regression rules for one batch; the deliveries to send."""
    now = now or timezone.now()
    rules = list(
        Rule.objects.filter(enabled=True, kind__in=INGEST_KINDS).prefetch_related("channels")
    )
    fired = ingest_matches(
        rules, new_group_ids=new_group_ids, regressed_group_ids=regressed_group_ids, now=now
    )
    return rules_fire(fired=fired, now=now, enqueue=enqueue)


# --- the beat task --------------------------------------------------------------------------


@dataclass(frozen=True)
class BeatOutcome:
    pending_evaluated: int
    queued: list[int]
    resent: int


def rules_evaluate(*, now: datetime | None = None) -> BeatOutcome:
    """Every minute: batches the broker missed, the counter-read kinds, lost deliveries."""
    now = now or timezone.now()
    queued: list[int] = []
    pending = list(PendingEvaluation.objects.order_by("pk")[:500])
    for row in pending:
        with transaction.atomic():
            if not PendingEvaluation.objects.filter(pk=row.pk).delete()[0]:
                continue  # another beat took it
            queued += batch_evaluate(
                new_group_ids=row.new_group_ids,
                regressed_group_ids=row.regressed_group_ids,
                now=now,
            )
    for rule in Rule.objects.filter(enabled=True, kind__in=list(BEAT_MATCHERS)).prefetch_related(
        "channels"
    ):
        matches = BEAT_MATCHERS[rule.kind](rule, now=now)
        queued += rule_fire(rule=rule, matches=matches, now=now)
    resent = deliveries_resend_due(now=now, skip=set(queued))
    return BeatOutcome(pending_evaluated=len(pending), queued=queued, resent=resent)


def deliveries_out_of_attempts_fail(*, now: datetime, delivery_id: int | None = None) -> int:
    """Fail what a worker left `sending` past its lease with no attempts left: taking it
    over would send it once more than ALERTS_DELIVERY_ATTEMPTS allows."""
    stuck = Delivery.objects.filter(
        status=DeliveryStatus.SENDING,
        lease_until__lt=now,
        attempts__gte=settings.ALERTS_DELIVERY_ATTEMPTS,
    )
    if delivery_id is not None:
        stuck = stuck.filter(pk=delivery_id)
    return stuck.update(
        status=DeliveryStatus.FAILED,
        lease_until=None,
        error="The worker stopped while sending, and no attempts are left.",
    )


def deliveries_resend_due(*, now: datetime, skip: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    """Queue again what is due but whose message is gone: queued or retrying past its time
    (the broker lost it or was down), or sending past its lease (the worker died)."""
    deliveries_out_of_attempts_fail(now=now)
    grace = now - timedelta(seconds=30)
    due = list(
        Delivery.objects.filter(
            Q(
                status__in=[DeliveryStatus.QUEUED, DeliveryStatus.RETRYING],
                next_attempt_at__lte=grace,
            )
            | Q(
                status=DeliveryStatus.SENDING,
                lease_until__lt=now,
                attempts__lt=settings.ALERTS_DELIVERY_ATTEMPTS,
            )
        )
        .exclude(pk__in=list(skip))
        .values_list("pk", flat=True)[:1000]
    )
    _enqueue(due)
    return len(due)


# --- firing ---------------------------------------------------------------------------------


def rule_fire(*, rule: Rule, matches: Sequence[Match], now: datetime) -> list[int]:
    """Queue deliveries for the matches that are not within the rule's minimum interval (nor
    already fired for their window); one digest per channel over the digest threshold."""
    return rules_fire(fired=[(rule, matches)], now=now)


def rules_fire(
    *, fired: Sequence[tuple[Rule, Sequence[Match]]], now: datetime, enqueue: bool = True
) -> list[int]:
    """`rule_fire` for several rules in one transaction (a batch's evaluation: a handful of
    statements whatever the number of rules). Returns the deliveries to send: those queued
    now and, for a match already fired in its window (a redelivered evaluation), its
    deliveries not sent yet. `enqueue=False`: the caller sends them itself."""
    wanted = {
        (rule.pk, match.subject): (rule, match) for rule, matches in fired for match in matches
    }
    if not wanted:
        return []
    with transaction.atomic():
        RuleSubjectState.objects.bulk_create(
            [RuleSubjectState(rule_id=rule_id, subject=subject, last_fired_at=_NEVER)
             for rule_id, subject in wanted],
            ignore_conflicts=True,
        )  # fmt: skip
        states = [
            state
            for state in RuleSubjectState.objects.select_for_update()
            .filter(rule_id__in={rule_id for rule_id, _ in wanted},
                    subject__in={subject for _, subject in wanted})
            .order_by("pk")
            if (state.rule_id, state.subject) in wanted
        ]  # fmt: skip
        firing: dict[int, list[Match]] = {}
        unfinished: set[tuple[int, str]] = set()  # (rule id, idempotency key)
        changed = []
        for state in states:
            rule, match = wanted[(state.rule_id, state.subject)]
            if state.last_window == match.window:
                unfinished.add((rule.pk, _key(rule, match)))
                continue
            if state.last_fired_at > now - rule.min_interval:
                continue
            state.last_fired_at = now
            state.last_window = match.window
            changed.append(state)
            firing.setdefault(rule.pk, []).append(match)
        RuleSubjectState.objects.bulk_update(changed, ["last_fired_at", "last_window"])
        rules = {rule.pk: rule for rule, _ in fired}
        deliveries = [
            delivery
            for rule_id, matches in firing.items()
            for delivery in _deliveries(rule=rules[rule_id], matches=matches, now=now)
        ]
        Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
        keys = {(d.rule_id, d.idempotency_key) for d in deliveries} | unfinished
        if not keys:
            return []
        ids = [
            pk
            for pk, rule_id, key in Delivery.objects.filter(
                rule_id__in={rule_id for rule_id, _ in keys},
                idempotency_key__in={key for _, key in keys},
                status__in=[DeliveryStatus.QUEUED, DeliveryStatus.SENDING],
            ).values_list("pk", "rule_id", "idempotency_key")
            if (rule_id, key) in keys
        ]
        if enqueue:
            transaction.on_commit(lambda: _enqueue(ids), robust=True)
    return ids


def _key(rule: Rule, match: Match) -> str:
    return f"{rule.pk}:{match.subject}:{match.window}"[:400]


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _runbook_payload(group: dict[str, Any]) -> dict[str, Any] | None:
    """The operators' runbooks for the group's reason and tool, as the group page shows
    them (None for subjects that are not a failure group, or when neither has one)."""
    if group.get("id") is None:
        return None
    found = runbooks_for(
        reason=group.get("reason") or "",
        tool=group.get("tool") or "",
        collection=group.get("collection") or "",
    )
    if not found:
        return None
    return {
        part: {"url": runbook.url, "note": runbook.note} if runbook is not None else None
        for part, runbook in (("reason", found.reason), ("tool", found.tool))
    }


def match_payload(rule: Rule, match: Match) -> dict[str, Any]:
    """The documented webhook payload, without sent_at (added when it is sent)."""
    payload = {
        "rule": rule.name,
        "kind": rule.kind,
        "group": match.group,
        "count": match.count,
        "window_start": _iso(match.window_start),
        "window_end": _iso(match.window_end),
        "first_seen": _iso(match.first_seen),
        "runbook": _runbook_payload(match.group),
    }
    if rule.kind == RuleKind.REGRESSION:
        # The release whose records reopened the group; null when they named none.
        payload["release"] = match.release or None
    return payload


def _deliveries(*, rule: Rule, matches: Sequence[Match], now: datetime) -> list[Delivery]:
    channels = list(rule.channels.all())
    if len(matches) > settings.ALERTS_DIGEST_THRESHOLD:
        payload = {
            "rule": rule.name,
            "kind": rule.kind,
            "digest": True,
            "group": None,
            "groups": [
                {**match.group, "count": match.count, "first_seen": _iso(match.first_seen),
                 "summary": match.summary}
                for match in matches
            ],
            "count": sum(match.count for match in matches),
            "window_start": _iso(min(match.window_start for match in matches)),
            "window_end": _iso(max(match.window_end for match in matches)),
            "first_seen": _iso(min((m.first_seen for m in matches if m.first_seen), default=None)),
        }  # fmt: skip
        key = f"{rule.pk}:digest:{now:%Y%m%dT%H%M%S.%f}"
        summary = ngettext(
            "%(count)d match of %(rule)s (%(kind)s)",
            "%(count)d matches of %(rule)s (%(kind)s)",
            len(matches),
        ) % {"count": len(matches), "rule": rule.name, "kind": rule.kind}
        return [
            Delivery(rule=rule, channel=channel, idempotency_key=key, subject="digest",
                     summary=summary[:500], payload=payload, is_digest=True, created_at=now,
                     next_attempt_at=now)
            for channel in channels
        ]  # fmt: skip
    return [
        Delivery(
            rule=rule,
            channel=channel,
            idempotency_key=_key(rule, match),
            subject=match.subject,
            summary=match.summary[:500],
            payload=match_payload(rule, match),
            created_at=now,
            next_attempt_at=now,
        )
        for match in matches
        for channel in channels
    ]


def deliveries_send(*, delivery_ids: Iterable[int]) -> None:
    """Send these deliveries now, here (the evaluation's worker: no second task for the
    first attempt); one that must wait (a retry, a live lease) goes to the queue for then."""
    for delivery_id in delivery_ids:
        outcome = delivery_attempt(delivery_id=delivery_id)
        if outcome.retry_in is not None:
            _enqueue([delivery_id], countdown=outcome.retry_in)


def _enqueue(delivery_ids: Iterable[int], *, countdown: float | None = None) -> None:
    from alerts.tasks import deliver

    for delivery_id in delivery_ids:
        try:
            if countdown is None:
                publish(deliver, delivery_id=delivery_id)
            else:
                deliver.apply_async(
                    kwargs={"delivery_id": delivery_id}, countdown=countdown, retry=False
                )
        except _BROKER_ERRORS:
            # The row stays queued: the beat task sends it again once the broker is back.
            logger.warning(
                "alerts: broker unavailable, delivery %s waits for the beat", delivery_id
            )
            return


# --- delivering -----------------------------------------------------------------------------


def _lease() -> timedelta:
    return timedelta(seconds=settings.ALERTS_TIMEOUT_SECONDS + settings.ALERTS_LEASE_MARGIN_SECONDS)


def message_for(delivery: Delivery, *, now: datetime) -> channel_sending.Message:
    payload = {**delivery.payload, "sent_at": now.isoformat()}
    if delivery.is_digest:
        lines = [f"- {group['summary']}: {group['url']}" for group in payload["groups"][:50]]
        more = len(payload["groups"]) - len(lines)
        if more > 0:
            lines.append(gettext("... and %(more)d more") % {"more": more})
        text = f"{delivery.summary}\n" + "\n".join(lines)
    else:
        text = f"{delivery.summary}\n{payload['group']['url']}"
        for part, runbook in (payload.get("runbook") or {}).items():
            if runbook is not None:
                note = f" ({runbook['note']})" if runbook["note"] else ""
                text += f"\nRunbook for the {part}: {runbook['url'] or '-'}{note}"
    prefix = f"[{payload['kind']}] {payload['rule']}"
    return channel_sending.Message(
        payload=payload,
        subject=f"Triage Desk: {prefix}: {delivery.summary}"[:200],
        text=f"{prefix}: {text}",
        idempotency_key=delivery.idempotency_key,
    )


@dataclass(frozen=True)
class AttemptOutcome:
    status: str  # the delivery's status afterwards, or "skipped" (not ours to send now)
    retry_in: float | None = None  # seconds until it should be attempted again


def delivery_attempt(
    *, delivery_id: int, now: datetime | None = None, final: bool = False
) -> AttemptOutcome:
    """Claim the delivery (a conditional UPDATE), send it once, record the answer.

    Of concurrent or redelivered tasks for one delivery exactly one sends it; one whose
    worker died while sending is taken over once its lease ran out.
    """
    now = now or timezone.now()
    deliveries_out_of_attempts_fail(now=now, delivery_id=delivery_id)
    claimed = (
        Delivery.objects.filter(pk=delivery_id)
        .filter(
            Q(status__in=[DeliveryStatus.QUEUED, DeliveryStatus.RETRYING], next_attempt_at__lte=now)
            # Taken over only with an attempt left (the failing above may race another beat).
            | Q(
                status=DeliveryStatus.SENDING,
                lease_until__lt=now,
                attempts__lt=settings.ALERTS_DELIVERY_ATTEMPTS,
            )
        )
        .update(
            status=DeliveryStatus.SENDING, attempts=F("attempts") + 1, lease_until=now + _lease()
        )
    )
    if not claimed:
        row = (
            Delivery.objects.filter(pk=delivery_id)
            .values("status", "next_attempt_at", "lease_until")
            .first()
        )
        if row is None or row["status"] in (DeliveryStatus.SENT, DeliveryStatus.FAILED):
            return AttemptOutcome(status="skipped")
        wake = (
            row["lease_until"]
            if row["status"] == DeliveryStatus.SENDING
            else row["next_attempt_at"]
        ) or now
        return AttemptOutcome(status="skipped", retry_in=max(1.0, (wake - now).total_seconds() + 1))
    delivery = Delivery.objects.select_related("channel").get(pk=delivery_id)
    sent_at = timezone.now()
    try:
        answer = channel_sending.send(delivery.channel, message_for(delivery, now=sent_at))
    except Exception as exc:
        # Whatever a channel raises is recorded as this attempt's outcome: a delivery left
        # `sending` would be claimed again every minute and never reach an operator.
        logger.warning("delivery %s: sending raised %s", delivery_id, exc.__class__.__name__)
        answer = channel_sending.Answer(
            ok=False, code="error", error=channel_sending.short_error(exc), retry=True
        )
    update: dict[str, Any] = {
        "answer_code": answer.code[:20],
        "error": answer.error[:500],
        "lease_until": None,
    }
    if answer.ok:
        update.update(status=DeliveryStatus.SENT, sent_at=sent_at, error="")
        outcome = AttemptOutcome(status=DeliveryStatus.SENT)
    elif answer.retry and not final and delivery.attempts < settings.ALERTS_DELIVERY_ATTEMPTS:
        wait = BACKOFF_SECONDS[min(delivery.attempts, len(BACKOFF_SECONDS)) - 1]
        update.update(
            status=DeliveryStatus.RETRYING, next_attempt_at=sent_at + timedelta(seconds=wait)
        )
        outcome = AttemptOutcome(status=DeliveryStatus.RETRYING, retry_in=wait)
    else:
        update.update(status=DeliveryStatus.FAILED)
        outcome = AttemptOutcome(status=DeliveryStatus.FAILED)
    Delivery.objects.filter(pk=delivery_id, status=DeliveryStatus.SENDING).update(**update)
    return outcome
