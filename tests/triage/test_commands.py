from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.factories import failure_item, receipt_item
from triage.models import ApiKey, FailureRecord, IngestRejection, Receipt

pytestmark = pytest.mark.django_db


def test_create_api_key_prints_the_key_once_and_stores_only_its_hash() -> None:
    out = io.StringIO()
    call_command(
        "create_api_key", "checkout", "--scopes", "ingest,read", stdout=out, stderr=io.StringIO()
    )
    key = out.getvalue().strip()
    stored = ApiKey.objects.get(name="checkout")
    assert key.startswith(f"td_{stored.lookup_id}_")
    secret = key.split("_", 2)[2]
    assert secret not in stored.secret_hash and stored.secret_matches(secret)
    assert stored.scopes == ["ingest", "read"]


def test_create_api_key_refuses_unknown_scopes_and_duplicates() -> None:
    with pytest.raises(CommandError, match="Scopes must be among"):
        call_command("create_api_key", "x", "--scopes", "admin", stdout=io.StringIO())
    call_command("create_api_key", "x", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_api_key", "x", stdout=io.StringIO())


def test_create_api_key_with_expiry_expires_after_that_many_days() -> None:
    before = timezone.now()
    call_command(
        "create_api_key", "temp", "--expires-days", "3", stdout=io.StringIO(), stderr=io.StringIO()
    )
    after = timezone.now()
    expires_at = ApiKey.objects.get(name="temp").expires_at
    assert expires_at is not None
    assert before + timedelta(days=3) <= expires_at <= after + timedelta(days=3)


def test_revoke_api_key() -> None:
    call_command("create_api_key", "old", stdout=io.StringIO(), stderr=io.StringIO())
    call_command("revoke_api_key", "old", stdout=io.StringIO())
    assert ApiKey.objects.get(name="old").revoked_at is not None
    with pytest.raises(CommandError, match="No API key"):
        call_command("revoke_api_key", "missing")


def test_ingest_file_goes_through_the_same_path(tmp_path: Path) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_text("\n".join(json.dumps(i) for i in [failure_item("1"), receipt_item("2")]) + "\n")
    out = io.StringIO()
    call_command("ingest", str(path), stdout=out, stderr=io.StringIO())
    assert "2 accepted" in out.getvalue()
    assert FailureRecord.objects.count() == 1 and Receipt.objects.count() == 1
    out = io.StringIO()
    call_command("ingest", str(path), stdout=out, stderr=io.StringIO())
    assert "2 duplicates" in out.getvalue()


def test_ingest_file_exits_non_zero_when_an_item_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "traffic.ndjson"
    bad = {"type": "failure", "id": "bad", "body": {"stage": "execute"}}
    path.write_text(json.dumps(failure_item("ok")) + "\n" + json.dumps(bad) + "\n")
    err = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("ingest", str(path), stdout=io.StringIO(), stderr=err)
    assert raised.value.returncode == 1
    assert "item 2 (bad): rejected missing_field body.reason" in err.getvalue()
    assert FailureRecord.objects.count() == 1
    assert IngestRejection.objects.get().code == "missing_field"


def test_ingest_file_reports_the_line_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_text(json.dumps(failure_item()) + "\n{oops\n")
    with pytest.raises(CommandError, match=r"traffic.ndjson:2: not JSON"):
        call_command("ingest", str(path))


def test_ingest_file_refuses_a_line_nested_past_the_limit_naming_line_and_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traffic.ndjson"
    deep = '{"type": "failure", "id": "d", "body": ' + '{"e": ' * 5_000 + "1" + "}" * 5_001
    path.write_text(json.dumps(failure_item()) + "\n" + deep + "\n")
    with pytest.raises(CommandError, match=r"traffic.ndjson:2: nested deeper than 64 levels"):
        call_command("ingest", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert not FailureRecord.objects.exists()


def test_ingest_file_says_an_over_long_id_is_too_long(tmp_path: Path) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_text(json.dumps(failure_item("y" * 5_000)) + "\n")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", str(path), stdout=io.StringIO(), stderr=err)
    assert (
        f"item 1 ({'y' * 64}...): rejected id_too_long id: id is 5000 characters long; "
        "the limit is 200." in err.getvalue()
    )


@pytest.mark.parametrize("owner", ["o" * 101, "a\u0000b", ""])
def test_ingest_file_refuses_an_owner_the_ledger_cannot_store(tmp_path: Path, owner: str) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_text(json.dumps(failure_item()) + "\n")
    with pytest.raises(CommandError, match="--owner must be 1-100 characters"):
        call_command("ingest", str(path), "--owner", owner)
    assert not FailureRecord.objects.exists()


def test_ingest_file_with_an_integer_python_cannot_read_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "traffic.ndjson"
    path.write_text(json.dumps(failure_item()) + "\n" + '{"id": ' + "9" * 5000 + "}\n")
    with pytest.raises(
        CommandError, match=r"traffic.ndjson:2: not JSON \(a number is too long to read"
    ):
        call_command("ingest", str(path))
