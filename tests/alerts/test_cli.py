from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from alerts.models import Channel, Rule
from alerts.sinks import WebhookReceiver

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("alerts", *args, stdout=out)
    return out.getvalue()


def test_channels_and_rules_from_the_command_line(receiver: WebhookReceiver) -> None:
    added = _run("channel-add", "ops", "--webhook", receiver.url("/secret-path"))
    assert "signing secret (shown once): " + Channel.objects.get().signing_secret in added
    assert "secret-path" not in added
    assert "signing secret" not in _run("channel-add", "chat", "--webhook",
                                        receiver.url("/s2"), "--slack")  # fmt: skip
    _run("channel-add", "mail", "--email", "oncall@example.com")
    _run("rule-add", "shop-new", "--kind", "new_group", "--channel", "ops", "--channel", "mail",
         "--collection", "shop", "--min-interval", "15")  # fmt: skip
    _run("rule-add", "spikes", "--kind", "spike", "--channel", "chat", "--spike-count", "10",
         "--spike-factor", "3", "--spike-window-hours", "1")  # fmt: skip
    rule = Rule.objects.get(name="shop-new")
    assert (rule.collection, rule.min_interval_minutes) == ("shop", 15)
    assert {c.name for c in rule.channels.all()} == {"ops", "mail"}
    listed = _run("list")
    shop_new = "rule shop-new\tnew_group\ton\tcollection=shop source=production\tevery 15 min"
    assert f"{shop_new}\t-> mail,ops" in listed
    assert "secret-path" not in listed
    assert "test sent to ops: answer 200" in _run("test", "ops")
    assert receiver.wait_for(1)[0].signature_ok is None  # the receiver knows no secret here


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="address_not_allowed"):
        _run("channel-add", "meta", "--webhook", "http://169.254.169.254/")
    with pytest.raises(CommandError, match="no channel named nope"):
        _run("rule-add", "r", "--kind", "new_group", "--channel", "nope")
    _run("channel-add", "mail", "--email", "oncall@example.com")
    with pytest.raises(CommandError, match="spike_count"):
        _run("rule-add", "r", "--kind", "spike", "--channel", "mail")
    with pytest.raises(CommandError, match="no channel named x"):
        _run("test", "x")
