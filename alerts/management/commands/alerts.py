"""`manage.py alerts channel-add|rule-add|list|test`: alerting set up from code or a script."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from alerts import services
from alerts.models import PRODUCTION_SOURCE, Channel, ChannelKind, Rule, RuleKind


class Command(BaseCommand):
    help = "Add alert channels and rules, list them, send a test."

    def add_arguments(self, parser: ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        channel = commands.add_parser("channel-add", help="add a channel")
        channel.add_argument("name")
        where = channel.add_mutually_exclusive_group(required=True)
        where.add_argument("--webhook", metavar="URL", help="a signed JSON webhook")
        where.add_argument("--email", metavar="ADDR", help="an email address")
        channel.add_argument("--slack", action="store_true",
                             help="the webhook is Slack-compatible ({\"text\": ...})")  # fmt: skip

        rule = commands.add_parser("rule-add", help="add a rule")
        rule.add_argument("name")
        rule.add_argument("--kind", required=True, choices=RuleKind.values)
        rule.add_argument("--channel", required=True, action="append", metavar="NAME",
                          help="a channel's name (repeat for several)")  # fmt: skip
        for name in ("collection", "stage", "reason", "tool", "lane", "execution-state"):
            rule.add_argument(f"--{name}", default="")
        rule.add_argument(
            "--source", default=PRODUCTION_SOURCE,
            help="production (the default: every source but Quality Lab), any, or one source",
        )  # fmt: skip
        rule.add_argument("--min-interval", type=int, default=60, metavar="MINUTES")
        rule.add_argument("--spike-count", type=int, metavar="N")
        rule.add_argument("--spike-factor", type=float, metavar="X")
        rule.add_argument("--spike-window-hours", type=int, metavar="HOURS")
        rule.add_argument("--wait-minutes", type=int, metavar="T")
        rule.add_argument("--pass-rate-floor", type=float, metavar="R")

        commands.add_parser("list", help="list channels and rules")
        test = commands.add_parser("test", help="send a test message on a channel")
        test.add_argument("channel")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, "_" + options["command"].replace("-", "_"))(options)

    def _channel_add(self, options: dict[str, Any]) -> None:
        if options["email"]:
            if options["slack"]:
                raise CommandError("--slack goes with --webhook.")
            kind, target = ChannelKind.EMAIL, options["email"]
        else:
            kind = ChannelKind.SLACK if options["slack"] else ChannelKind.WEBHOOK
            target = options["webhook"]
        try:
            channel, secret = services.channel_create(
                name=options["name"], kind=kind, target=target
            )
        except services.ChannelError as exc:
            raise CommandError(f"{exc.code}: {exc}") from None
        self.stdout.write(f"channel {channel.name} ({channel.kind}) -> {channel.masked_target}")
        if secret:
            self.stdout.write(f"signing secret (shown once): {secret}")

    def _rule_add(self, options: dict[str, Any]) -> None:
        names = options["channel"]
        channels = list(Channel.objects.filter(name__in=names))
        missing = sorted(set(names) - {channel.name for channel in channels})
        if missing:
            raise CommandError(f"no channel named {', '.join(missing)}")
        fields = {
            "collection": options["collection"], "stage": options["stage"],
            "reason": options["reason"], "tool": options["tool"], "lane": options["lane"],
            "source": "" if options["source"] == "any" else options["source"],
            "execution_state": options["execution_state"],
            "min_interval_minutes": options["min_interval"],
            "spike_count": options["spike_count"], "spike_factor": options["spike_factor"],
            "spike_window_hours": options["spike_window_hours"],
            "wait_minutes": options["wait_minutes"], "pass_rate_floor": options["pass_rate_floor"],
        }  # fmt: skip
        try:
            rule = services.rule_create(
                name=options["name"], kind=options["kind"], channels=channels, **fields
            )
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(problems) from None
        self.stdout.write(f"rule {rule.name} ({rule.kind}) -> {', '.join(names)}")

    def _list(self, options: dict[str, Any]) -> None:
        for channel in Channel.objects.all():
            self.stdout.write(f"channel {channel.name}\t{channel.kind}\t{channel.masked_target}")
        for rule in Rule.objects.prefetch_related("channels"):
            filters = " ".join(f"{k}={v}" for k, v in rule.filters().items()) or "-"
            channels = ",".join(channel.name for channel in rule.channels.all())
            state = "on" if rule.enabled else "off"
            self.stdout.write(
                f"rule {rule.name}\t{rule.kind}\t{state}\t{filters}\t"
                f"every {rule.min_interval_minutes} min\t-> {channels}"
            )

    def _test(self, options: dict[str, Any]) -> None:
        channel = Channel.objects.filter(name=options["channel"]).first()
        if channel is None:
            raise CommandError(f"no channel named {options['channel']}")
        delivery = services.channel_test(channel=channel)
        if delivery.status != "sent":
            raise CommandError(
                f"test to {channel.name} failed: {delivery.error or delivery.answer_code}"
            )
        self.stdout.write(f"test sent to {channel.name}: answer {delivery.answer_code}")
