from __future__ import annotations

import time
from argparse import ArgumentParser
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from triage.models import RetentionRun, RetentionStatus
from triage.upkeep.retention import records_prune, records_prune_preview


def _when(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


class Command(BaseCommand):
    help = (
        "Prune failure records older than N days (default: TRIAGE_RETENTION_DAYS) in batches, "
        "keeping group counters, hourly buckets and facets exact, and record the run in the "
        "retention ledger. Shows progress on a terminal."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--days", type=int, help="age limit in days (default: TRIAGE_RETENTION_DAYS)"
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="records per transaction (default: TRIAGE_RETENTION_BATCH_SIZE)",
        )
        parser.add_argument(
            "--max-seconds",
            type=float,
            default=None,
            help="start no batch after this long (default: no limit)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would be removed; change nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days is None:
            days = settings.TRIAGE_RETENTION_DAYS
            if not days:
                self.stdout.write(
                    "Retention is off (TRIAGE_RETENTION_DAYS=0): nothing was pruned. "
                    "Pass --days N to prune by hand."
                )
                return
        if days < 1:
            raise CommandError("--days must be at least 1.")
        batch_size = options["batch_size"] or settings.TRIAGE_RETENTION_BATCH_SIZE
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")

        if options["dry_run"]:
            preview = records_prune_preview(days=days)
            self.stdout.write(
                f"Dry run: {preview.records} records in {preview.groups} groups and "
                f"{preview.runner_events} runner events occurred before "
                f"{_when(preview.cutoff)} (older than {days} days) and would be removed. "
                "Nothing was changed."
            )
            return

        tty = self.stdout.isatty()
        total = records_prune_preview(days=days).records if tty else 0
        started = time.monotonic()

        def progress(run: RetentionRun) -> None:
            if tty:
                self.stdout.write(
                    f"\rbatch {run.batches}: {run.records_deleted}/{total} records, "
                    f"{run.runner_events_deleted} runner events · "
                    f"{time.monotonic() - started:.1f} s\x1b[K",
                    ending="",
                )
                self.stdout.flush()

        run = records_prune(
            days=days,
            batch_size=batch_size,
            channel="cli",
            max_seconds=options["max_seconds"],
            on_batch=progress,
        )
        if tty and run.batches:
            self.stdout.write("")
        if run.status == RetentionStatus.SKIPPED:
            raise CommandError(
                f"Another prune is running; nothing was removed (retention run {run.pk})."
            )
        summary = (
            f"Retention run {run.pk} {run.status}: removed {run.records_deleted} records and "
            f"{run.runner_events_deleted} runner events older than {days} days "
            f"(before {_when(run.cutoff)}) in {run.batches} batches; "
            f"{run.groups_touched} groups touched, {run.groups_emptied} left with no records."
        )
        if run.status == RetentionStatus.FAILED:
            raise CommandError(f"{summary} It failed: {run.error}")
        if run.status == RetentionStatus.PARTIAL:
            summary += " Stopped at --max-seconds; run it again to go on."
        self.stdout.write(summary)
