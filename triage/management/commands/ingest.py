from __future__ import annotations

import json
from argparse import ArgumentParser
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.json_limits import JSONTooDeep, loads_bounded
from core.storable import has_unstorable_text
from triage.intake.ingest import ACCEPTED, CONFLICT, DUPLICATE, REJECTED, batch_ingest
from triage.models import IngestBatch


class Command(BaseCommand):
    help = (
        "Ingest an NDJSON file (one {type, id, body} item per line) through the same path as "
        "the API. Exits non-zero when any item was rejected."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--owner", default="cli", help="Idempotency namespace (default: cli)")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path} is not a file.")
        owner: str = options["owner"]
        limit = IngestBatch._meta.get_field("owner").max_length or 100
        if not owner or len(owner) > limit or has_unstorable_text(owner):
            raise CommandError(f"--owner must be 1-{limit} characters, without NUL.")
        items: list[Any] = []
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    items.append(loads_bounded(line, max_depth=settings.TRIAGE_JSON_MAX_DEPTH))
                except JSONTooDeep as exc:
                    raise CommandError(f"{path}:{number}: {exc} (TRIAGE_JSON_MAX_DEPTH).") from None
                except json.JSONDecodeError as exc:
                    raise CommandError(f"{path}:{number}: not JSON ({exc.msg}).") from None
                except ValueError:  # an integer of more digits than Python converts
                    raise CommandError(
                        f"{path}:{number}: not JSON (an integer of more than 4300 digits)."
                    ) from None
        totals: Counter[str] = Counter()
        codes: Counter[str] = Counter()
        size = settings.TRIAGE_INGEST_MAX_ITEMS
        for start in range(0, len(items), size):
            outcome = batch_ingest(owner=owner, items=items[start : start + size], channel="cli")
            for item in outcome.items:
                totals[item.status] += 1
                if item.error:
                    codes[item.error["code"]] += 1
                    line_no = start + item.index + 1
                    self.stderr.write(
                        f"item {line_no} ({item.client_id or 'no id'}): {item.status} "
                        f"{item.error['code']} {item.error['field']}: {item.error['message']}"
                    )
        self.stdout.write(
            f"{len(items)} items: {totals[ACCEPTED]} accepted, {totals[DUPLICATE]} duplicates, "
            f"{totals[CONFLICT]} conflicts, {totals[REJECTED]} rejected"
            + (f" ({', '.join(f'{c}: {n}' for c, n in codes.most_common())})" if codes else "")
        )
        if totals[REJECTED] or totals[CONFLICT]:
            raise CommandError("Some items were not stored.", returncode=1)
