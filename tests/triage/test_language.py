"""Which language a page is read in: Accept-Language until someone chooses, then the choice,
stored on the person so it follows them; the codes stay codes in both languages."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import failure_item
from triage.intake.ingest import batch_ingest
from triage.models import PersonPreference
from triage.services import person_language_set

pytestmark = pytest.mark.django_db

KOREAN_HEADER = {"HTTP_ACCEPT_LANGUAGE": "ko-KR,ko;q=0.9,en;q=0.5"}


def test_a_visitor_reads_the_browser_s_language() -> None:
    english = Client().get("/accounts/login/")
    korean = Client(headers={"accept-language": "ko-KR,ko;q=0.9,en;q=0.5"}).get("/accounts/login/")
    assert '<html lang="en"' in english.content.decode()
    assert '<html lang="ko"' in korean.content.decode()
    assert "로그인" in korean.content.decode()
    assert "Sign in" in english.content.decode()


def test_a_person_who_chose_korean_reads_korean_whatever_the_browser_says(
    client_as: Any,
) -> None:
    client = client_as("operator", HTTP_ACCEPT_LANGUAGE="en-US")
    user = get_user_model().objects.get(username="operator-user")
    person_language_set(user=user, language="ko")
    page = client.get("/").content.decode()
    assert '<html lang="ko"' in page
    assert "트리아지" in page and "로그아웃" in page


def test_the_switch_stores_the_choice_and_sets_the_cookie(client_as: Any) -> None:
    client = client_as("viewer")
    response = client.post("/i18n/setlang/", {"language": "ko", "next": "/receipts/"})
    assert response.status_code == 302 and response["Location"] == "/receipts/"
    assert response.cookies["django_language"].value == "ko"
    user = get_user_model().objects.get(username="viewer-user")
    assert PersonPreference.objects.get(user=user).language == "ko"
    # Another browser (no cookie, an English Accept-Language) signed in as the same person.
    other = Client(HTTP_ACCEPT_LANGUAGE="en")
    other.force_login(user)
    page = other.get("/receipts/")
    assert '<html lang="ko"' in page.content.decode()
    # ...and it is handed the cookie, so the sign-in page reads Korean after signing out.
    assert page.cookies["django_language"].value == "ko"


def test_switching_leaves_the_time_zone_alone(client_as: Any) -> None:
    client = client_as("viewer")
    user = get_user_model().objects.get(username="viewer-user")
    PersonPreference.objects.create(user=user, time_zone="Asia/Seoul")
    client.post("/i18n/setlang/", {"language": "ko", "next": "/"})
    preference = PersonPreference.objects.get(user=user)
    assert (preference.language, preference.time_zone) == ("ko", "Asia/Seoul")


def test_a_visitor_s_switch_sets_the_cookie_only() -> None:
    client = Client()
    response = client.post("/i18n/setlang/", {"language": "ko", "next": "/accounts/login/"})
    assert response.status_code == 302
    assert not PersonPreference.objects.exists()
    assert "로그인" in client.get("/accounts/login/").content.decode()


@pytest.mark.parametrize("language", ["", "fr", "ko-KR;DROP", "x" * 300])
def test_an_unknown_language_is_refused_and_nothing_is_stored(
    client_as: Any, language: str
) -> None:
    client = client_as("viewer")
    response = client.post("/i18n/setlang/", {"language": language, "next": "/"})
    assert response.status_code == 400
    assert not PersonPreference.objects.exists()


def test_the_switch_takes_no_get() -> None:
    assert Client().get("/i18n/setlang/?language=ko").status_code == 405


def test_the_switch_never_sends_anyone_to_another_site(client_as: Any) -> None:
    response = client_as("viewer").post(
        "/i18n/setlang/", {"language": "ko", "next": "https://evil.example/"}
    )
    assert response.status_code == 302 and not response["Location"].startswith("https://evil")


def test_a_stored_language_the_desk_no_longer_speaks_falls_back_to_the_browser(
    client_as: Any,
) -> None:
    client = client_as("viewer", **KOREAN_HEADER)
    user = get_user_model().objects.get(username="viewer-user")
    PersonPreference.objects.create(user=user, language="fr")
    assert '<html lang="ko"' in client.get("/").content.decode()


def test_codes_stay_codes_and_meanings_are_korean(client_as: Any) -> None:
    batch_ingest(owner="t", items=[failure_item(reason="timeout"), failure_item()])
    page = client_as("viewer", **KOREAN_HEADER).get("/?window=24h").content.decode()
    for code in ("timeout", "http_5xx", "retry_safe", "execute"):
        assert code in page
    # The seed's meaning and usual action for http_5xx, every word of it in Korean.
    assert "다운스트림 API가 서버 측에서 실패함" in page
    assert "안전할 때만 재시도, API 로그 확인" in page
    assert "먼저 볼 것" in page


def test_the_triage_page_costs_the_same_queries_in_both_languages(client_as: Any) -> None:
    reasons = ("timeout", "http_5xx", "http_4xx", "mystery_reason")
    batch_ingest(owner="t", items=[failure_item(reason=reason) for reason in reasons])
    client = client_as("operator")
    counts = []
    for header in ("en", "ko", "en", "ko"):
        with CaptureQueriesContext(connection) as queries:
            page = client.get("/", HTTP_ACCEPT_LANGUAGE=header)
        assert page.status_code == 200 and f'<html lang="{header}"' in page.content.decode()
        counts.append(len(queries))
    assert counts[2] == counts[3], counts


def test_the_api_speaks_english_codes_to_a_korean_browser(client_as: Any) -> None:
    client = client_as("viewer", **KOREAN_HEADER)
    response = client.get("/api/v1/groups?status=nonsense")
    body = response.json()
    assert response.status_code == 400
    text = str(body)
    assert not any("\uac00" <= character <= "\ud7a3" for character in text), text
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert not any("\uac00" <= character <= "\ud7a3" for character in schema.content.decode())
