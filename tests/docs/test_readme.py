"""The README is the front door: short, and every link in it resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_readme_stays_a_front_door() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) < 250


def test_every_link_in_the_readme_resolves() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links its documentation"
    missing = []
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if not target.exists():
            missing.append(link)
            continue
        if anchor and target.suffix == ".md":
            headings = re.findall(r"^#+\s+(.*)$", target.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
            if anchor not in slugs:
                missing.append(link)
    assert not missing, missing


def test_the_readme_names_the_two_commands_and_every_door() -> None:
    text = README.read_text(encoding="utf-8")
    for needed in (
        "make demo",
        "make test",
        "curl",
        "Reporter(",
        "OTEL_EXPORTER_OTLP",
        "NextActionContract",
    ):
        assert needed in text, needed
