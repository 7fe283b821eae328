from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from argparse import ArgumentParser
from collections import Counter
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from triage.demo_data import demo_items
from triage.models import ApiKey, IngestItem
from triage.services import api_key_create

DEMO_OWNER = "demo-runtime"
DEMO_ADMIN = ("admin", "triage-demo-admin")


class Command(BaseCommand):
    help = (
        "Migrate, create the demo logins, start web and worker, send the demo traffic through "
        "the real ingest API, and keep running until Ctrl-C."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
        parser.add_argument(
            "--no-serve", action="store_true", help="Load the demo, then stop web and worker."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        self._ensure_admin()
        port: int = options["port"]
        base_url = f"http://127.0.0.1:{port}"
        processes = [self._start_web(port)]
        try:
            self._wait_until_up(base_url, processes[0])
            self._load_traffic(base_url)
            if options["no_serve"]:
                self.stdout.write(self.style.SUCCESS("Demo loaded; web stopped (--no-serve)."))
                return
            processes.append(self._start_worker())
            self._print_welcome(base_url)
            while all(process.poll() is None for process in processes):
                time.sleep(1)
            raise CommandError("A demo process stopped; see its output above.")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping.")
        finally:
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()

    def _ensure_admin(self) -> None:
        username, password = DEMO_ADMIN
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()

    def _start_web(self, port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", "config.wsgi",
                "--bind", f"127.0.0.1:{port}",
                "--workers", "2", "--threads", "4",
                "--log-level", "warning",
            ]
        )  # fmt: skip

    def _start_worker(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker",
             "--loglevel", "WARNING", "--concurrency", "2"]
        )  # fmt: skip

    def _wait_until_up(self, base_url: str, web: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if web.poll() is not None:
                raise CommandError(
                    f"The web server exited (is port {base_url.rsplit(':', 1)[1]} taken? "
                    "Use DEMO_PORT=8001 make demo)."
                )
            try:
                with urllib.request.urlopen(f"{base_url}/healthz", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        raise CommandError("The web server did not answer within 30 s.")

    def _load_traffic(self, base_url: str) -> None:
        if IngestItem.objects.filter(owner=DEMO_OWNER).exists():
            self.stdout.write("Demo traffic already loaded; keeping it.")
            return
        ApiKey.objects.filter(name=DEMO_OWNER).delete()
        _, key = api_key_create(name=DEMO_OWNER, scopes=["ingest", "read"])
        items = list(demo_items(now=timezone.now()))
        totals: Counter[str] = Counter()
        for start in range(0, len(items), 250):
            request = urllib.request.Request(
                f"{base_url}/api/v1/ingest",
                data=json.dumps({"items": items[start : start + 250]}).encode(),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    result = json.load(response)
            except urllib.error.HTTPError as exc:
                raise CommandError(f"Ingest answered {exc.code}: {exc.read()[:500]!r}") from None
            for item in result["items"]:
                totals[item["status"]] += 1
        self.stdout.write(
            f"Sent {len(items)} demo items through POST /api/v1/ingest: "
            + ", ".join(f"{count} {status}" for status, count in sorted(totals.items()))
        )

    def _print_welcome(self, base_url: str) -> None:
        username, password = DEMO_ADMIN
        self.stdout.write(
            self.style.SUCCESS(f"\nTriage Desk is running at {base_url}/\n")
            + f"  admin login:  {username} / {password}   ({base_url}/admin/)\n"
            + f"  API docs:     {base_url}/api/docs/\n"
            + f"  failures API: {base_url}/api/v1/groups (signed in, or with a read key)\n"
            + "Press Ctrl-C to stop web and worker."
        )
