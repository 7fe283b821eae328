"""What the docs state about the code is checked against the code: the reason tables of the
concepts pages against the taxonomy the desk serves, and every file, module and function the
pages name against the repository, so a rename or a move that forgets the docs fails here."""

from __future__ import annotations

import importlib
import io
import json
import re
from pathlib import Path
from typing import Any

from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
APPS = (
    "config", "core", "triage", "learning", "qualitylab", "alerts", "contracts", "fixes",
    "triage_desk_client",
)  # fmt: skip
DOTTED = re.compile(rf"((?:{'|'.join(APPS)})(?:\.[A-Za-z_]\w*)+)(?:\(.*\))?")
# Dotted words in backticks that are fields, not code.
NOT_CODE = {"learning.expected_target"}


def _taxonomy() -> dict[str, Any]:
    out = io.StringIO()
    call_command("taxonomy", stdout=out)
    return json.loads(out.getvalue())


def _reason_rows(page: Path) -> dict[str, list[str]]:
    """The reason table: the rows whose first cell is a reason code and second a stage."""
    stages = {stage["code"] for stage in _taxonomy()["stages"]}
    rows = {}
    for line in page.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1] in stages:
            rows[cells[0]] = cells[1:]
    return rows


def test_the_concepts_pages_list_every_reason_as_the_taxonomy_classifies_it() -> None:
    taxonomy = _taxonomy()
    for page, language in ((DOCS / "concepts.md", "en"), (DOCS / "ko" / "concepts.md", "ko")):
        documented = _reason_rows(page)
        expected = {
            reason["code"]: [
                reason["stage"],
                reason["lane"],
                reason["api_called"],
                reason["execution_state"],
                reason["meaning"][language].replace("|", "\\|"),
            ]
            for reason in taxonomy["reasons"]
        }
        wrong = [
            f"| `{code}` | `{row[0]}` | `{row[1]}` | {row[2]} | `{row[3]}` | {row[4]} |"
            for code, row in expected.items()
            if documented.get(code) != row
        ]
        assert not wrong, f"{page.relative_to(ROOT)}: these rows should read\n" + "\n".join(wrong)
        stale = sorted(set(documented) - set(expected))
        assert not stale, f"{page.relative_to(ROOT)} lists reasons the taxonomy lacks: {stale}"
        assert list(documented) == list(expected), "in the taxonomy's order"


def _code_spans() -> list[tuple[Path, str]]:
    spans = []
    for page in sorted(DOCS.rglob("*.md")):
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        spans += [(page, match.group(1)) for match in CODE_SPAN.finditer(text)]
    return spans


def test_every_file_the_docs_name_exists() -> None:
    tops = {path.name for path in ROOT.iterdir() if path.is_dir()} - {"var", "site"}
    missing = []
    for page, span in _code_spans():
        first = span.split("/")[0]
        if "/" not in span or first not in tops or re.search(r"[\s<>{}*$?=:|]", span):
            continue
        if not (ROOT / span.rstrip("/")).exists():
            missing.append(f"{page.relative_to(ROOT)}: {span}")
    assert not missing, "the docs name files that do not exist:\n" + "\n".join(missing)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for name in parts[end:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_module_and_function_the_docs_name_exists() -> None:
    missing = []
    for page, span in _code_spans():
        match = DOTTED.fullmatch(span)
        if match and match.group(1) not in NOT_CODE and not _resolves(match.group(1)):
            missing.append(f"{page.relative_to(ROOT)}: {span}")
    assert not missing, "the docs name code that does not exist:\n" + "\n".join(missing)
