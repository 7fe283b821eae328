"""Secrets planted in every field of every item type never reach the database or the logs."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import audit_item, failure_item, receipt_item, runner_event_item

# Kind -> (planted value, substrings that must not survive)
PLANTED: dict[str, str] = {
    "bearer": "Bearer abcDEF123456ghiJKL789mnoPQR",
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    ),
    "openai": "sk-proj-Zx8Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz",
    "github": "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "slack": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9Zx2secretPEMbody\n"
        "-----END RSA PRIVATE KEY-----"
    ),
    "url_password": "postgres://admin:hunter2-Sup3rS3cret@db.internal:5432/shop",
    "email": "kim.minji@example.com",
    "phone_kr": "+82 10-2345-6789",
    "phone_us": "(555) 123-4567",
    "card": "4111 1111 1111 1111",
    "password_text": "password=CorrectHorseBattery9",
}
RAW_USER_ID = "member-88412-raw"
NEEDLES = [
    "abcDEF123456ghiJKL789mnoPQR",
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Zx8Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz",
    "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "AKIAIOSFODNN7EXAMPLE",
    "AbCdEfGhIjKlMnOpQrStUvWx",
    "MIIEowIBAAKCAQEA7bq9Zx2secretPEMbody",
    "hunter2-Sup3rS3cret",
    "kim.minji@example.com",
    "2345-6789",
    "123-4567",
    "4111 1111 1111 1111",
    "CorrectHorseBattery9",
    RAW_USER_ID,
    "cookie-value-s3cr3t",
    "x-api-key-value-9f8e7d",
]


def _planted_everywhere() -> dict[str, Any]:
    text = " | ".join(PLANTED.values())
    return {
        "message": f"call failed: {text}",
        "evidence": {
            "headers": {
                "Authorization": PLANTED["bearer"],
                "Cookie": "session=cookie-value-s3cr3t",
                "Set-Cookie": "sid=cookie-value-s3cr3t; HttpOnly",
                "X-Api-Key": "x-api-key-value-9f8e7d",
            },
            "header_pairs": [
                ["Authorization", PLANTED["jwt"]],
                ["X-Api-Key", "x-api-key-value-9f8e7d"],
            ],
            "nested": [{"deep": [{"note": value}]} for value in PLANTED.values()],
            "user_id": RAW_USER_ID,
        },
        "trace_metadata": {"failure_reason": "http_5xx", "debug": text, "user_id": RAW_USER_ID},
        "adapter_extra": {kind: value for kind, value in PLANTED.items()},
        "session_id": "sess-raw-0001-cookie-value-s3cr3t",
    }


def _dump_database() -> str:
    chunks: list[str] = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = model._meta.db_table
            cursor.execute(f"SELECT * FROM {table}")
            chunks.extend(
                json.dumps(row, default=str, ensure_ascii=False) for row in cursor.fetchall()
            )
    return "\n".join(chunks)


@pytest.mark.django_db
def test_no_planted_secret_reaches_any_table_or_log(
    ingest_client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    planted = _planted_everywhere()
    items = [
        failure_item("f", **planted),
        runner_event_item("e", **planted),
        receipt_item("r", **planted, stop_reason=PLANTED["bearer"]),
        audit_item("a", **planted, path=f"/members/{PLANTED['email']}"),
        # A rejected item's message and field must not leak either.
        failure_item("bad", **planted, lane=PLANTED["openai"]),
    ]
    caplog.set_level(logging.DEBUG)
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 207, response.content
    assert [item["status"] for item in response.json()["items"]] == ["accepted"] * 4 + ["rejected"]

    dump = _dump_database()
    answer = response.content.decode()
    logs = caplog.text
    for needle in NEEDLES:
        assert needle not in dump, f"{needle!r} stored"
        assert needle not in answer, f"{needle!r} echoed in the response"
        assert needle not in logs, f"{needle!r} logged"
    # Useful evidence survives: header names, statuses, hashed ids.
    assert "Authorization" in dump and "X-Api-Key" in dump
    assert "user_id_hash" in dump and "session_id_hash" in dump
