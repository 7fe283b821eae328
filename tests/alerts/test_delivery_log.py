"""The alerts page's delivery log: 50 a page with older and newer links that keep the rule
filter, a row about a group linking to it, and a page address it did not write refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from alerts import services
from alerts.models import Channel, ChannelKind, Delivery, DeliveryStatus, Rule
from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import FailureGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def mail(db: Any) -> Channel:
    channel, _ = services.channel_create(name="mail", kind=ChannelKind.EMAIL, target="a@b.example")
    return channel


def _deliveries(rule: Rule, channel: Channel, count: int, *, group_id: int | None = None) -> None:
    start = timezone.now() - timedelta(days=1)
    Delivery.objects.bulk_create(
        Delivery(
            rule=rule,
            channel=channel,
            idempotency_key=f"{rule.pk}:{number}",
            subject=f"group:{group_id}" if group_id else "x",
            summary=f"{rule.name} delivery #{number:03d}.",
            payload={"group": {"id": group_id}},
            status=DeliveryStatus.SENT,
            # Pairs share a moment: the page's order is (created_at, id), not the moment alone.
            created_at=start + timedelta(minutes=number // 2),
        )
        for number in range(count)
    )


def _shown(body: str, rule: str) -> list[int]:
    return [int(found) for found in re.findall(rf"{rule} delivery #(\d+)\.", body)]


def _link(body: str, word: str) -> str | None:
    found = re.search(rf'<a href="(/alerts/\?[^"#]*)#delivery-log"[^>]*>[^<]*{word}', body)
    return found.group(1).replace("&amp;", "&") if found else None


def test_the_log_pages_by_fifty_and_keeps_the_rule_filter(
    client_as: Callable[..., Any], mail: Channel, make_rule: Callable[..., Any],
    django_assert_max_num_queries: Any,
) -> None:  # fmt: skip
    paged, other = make_rule("new_group", [mail], name="paged"), make_rule("spike", [mail],
        name="other", spike_count=1, spike_factor=1, spike_window_hours=1)  # fmt: skip
    _deliveries(paged, mail, 120)
    _deliveries(other, mail, 30)
    client = client_as("viewer")

    with django_assert_max_num_queries(12):
        first = client.get(f"/alerts/?rule={paged.pk}")
    assert first.status_code == 200
    body = first.content.decode()
    assert _shown(body, "paged") == list(range(119, 69, -1))
    assert _shown(body, "other") == []
    assert _link(body, "newer") is None
    older = _link(body, "older")
    assert older is not None and f"rule={paged.pk}&" in older

    with django_assert_max_num_queries(12):
        second = client.get(older)
    body = second.content.decode()
    assert _shown(body, "paged") == list(range(69, 19, -1))
    third_url = _link(body, "older")
    assert third_url is not None
    third = client.get(third_url).content.decode()
    assert _shown(third, "paged") == list(range(19, -1, -1))
    assert _link(third, "older") is None

    newer = _link(third, "newer")
    assert newer is not None and f"rule={paged.pk}&" in newer
    assert _shown(client.get(newer).content.decode(), "paged") == list(range(69, 19, -1))
    back_to_first = _link(body, "newer")
    assert back_to_first is not None
    assert _shown(client.get(back_to_first).content.decode(), "paged") == list(range(119, 69, -1))

    partial = client.get(older, headers={"HX-Request": "true"})
    assert partial.content.decode().lstrip().startswith('<section id="delivery-log">')


def test_every_rule_s_log_pages_too(
    client_as: Callable[..., Any], mail: Channel, make_rule: Callable[..., Any]
) -> None:
    _deliveries(make_rule("new_group", [mail], name="one"), mail, 40)
    _deliveries(make_rule("regression", [mail], name="two"), mail, 40)
    client = client_as("viewer")
    body = client.get("/alerts/").content.decode()
    assert len(_shown(body, "one")) + len(_shown(body, "two")) == 50
    older = _link(body, "older")
    assert older is not None and "rule=" not in older
    rest = client.get(older).content.decode()
    assert len(_shown(rest, "one")) + len(_shown(rest, "two")) == 30


@pytest.mark.parametrize(
    "query",
    ["before=last-tuesday", "after=2026-01-01T00:00:00_3", "before=2026-01-01T00:00:00%2B00:00_x"],
)
def test_a_page_the_log_did_not_write_is_a_400_form_error(
    client_as: Callable[..., Any], mail: Channel, make_rule: Callable[..., Any], query: str
) -> None:
    _deliveries(make_rule("new_group", [mail], name="shown"), mail, 3)
    response = client_as("viewer").get(f"/alerts/?{query}")
    assert response.status_code == 400
    body = response.content.decode()
    assert "Not a page of this log: follow the log" in body
    assert _shown(body, "shown") == [2, 1, 0]  # the newest page instead


def test_a_delivery_about_a_group_links_to_it(
    client_as: Callable[..., Any], mail: Channel, make_rule: Callable[..., Any]
) -> None:
    batch_ingest(owner="log", items=[failure_item("f1", occurred_at=timezone.now().isoformat())])
    group = FailureGroup.objects.get()
    about = make_rule("new_group", [mail], name="about")
    _deliveries(about, mail, 1, group_id=group.pk)
    _deliveries(make_rule("regression", [mail], name="gone"), mail, 1, group_id=group.pk + 1000)
    _deliveries(make_rule("spike", [mail], name="digest", spike_count=1, spike_factor=1,
                          spike_window_hours=1), mail, 1)  # fmt: skip
    body = client_as("viewer").get("/alerts/").content.decode()
    assert re.search(
        rf'<a href="/triage/groups/{group.pk}/"[^>]*>about delivery #000\.</a>', body
    ), body
    assert f"/triage/groups/{group.pk + 1000}/" not in body  # deleted since: no dead link
    assert '<span translate="no" title="the message as it was sent">digest delivery' in body
