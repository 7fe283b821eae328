"""The dependency rules (docs/architecture.md), checked over every module's imports with
`ast`: a new import that breaks one fails here, naming the module and the import."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = (
    "core", "triage", "learning", "qualitylab", "alerts", "contracts", "fixes", "demo", "config"
)  # fmt: skip
# What each part may not import (the project level, config and demo, may import every app).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "core": ("triage", "learning", "qualitylab", "alerts", "contracts", "fixes", "demo", "config"),
    "triage": ("learning", "qualitylab", "alerts", "contracts", "fixes", "demo"),
    "learning": ("alerts", "contracts", "fixes", "demo"),
    "qualitylab": ("alerts", "contracts", "fixes", "demo"),
    "contracts": ("alerts", "fixes", "demo"),
    "fixes": ("alerts", "demo"),
    "alerts": ("demo",),
}
# The vocabulary imports no model, page or door: only itself and the shared core.
VOCABULARY = ("triage/taxonomy.py", "triage/lanes.py")
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


def test_the_vocabulary_imports_no_model_page_or_door() -> None:
    allowed = {"triage.taxonomy", "triage.lanes"}
    broken = []
    for name in VOCABULARY:
        for module, names, line in _imports(ROOT / name):
            # "from triage import taxonomy" imports triage.taxonomy.
            imported = {f"{module}.{item}" for item in names} if module == "triage" else {module}
            outside = {
                item for item in imported if _top(item) in APPS and _top(item) != "core"
            } - allowed
            if outside:
                broken.append(f"{name}:{line} imports {sorted(outside)}")
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
