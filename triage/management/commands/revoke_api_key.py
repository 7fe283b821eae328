from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from triage.models import ApiKey
from triage.services import api_key_revoke


class Command(BaseCommand):
    help = "Revoke an API key by name; requests with it are refused from now on."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        api_key = ApiKey.objects.filter(name=options["name"]).first()
        if api_key is None:
            raise CommandError(f"No API key named {options['name']!r}.")
        api_key_revoke(api_key=api_key)
        self.stdout.write(f"Revoked {api_key.name!r}.")
