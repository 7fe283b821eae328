"""docs/configuration.md lists exactly the environment variables config/settings.py reads,
so the table cannot drift from the code: a variable added to the settings without a row, or
a row left behind for a variable the settings no longer read, fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
SETTINGS_HEADING = "## Environment variables"
ELSEWHERE_HEADING = "## Read elsewhere"
VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def settings_variables() -> set[str]:
    """Every variable config/settings.py reads through config.env's helpers (env_str,
    env_int, ...): each call's first argument, a string literal."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("env_")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    assert {"DATABASE_URL", "DJANGO_SECRET_KEY", "TRIAGE_ENVELOPE_CODES"} <= names, names
    return names


def _section(text: str, heading: str) -> str:
    start = text.index(heading + "\n")
    following = re.search(r"^## ", text[start + len(heading) :], re.MULTILINE)
    return text[start : start + len(heading) + following.start()] if following else text[start:]


def _table_rows(section: str) -> list[list[str]]:
    """The cells of every table row, header and separator rows left out."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] == "variable":
            continue
        rows.append(cells)
    return rows


def documented_settings_variables() -> list[str]:
    section = _section(PAGE.read_text(encoding="utf-8"), SETTINGS_HEADING)
    names = []
    for cells in _table_rows(section):
        found = VARIABLE.findall(cells[0])
        assert len(found) == 1, f"one variable a row, in backticks: {cells[0]!r}"
        names.append(found[0])
    return names


def test_the_page_lists_every_variable_settings_reads_and_no_other() -> None:
    documented = documented_settings_variables()
    duplicated = sorted({name for name in documented if documented.count(name) > 1})
    assert not duplicated, f"listed twice on docs/configuration.md: {duplicated}"
    read = settings_variables()
    missing = sorted(read - set(documented))
    stale = sorted(set(documented) - read)
    assert not missing, (
        f"config/settings.py reads {missing}, which docs/configuration.md does not list: "
        f"add a row under '{SETTINGS_HEADING}'"
    )
    assert not stale, (
        f"docs/configuration.md lists {stale} under '{SETTINGS_HEADING}', which "
        "config/settings.py does not read: remove the row, or move it to 'Read elsewhere'"
    )


def test_each_variable_read_elsewhere_is_named_by_its_file() -> None:
    section = _section(PAGE.read_text(encoding="utf-8"), ELSEWHERE_HEADING)
    rows = _table_rows(section)
    assert rows
    read_by_settings = settings_variables()
    for cells in rows:
        (name,) = VARIABLE.findall(cells[0])
        path = ROOT / cells[1].strip("`")
        assert path.is_file(), f"{name}: {cells[1]} is not a file of the repository"
        assert name in path.read_text(encoding="utf-8"), f"{cells[1]} does not read {name}"
        assert name not in read_by_settings, f"{name} is read by config/settings.py"
