from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from triage.upkeep import partitions


class Command(BaseCommand):
    help = (
        "PostgreSQL: give each day retention keeps, and the days ahead, its partition of the "
        "failure records (what the hourly beat task does), moving any of their records out "
        "of the default partition; then list the partitions. On SQLite, which keeps one "
        "table, it says so and does nothing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            help="days behind today to cover (default: TRIAGE_RETENTION_DAYS, or 1 when off)",
        )
        parser.add_argument(
            "--list-only", action="store_true", help="create nothing; list what is there"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not partitions.partitioned():
            self.stdout.write(
                "The records are one table here (SQLite, or PostgreSQL before its migration): "
                "nothing to do."
            )
            return
        days = options["days"]
        if days is None:
            days = settings.TRIAGE_RETENTION_DAYS
        if days < 0:
            raise CommandError("--days must be 0 or more.")
        created = []
        if not options["list_only"]:
            window = partitions.window_days(now=timezone.now(), retention_days=days)
            created = partitions.ensure_days(window)
        attached = partitions.attached_days()
        self.stdout.write(
            f"Created {len(created)} day partitions; {len(attached)} days have one"
            + (f", {attached[0]:%Y-%m-%d} to {attached[-1]:%Y-%m-%d}." if attached else ".")
        )
        self.stdout.write(
            f"Records waiting in the default partition: {partitions.default_count():,}."
        )
