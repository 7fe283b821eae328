"""The dependency rules (docs/architecture.md), checked over every module's imports with
`ast`: a new import that breaks one fails here, naming the module and the import."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = (
    "core", "organisation", "triage", "learning", "qualitylab", "alerts", "contracts", "fixes",
    "demo", "config",
)  # fmt: skip
# What each part may not import (the project level, config and demo, may import every app).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "core": ("triage", "learning", "qualitylab", "alerts", "contracts", "fixes", "demo", "config"),
    "organisation": (
        "triage",
        "learning",
        "qualitylab",
        "alerts",
        "contracts",
        "fixes",
        "demo",
        "config",
    ),
    "triage": ("learning", "qualitylab", "alerts", "contracts", "fixes", "demo"),
    "learning": ("alerts", "contracts", "fixes", "demo"),
    "qualitylab": ("alerts", "contracts", "fixes", "demo"),
    "contracts": ("alerts", "fixes", "demo"),
    "fixes": ("alerts", "demo"),
    "alerts": ("fixes", "demo"),
}
# The vocabulary imports no model, page or door: only itself and the shared core.
VOCABULARY = "triage.vocabulary"
# The pages and the read API are triage's leaves: only triage/urls.py, which routes to them,
# imports them (settings name the pages' context processors by string).
LEAVES = ("triage.pages", "triage.api")
ROUTER = "triage/urls.py"
CLIENT = ROOT / "client" / "triage_desk_client"


def _modules(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*.py")):
        if "migrations" not in path.parts:
            yield path


def _imports(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [alias.name for alias in node.names], node.lineno


def _top(module: str) -> str:
    return module.split(".")[0]


def test_each_part_imports_only_what_it_may() -> None:
    broken = []
    for part, forbidden in FORBIDDEN.items():
        for path in _modules(ROOT / part):
            for module, _, line in _imports(path):
                if _top(module) in forbidden:
                    broken.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not broken, "\n".join(broken)


def _imported(module: str, names: list[str]) -> set[str]:
    """The dotted names an import takes: "from triage import taxonomy" takes
    triage.taxonomy, "from triage.models import ApiKey" triage.models.ApiKey."""
    return {f"{module}.{name}" for name in names} or {module}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_the_vocabulary_imports_no_model_page_or_door() -> None:
    broken = []
    for path in _modules(ROOT.joinpath(*VOCABULARY.split("."))):
        for module, names, line in _imports(path):
            outside = {
                name
                for name in _imported(module, names)
                if _top(name) in APPS and _top(name) != "core" and not _within(name, VOCABULARY)
            }
            if outside:
                broken.append(f"{path.relative_to(ROOT)}:{line} imports {sorted(outside)}")
    assert not broken, "\n".join(broken)


def test_only_the_urls_import_the_pages_and_the_read_api() -> None:
    broken = []
    for part in APPS:
        for path in _modules(ROOT / part):
            here = _dotted(path)
            if str(path.relative_to(ROOT)) == ROUTER:
                continue
            for module, names, line in _imports(path):
                for leaf in LEAVES:
                    taken = [name for name in _imported(module, names) if _within(name, leaf)]
                    if taken and not _within(here, leaf):
                        broken.append(f"{path.relative_to(ROOT)}:{line} imports {sorted(taken)}")
    assert not broken, "\n".join(broken)


def test_the_client_imports_nothing_of_the_desk() -> None:
    broken = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _modules(CLIENT)
        for module, _, line in _imports(path)
        if _top(module) in APPS
    ]
    assert not broken, "\n".join(broken)


def test_no_module_takes_another_modules_private_name() -> None:
    broken = []
    for part in (*APPS, "client"):
        for path in _modules(ROOT / part):
            for module, names, line in _imports(path):
                if _top(module) not in (*APPS, "triage_desk_client"):
                    continue
                private = [name for name in names if name.startswith("_")]
                if private:
                    broken.append(f"{path.relative_to(ROOT)}:{line} takes {private} of {module}")
    assert not broken, "\n".join(broken)


def test_the_rules_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from triage.intake.ingest import _row_sources\nimport alerts.models\n")
    found = list(_imports(module))
    assert ("triage.intake.ingest", ["_row_sources"], 1) in found
    assert ("alerts.models", [], 2) in found
    assert _within("triage.pages.groups", "triage.pages")
    assert not _within("triage.pagesx", "triage.pages")
    assert _imported("triage", ["pages"]) == {"triage.pages"}
