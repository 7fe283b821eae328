"""Page bodies larger than any form takes are refused unread (config/request_limits.py);
the doors that bound their own bodies (ingest, spec uploads) keep their own answers."""

from __future__ import annotations

import io
from typing import Any, cast

import pytest
from django.test import Client

from config.request_limits import page_body_ceiling

pytestmark = pytest.mark.django_db


class _CountingBody(io.BytesIO):
    """A request body that counts what the server read of it."""

    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        type(self).bytes_read += len(data)
        return data


def _post_declaring(client: Client, url: str, declared: int, **extra: Any) -> Any:
    body = b"x" * 1024  # what is sent; the length says far more
    _CountingBody.bytes_read = 0
    return client.post(
        url,
        data=body,
        content_type="multipart/form-data; boundary=BoUnDaRy",
        **cast(
            dict[str, Any],
            {"wsgi.input": _CountingBody(body), "CONTENT_LENGTH": str(declared), **extra},
        ),
    )


@pytest.mark.parametrize(
    "url", ["/accounts/login/", "/triage/bulk", "/qualitylab/shop/cases/import"]
)
def test_a_page_body_declared_over_the_ceiling_is_413_unread(client_as: Any, url: str) -> None:
    """Django would stream a multipart file part to a temporary file (the CSRF check reads
    the form of every POST, signed in or not): gigabytes of disk for one request."""
    client = Client() if url == "/accounts/login/" else client_as("operator")
    response = _post_declaring(client, url, 4 * 1024**3)
    assert response.status_code == 413
    assert "larger than any form of this page takes" in response.content.decode()
    assert _CountingBody.bytes_read == 0


def test_a_form_within_the_ceiling_is_read_as_usual(client_as: Any, settings: Any) -> None:
    assert page_body_ceiling() == 2 * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 64 * 1024
    response = client_as("operator").post("/triage/bulk", {"action": "acknowledge"})
    assert response.status_code != 413


def test_the_doors_that_bound_their_own_bodies_keep_their_answers(
    client_as: Any, ingest_client: Any
) -> None:
    declared = 4 * 1024**3
    spec = _post_declaring(client_as("operator"), "/qualitylab/collections/new", declared)
    assert spec.status_code == 413
    assert "is larger than the 64 MiB limit; nothing was read" in spec.content.decode()
    ingest = ingest_client.post(
        "/api/v1/ingest",
        data=b"{}",
        content_type="application/json",
        **cast(dict[str, Any], {"CONTENT_LENGTH": str(declared)}),
    )
    assert ingest.status_code == 413
    assert ingest.json()["error"]["code"]
