"""TRIAGE_ENVELOPE_CODES: the operators' envelope codes, read by config.settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_envelope_codes

NAME = "TRIAGE_ENVELOPE_CODES"


def read(monkeypatch: pytest.MonkeyPatch, value: str | None) -> dict[str, str]:
    if value is None:
        monkeypatch.delenv(NAME, raising=False)
    else:
        monkeypatch.setenv(NAME, value)
    return env_envelope_codes(NAME)


def test_unset_or_empty_means_no_additions(monkeypatch: pytest.MonkeyPatch) -> None:
    assert read(monkeypatch, None) == {}
    assert read(monkeypatch, "  ") == {}


def test_an_inline_json_object_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    value = '{"VENDOR_BUSY": "http_5xx", "vendor.auth:expired": "auth_failed"}'
    assert read(monkeypatch, value) == {
        "VENDOR_BUSY": "http_5xx",
        "vendor.auth:expired": "auth_failed",
    }


def test_a_json_file_and_a_yaml_file_are_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    json_file = tmp_path / "codes.json"
    json_file.write_text('{"VENDOR_BUSY": "http_5xx"}', encoding="utf-8")
    assert read(monkeypatch, str(json_file)) == {"VENDOR_BUSY": "http_5xx"}
    yaml_file = tmp_path / "codes.yaml"
    yaml_file.write_text(
        "# what our payment runtime sends\nPAYMENT_GATEWAY_DOWN: http_5xx\n", encoding="utf-8"
    )
    assert read(monkeypatch, str(yaml_file)) == {"PAYMENT_GATEWAY_DOWN": "http_5xx"}
    empty = tmp_path / "empty.yml"
    empty.write_text("# nothing yet\n", encoding="utf-8")
    assert read(monkeypatch, str(empty)) == {}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ('{"VENDOR_BUSY": "http_5xx",}', "does not parse"),
        ('{"VENDOR_BUSY": "server_exploded"}', "not a reason of the taxonomy"),
        ('{"VENDOR_BUSY": 503}', "not a reason of the taxonomy"),
        ('{"VENDOR BUSY": "http_5xx"}', "must be 1-100 letters"),
        ('{"": "http_5xx"}', "must be 1-100 letters"),
        ("codes.txt", "must be a JSON object or the path"),
        ("/nonexistent/codes.yaml", "cannot read"),
    ],
)
def test_a_bad_value_stops_the_desk_with_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    with pytest.raises(ImproperlyConfigured, match=says):
        read(monkeypatch, value)


def test_a_file_that_holds_no_object_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    listed = tmp_path / "codes.yaml"
    listed.write_text("- VENDOR_BUSY\n", encoding="utf-8")
    with pytest.raises(ImproperlyConfigured, match="must hold an object"):
        read(monkeypatch, str(listed))
    broken = tmp_path / "broken.yaml"
    broken.write_text("VENDOR_BUSY: [http_5xx\n", encoding="utf-8")
    with pytest.raises(ImproperlyConfigured, match="does not parse"):
        read(monkeypatch, str(broken))
