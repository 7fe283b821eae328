"""One error shape for the whole API: {"error": {"code", "message", "field"?}}."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "body_too_large"


class InvalidBatch(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The body is not a batch."
    default_code = "invalid_batch"


class LengthRequired(exceptions.APIException):
    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_detail = "Send the batch with a Content-Length (chunked bodies are not read)."
    default_code = "length_required"


class QuotaExceeded(exceptions.Throttled):
    default_code = "quota_exceeded"


class IngestBusy(exceptions.APIException):
    """Every ingest slot of the pool is taken (triage.intake.capacity); retry after `wait` s."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The desk is ingesting at capacity; retry after Retry-After seconds."
    default_code = "ingest_busy"

    def __init__(self, *, wait: int) -> None:
        super().__init__()
        self.wait = wait  # DRF's handler turns it into the Retry-After header


def _first_code(codes: Any) -> str:
    while isinstance(codes, (list, dict)):
        if not codes:
            return "invalid"
        codes = next(iter(codes.values())) if isinstance(codes, dict) else codes[0]
    return str(codes)


def _database_unavailable(exc: Exception) -> bool:
    """Whether `exc` means the database cannot be used right now (a retry may succeed).

    Django wraps the driver's errors only around its own cursor calls; a driver call made
    directly (the ingest's COPY) raises the driver's class, so both are recognized.
    """
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    for connection in connections.all(initialized_only=True):
        driver = getattr(connection, "Database", None)  # the DB-API module (psycopg)
        if driver is not None and isinstance(exc, (driver.OperationalError, driver.InterfaceError)):
            return True
    return isinstance(exc, DatabaseError) and "connection" in str(exc).lower()


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if _database_unavailable(exc):
        return Response(
            {
                "error": {
                    "code": "database_unavailable",
                    "message": "The database is unreachable; retry later.",
                }
            },
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(settings.TRIAGE_DATABASE_RETRY_AFTER_SECONDS)},
        )
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(exc, exceptions.ValidationError):
        details = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        field, messages = next(iter(details.items()))
        message = messages[0] if isinstance(messages, list) and messages else str(messages)
        response.data = {
            "error": {"code": _first_code(exc.get_codes()), "message": str(message), "field": field}
        }
        return response
    response.data = {"error": {"code": _first_code(exc.get_codes()), "message": str(exc.detail)}}
    if isinstance(exc, exceptions.NotAuthenticated):
        response.data["error"]["code"] = "missing_api_key"
    return response
