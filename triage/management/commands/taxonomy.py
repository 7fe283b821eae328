from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from triage.intake.envelope import taxonomy_document


class Command(BaseCommand):
    help = (
        "Print the taxonomy as GET /api/v1/taxonomy answers it (stages, reasons, lanes and "
        "envelope codes, in English and Korean), for runtimes that bundle a snapshot."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--compact", action="store_true", help="One line, no indentation (default: indented)."
        )
        parser.add_argument(
            "--etag", action="store_true", help="Print only the ETag the endpoint would send."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        body, etag = taxonomy_document()
        if options["etag"]:
            self.stdout.write(etag)
            return
        indent = None if options["compact"] else 2
        self.stdout.write(json.dumps(body, ensure_ascii=False, indent=indent))
