"""The demo launcher stops what it started, even when the stop signal comes twice, allows
execute cases and webhooks exactly the loopback ports of its sandbox and receiver, and ends
its console with the addresses and logins (the alert deliveries go to a log file)."""

from __future__ import annotations

import io
import ipaddress
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError

from alerts import demo as alerts_demo
from core.outbound import PrivateAllowance
from demo.management.commands.demo import AlertLog, Command, _interrupt, stop_processes

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = ipaddress.ip_address("127.0.0.1")

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_a_second_stop_signal_does_not_leave_a_child_running() -> None:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    child = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # make forwards SIGTERM to its child while the process group gets it too.
    second_signal = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        signal.signal(signal.SIGTERM, _interrupt)
        second_signal.start()
        started = time.monotonic()
        stop_processes([child, polite], grace_seconds=2.0)
        second_signal.join()  # delivered while stopping, so ignored
        assert time.monotonic() - started < 20
        assert child.poll() == -signal.SIGKILL
        assert polite.poll() == -signal.SIGTERM
    finally:
        second_signal.cancel()
        if second_signal.is_alive():
            second_signal.join()
        for process in (child, polite):
            if process.poll() is None:
                process.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("port", ["8090", "9000"])
def test_make_demo_allows_the_sandboxs_port_and_no_other(port: str) -> None:
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo", f"DEMO_SANDBOX_PORT={port}"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=30,
    ).stdout  # fmt: skip
    [allowed] = re.findall(r"QUALITYLAB_ALLOWED_PRIVATE_HOSTS=(\S+)", planned)
    assert f"DEMO_SANDBOX_PORT={port}" in planned
    assert allowed == f"127.0.0.1:{port}"
    allowance = PrivateAllowance.parse(allowed.split(","))
    assert allowance.allows("127.0.0.1", LOOPBACK, port=int(port))
    for other in (5432, 6379, 8000, 8091):
        assert not allowance.allows("127.0.0.1", LOOPBACK, port=other)


def test_the_demo_asks_for_the_sandboxs_host_and_port(settings: Any) -> None:
    settings.QUALITYLAB_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1:8090"]
    Command()._check_sandbox_allowed(8090)
    with pytest.raises(CommandError) as refused:
        Command()._check_sandbox_allowed(9000)
    assert "QUALITYLAB_ALLOWED_PRIVATE_HOSTS=127.0.0.1:9000 python manage.py demo" in str(
        refused.value
    )


def test_the_demo_alerts_allow_the_receivers_port_only(settings: Any) -> None:
    settings.ALERTS_ALLOWED_HOSTS = ["hooks.lan"]
    environment = alerts_demo.environment(
        webhook_port=8091, smtp_port=8025, base_url="http://127.0.0.1:8000"
    )
    assert environment["ALERTS_ALLOWED_HOSTS"] == "127.0.0.1:8091,hooks.lan"
    assert (environment["EMAIL_HOST"], environment["EMAIL_PORT"]) == ("127.0.0.1", "8025")
    allowance = PrivateAllowance.parse(environment["ALERTS_ALLOWED_HOSTS"].split(","))
    assert allowance.allows("127.0.0.1", LOOPBACK, port=8091)
    assert not allowance.allows("127.0.0.1", LOOPBACK, port=5432)


def test_alert_deliveries_go_to_a_log_file_and_the_console_gets_one_line(tmp_path: Path) -> None:
    path = tmp_path / "var" / "demo-alerts.log"
    log = AlertLog(path)
    log.write("[alerts] webhook (signature ok): demo-new_group [new_group] 31 groups (digest)")
    log.write("[alerts] Slack-compatible webhook: Triage Desk: 31 new groups")
    log.write("[alerts] email to oncall@demo.invalid: Triage Desk: 31 new groups")
    log.write("[alerts] webhook (signature ok): demo-spike [spike] execute/http_5xx http://x/")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    assert lines[0].endswith("[alerts] webhook (signature ok): demo-new_group [new_group] "
                             "31 groups (digest)")  # fmt: skip
    summary = log.summary()
    assert summary.startswith("Alerts: 4 deliveries so far (1 Slack, 2 webhook, 1 email)")
    assert str(path) in summary and "\n" not in summary
    log.close()
    log.write("[alerts] email to oncall@demo.invalid: after the stop")  # a late one: no error
    assert len(path.read_text(encoding="utf-8").splitlines()) == 4


def test_the_demo_console_ends_with_the_addresses_and_logins(tmp_path: Path) -> None:
    log = AlertLog(tmp_path / "demo-alerts.log")
    for _ in range(81):  # what the demo's traffic fires
        log.write("[alerts] webhook (signature ok): demo-spike [spike] execute/http_5xx")
    out = io.StringIO()
    Command(stdout=out)._print_welcome(
        "http://127.0.0.1:8000", "http://127.0.0.1:8001", [], alerts=log.summary()
    )
    lines = out.getvalue().splitlines()
    assert not any(line.startswith("[alerts]") for line in lines)
    [summary] = [line for line in lines if line.startswith("Alerts:")]
    assert summary.startswith("Alerts: 81 deliveries so far")
    running = next(i for i, line in enumerate(lines) if "Triage Desk is running" in line)
    assert lines.index(summary) < running
    tail = lines[running:]
    assert "admin / triage-demo-admin (admin)" in tail[1]
    assert "operator-ko / triage-demo-operator-ko" in tail[1]
    assert tail[-1].startswith("  alerts:       http://127.0.0.1:8000/alerts/")
    assert all(line.startswith("  ") and "http://127.0.0.1:800" in line for line in tail[2:])


@pytest.mark.django_db
def test_the_demo_has_two_teams_whose_leads_see_only_their_own() -> None:
    from django.contrib.auth import get_user_model

    from fixes import demo as fixes_demo
    from organisation import access
    from organisation.models import Membership

    Command(stdout=io.StringIO())._ensure_admin()
    Command(stdout=io.StringIO())._ensure_admin()  # a second start changes nothing
    people = get_user_model().objects
    lead = people.get(username="checkout-lead")
    assert {
        name
        for name in ("shop", "shop-orders", "shop-members", fixes_demo.COLLECTION)
        if access.can_see(lead, name)
    } == {"shop", "shop-orders", fixes_demo.COLLECTION}
    other = people.get(username="fulfilment-lead")
    assert access.can_see(other, "shop-logistics") and not access.can_see(other, "shop")
    viewer = people.get(username="viewer")
    assert all(access.can_see(viewer, name) for name in ("shop", "shop-logistics", "billing-mcp"))
    assert set(
        Membership.objects.filter(person=people.get(username="operator-ko")).values_list(
            "role", flat=True
        )
    ) == {"operator"}
    out = io.StringIO()
    Command(stdout=out)._print_welcome(
        "http://127.0.0.1:8000", "http://127.0.0.1:8001", [], alerts=""
    )
    assert "checkout-lead / triage-demo-checkout-lead (operator of checkout only)" in out.getvalue()
