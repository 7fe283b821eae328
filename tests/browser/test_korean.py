"""Every page, read by a person who prefers Korean, in Chromium: no English interface text is
left outside codes, identifiers and names (korean_allowed_words.txt: product names, units and
the test data's names); a screenshot of each page goes to var/test-artifacts/ko-*.png.
The header's switch changes the language, and the choice is still there after signing in
again in another browser."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from alerts.models import Delivery
from learning.models import Suggestion
from organisation.roles import ensure_role_group
from qualitylab.models import CaseResult, CaseRun, Collection
from tests.browser.checks import HANGUL, VISIBLE_TEXT, english_words
from tests.browser.conftest import PASSWORD
from tests.security import test_url_matrix as matrix
from triage.models import FailureGroup, ToolPolicy
from triage.services import person_language_set

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


def _build(korean_username: str) -> dict[str, Any]:
    """The URL matrix's world (a built collection with runs and results, a failure group, a
    receipt waiting, learning suggestions, a tool policy) and a Korean-reading admin."""
    with (
        mock.patch("qualitylab.services._send"),
        mock.patch("learning.tasks.derive_suggestions.apply_async"),
        override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]),
    ):
        world = matrix._build_world()
    person = get_user_model().objects.create_user(username=korean_username, password=PASSWORD)
    person.groups.add(ensure_role_group("admin"))
    person_language_set(user=person, language="ko")
    # One delivery in the alerts' log: what was sent, in the language it was sent in.
    Delivery.objects.create(
        rule_id=world.ids["alert_rule"], channel_id=world.ids["alert_channel"],
        idempotency_key="ko-walk-1", summary="new group execute/http_5xx · getOrder in shop",
        status="sent", attempts=1, answer_code="250",
    )  # fmt: skip
    # The contracts page with its counters: a blocked publication called again (a finding).
    from datetime import timedelta

    from django.utils import timezone

    from contracts.scan import contracts_scan
    from tests.factories import receipt_item
    from triage.intake.ingest import batch_ingest

    blocked = {"result": "blocked", "code": "", "execution_state": "not_started"}
    batch_ingest(
        owner="ko-walk",
        items=[receipt_item(f"ko-block-{n}", tool="publish_note", idempotency_key="pub-1",
                            **blocked) for n in range(2)],
    )  # fmt: skip
    contracts_scan(now=timezone.now() + timedelta(minutes=5))
    return world.ids


def _sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def _pages(ids: dict[str, Any]) -> dict[str, str]:
    collection = Collection.objects.get(pk=ids["collection"])
    case = collection.cases.first()
    group = FailureGroup.objects.get(pk=ids["group"])
    return {
        "triage": "/?window=30d&status=all&source=any",
        "triage-by-stage": "/?window=30d&status=all&source=any&sort=stage",
        "group": f"/triage/groups/{group.pk}/",
        "receipts": "/receipts/",
        "ingestion": "/ingestion/",
        "policies": "/policies/",
        "policy-new": "/policies/new",
        "policy-edit": f"/policies/{ToolPolicy.objects.get(pk=ids['policy']).pk}/edit",
        "qualitylab": "/qualitylab/",
        "collection": f"/qualitylab/{collection.name}/",
        "collection-settings": f"/qualitylab/{collection.name}/settings",
        "collection-spec": f"/qualitylab/{collection.name}/spec",
        "case-new": f"/qualitylab/{collection.name}/cases/new",
        "case-edit": f"/qualitylab/{collection.name}/cases/{case.case_id}/edit" if case else "",
        "case-from-group": f"/qualitylab/cases/new?group={group.pk}",
        "cases-import": f"/qualitylab/{collection.name}/cases/import",
        "suite-new": f"/qualitylab/{collection.name}/suites/new",
        "run": f"/qualitylab/runs/{CaseRun.objects.get(pk=ids['finished_run']).pk}/",
        "result": f"/qualitylab/results/{CaseResult.objects.get(pk=ids['result']).pk}/",
        "learning": "/learning/",
        "suggestion": f"/learning/suggestions/{Suggestion.objects.get(pk=ids['suggestion']).pk}/",
        "preferences": "/preferences/",
        "alerts": "/alerts/",
        "alert-rule-edit": f"/alerts/rules/{ids['alert_rule']}/edit",
        "alert-channel-edit": f"/alerts/channels/{ids['alert_channel']}/edit",
        "contracts": "/contracts/",
        "fixes": "/fixes/",
        "contract-findings": "/contracts/findings",
    }


def test_every_page_reads_korean_for_a_person_who_prefers_it(
    page: Any, live_server: Any, screenshot: Any
) -> None:
    ids = _build("minji")
    # An English browser: the person's stored choice is what counts.
    _sign_in(page, live_server.url, "minji")
    problems = {}
    for name, path in _pages(ids).items():
        if not path:
            continue
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status < 500, (name, response and response.status)
        page.locator("details").evaluate_all("(all) => all.forEach((d) => { d.open = true; })")
        assert page.locator("html").get_attribute("lang") == "ko", name
        text = page.evaluate(VISIBLE_TEXT)
        assert HANGUL.search(text), name
        english = english_words(text)
        if english:
            problems[name] = sorted(set(english))
        screenshot(f"ko-{name}")
    assert not problems, "\n".join(f"{name}: {words}" for name, words in problems.items())


def test_the_switch_changes_the_language_and_it_stays_after_signing_in_again(
    browser: Any, page: Any, live_server: Any, screenshot: Any
) -> None:
    person = get_user_model().objects.create_user(username="jisoo", password=PASSWORD)
    person.groups.add(ensure_role_group("viewer"))
    _sign_in(page, live_server.url, "jisoo")
    assert page.locator("html").get_attribute("lang") == "en"
    page.goto(f"{live_server.url}/receipts/")
    page.locator("#language-switch button[value=ko]").click()
    page.wait_for_url(f"{live_server.url}/receipts/")
    assert page.locator("html").get_attribute("lang") == "ko"
    assert page.get_by_role("heading", name="영수증").count() == 1
    page.get_by_role("button", name="로그아웃").click()
    page.wait_for_url(f"{live_server.url}/accounts/login/")
    assert page.get_by_role("heading", name="로그인").count() == 1
    # Another browser, English by its Accept-Language and without the cookie.
    other = browser.new_context(locale="en-US")
    try:
        tab = other.new_page()
        _sign_in(tab, live_server.url, "jisoo")
        assert tab.locator("html").get_attribute("lang") == "ko"
        assert tab.locator(".mainnav").get_by_role("link", name="트리아지").count() == 1
        # Back to English from the switch, stored again.
        tab.locator("#language-switch button[value=en]").click()
        tab.wait_for_load_state()
        assert tab.locator("html").get_attribute("lang") == "en"
    finally:
        other.close()
    person.refresh_from_db()
    assert person.preference.language == "en"
