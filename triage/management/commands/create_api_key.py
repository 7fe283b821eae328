from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from organisation.models import Team
from triage.services import ApiKeyError, api_key_create


class Command(BaseCommand):
    help = "Create an API key for a runtime and print it once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--scopes", default="ingest", help="Comma-separated: ingest,read")
        parser.add_argument("--owner", default="", help="Idempotency namespace (default: NAME)")
        parser.add_argument("--expires-days", type=int, default=None)
        parser.add_argument(
            "--collection",
            action="append",
            default=[],
            dest="collections",
            help="A collection the key serves (repeat for more; none and no --team: every one)",
        )
        parser.add_argument("--team", default="", help="Serve the collections this team owns")

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = [scope.strip() for scope in options["scopes"].split(",") if scope.strip()]
        team = None
        if options["team"]:
            team = Team.objects.filter(name=options["team"]).first()
            if team is None:
                raise CommandError(f"No team is named {options['team']!r}.")
        try:
            api_key, full_key = api_key_create(
                name=options["name"],
                scopes=scopes,
                owner=options["owner"],
                expires_days=options["expires_days"],
                collections=options["collections"],
                team=team,
            )
        except ApiKeyError as exc:
            raise CommandError(str(exc)) from None
        serves = ", ".join(
            ([f"team {team.name}"] if team is not None else []) + list(api_key.collections)
        )
        self.stderr.write(
            f"Created API key {api_key.name!r} (scopes: {', '.join(api_key.scopes)}; "
            f"serves: {serves or 'every collection'}). Store it now: it is not shown again."
        )
        self.stdout.write(full_key)
