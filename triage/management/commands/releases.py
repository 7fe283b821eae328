from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from triage.models import Release
from triage.services import ReleaseError, release_declare


class Command(BaseCommand):
    help = (
        "Declare a release of a collection (as POST /api/v1/releases does) or list the "
        "releases the desk knows."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        add = commands.add_parser("add", help="Declare COLLECTION's release VERSION.")
        add.add_argument("collection")
        add.add_argument("version")
        add.add_argument(
            "--deployed-at",
            default="",
            help="ISO 8601 with a time zone, such as 2026-06-01T09:00:00+09:00 (default: now).",
        )
        add.add_argument("--url", default="", help="A link to the release (http or https).")
        listing = commands.add_parser("list", help="The releases, newest deployment first.")
        listing.add_argument("--collection", default="", help="Only this collection's.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["command"] == "add":
            self._add(options)
        else:
            self._list(options)

    def _add(self, options: dict[str, Any]) -> None:
        try:
            release, created = release_declare(
                collection=options["collection"],
                version=options["version"],
                deployed_at=options["deployed_at"] or timezone.now(),
                url=options["url"],
            )
        except ReleaseError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        said = "declared" if created else "already declared"
        self.stdout.write(
            f"{said}: {release.collection} {release.version} "
            f"deployed at {release.deployed_at.isoformat()}"
        )

    def _list(self, options: dict[str, Any]) -> None:
        releases = Release.objects.order_by("collection", "-deployed_at", "-id")
        if options["collection"]:
            releases = releases.filter(collection=options["collection"])
        for release in releases.iterator():
            line = f"{release.collection}\t{release.version}\t{release.deployed_at.isoformat()}"
            self.stdout.write(f"{line}\t{release.url}" if release.url else line)
