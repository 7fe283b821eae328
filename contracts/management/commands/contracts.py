"""manage.py contracts scan | report [--days 30] [--collection C] [--tool T] [--json OUT|-]"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from contracts.forms import ContractsFilterForm
from contracts.report import overview_document
from contracts.scan import contracts_scan_all
from contracts.selectors import contracts_overview


class Command(BaseCommand):
    help = (
        "Seed 004's rollout plan: `scan` counts what arrived (the beat does it every minute), "
        "`report` prints which tools to contract first and how well each keeps its contract."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("scan", help="Count everything not yet counted, then stop.")
        report = actions.add_parser("report", help="The contracts page as text or JSON.")
        report.add_argument("--days", type=int, default=30)
        report.add_argument("--collection")
        report.add_argument("--tool")
        report.add_argument(
            "--json", metavar="OUT", help="Write JSON to OUT (- for standard output)."
        )
        report.add_argument(
            "--no-scan", action="store_true", help="Report what is counted, without scanning."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "scan":
            self._scan(verbose=True)
            return
        form = ContractsFilterForm(
            {
                key: options[key]
                for key in ("days", "collection", "tool")
                if options.get(key) is not None
            }
        )
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            raise CommandError(f"--{field}: {' '.join(str(error) for error in errors)}")
        if not options["no_scan"]:
            self._scan(verbose=False)
        overview = contracts_overview(now=timezone.now(), filters=form.filters())
        document = overview_document(overview)
        if options["json"]:
            text = json.dumps(document, indent=2, ensure_ascii=False)
            if options["json"] == "-":
                self.stdout.write(text)
            else:
                with open(options["json"], "w", encoding="utf-8") as out:
                    out.write(text + "\n")
                self.stderr.write(f"Wrote {len(overview.tools)} tools to {options['json']}.")
            return
        self._print(document)

    def _scan(self, *, verbose: bool) -> None:
        total = 0
        for result in contracts_scan_all():
            total += result.total
            if verbose and sys.stdout.isatty():
                self.stdout.write(f"  {total} rows counted...", ending="\r")
        if verbose:
            self.stdout.write(f"Counted {total} new rows.")

    def _print(self, document: dict[str, Any]) -> None:
        self.stdout.write(
            f"Contracts over the last {document['days']} days "
            f"(first batch: {', '.join(document['first_batch']) or 'none'})"
        )
        for tool in document["tools"]:
            met = [code for code, criterion in tool["criteria"].items() if criterion["met"]]
            broken = sum(tool["retry_rules_broken"].values())
            mark = "*" if tool["first_batch"] else " "
            self.stdout.write(
                f"{mark}{tool['rank']:>4}  {tool['collection'] or '-'}/{tool['tool']}  "
                f"{tool['state']}  criteria: {', '.join(met) or '-'}  rules broken: {broken}"
            )
