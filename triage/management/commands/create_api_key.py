from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from triage.services import ApiKeyError, api_key_create


class Command(BaseCommand):
    help = "Create an API key for a runtime and print it once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--scopes", default="ingest", help="Comma-separated: ingest,read")
        parser.add_argument("--owner", default="", help="Idempotency namespace (default: NAME)")
        parser.add_argument("--expires-days", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        scopes = [scope.strip() for scope in options["scopes"].split(",") if scope.strip()]
        try:
            api_key, full_key = api_key_create(
                name=options["name"],
                scopes=scopes,
                owner=options["owner"],
                expires_days=options["expires_days"],
            )
        except ApiKeyError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Created API key {api_key.name!r} (scopes: {', '.join(api_key.scopes)}). "
            "Store it now: it is not shown again."
        )
        self.stdout.write(full_key)
