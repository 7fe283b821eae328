"""The Content-Security-Policy (django-csp, config/settings.py): every page sends it, and no
page carries what it would block (inline script, inline style, event-handler attributes)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.factories import failure_item, receipt_item
from triage.models import FailureGroup

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"\s(on[a-z]+|hx-on[:\w-]*)\s*=", re.IGNORECASE)
JAVASCRIPT_URL = re.compile(r"""(href|action|src)\s*=\s*["']?\s*javascript:""", re.IGNORECASE)


def _blocked_markup(html: str) -> list[str]:
    found = []
    for pattern in (INLINE_SCRIPT, INLINE_STYLE, EVENT_HANDLER, JAVASCRIPT_URL):
        found += [match.group(0).strip() for match in pattern.finditer(html)]
    return found


def _directives(header: str) -> dict[str, list[str]]:
    parts = (part.strip().split() for part in header.split(";") if part.strip())
    return {words[0]: words[1:] for words in parts}


@pytest.fixture
def admin(ingest_client: APIClient, client_as: Any) -> Client:
    items = [
        failure_item(),
        failure_item(stage="synthesize", reason="enum_required"),
        receipt_item(),
    ]
    ingest_client.post("/api/v1/ingest", {"items": items}, format="json")
    return client_as("admin")


def test_the_templates_hold_nothing_the_policy_blocks() -> None:
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in (ROOT / "templates").rglob("*.html")
        if (found := _blocked_markup(path.read_text(encoding="utf-8")))
    }
    assert not offenders, offenders


def test_every_page_sends_the_policy_and_renders_nothing_it_blocks(admin: Client) -> None:
    group = FailureGroup.objects.first()
    assert group is not None
    pages = [
        "/",
        "/?window=7d&status=all",
        f"/triage/groups/{group.pk}/",
        "/receipts/",
        "/ingestion/",
        "/qualitylab/",
        "/learning/",
    ]
    for url in pages:
        response = admin.get(url)
        assert response.status_code == 200, url
        policy = _directives(response["Content-Security-Policy"])
        assert policy["default-src"] == ["'self'"], url
        assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"], url
        assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]
        assert policy["form-action"] == ["'self'"], url
        html = response.content.decode()
        assert not _blocked_markup(html), (url, _blocked_markup(html))
        # htmx is told not to add its inline indicator styles, which the policy would refuse.
        assert '"includeIndicatorStyles": false' in html, url
    sign_in = Client().get("/accounts/login/")
    assert "Content-Security-Policy" in sign_in
    assert not _blocked_markup(sign_in.content.decode())


def test_the_api_docs_load_their_script_from_a_url_and_relax_styles_only(client: Client) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert not INLINE_SCRIPT.search(html)
    policy = _directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert "'unsafe-inline'" in policy["style-src"]
    (script_url,) = [
        url
        for url in re.findall(r'<script src="([^"]+)"', html)
        if "drf_spectacular_sidecar" not in url
    ]
    script = client.get(script_url.replace("&amp;", "&"))
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()
