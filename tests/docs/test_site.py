"""The docs site builds strictly and works offline: nothing it loads comes from elsewhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

# A script, style sheet, font or image the page would fetch from another host. Links a
# person may follow (<a href="https://...">) are not fetched and are not matched.
EXTERNAL_ASSET = re.compile(
    r"""<(?:script|link|img|iframe|source|audio|video)\b[^>]*\b(?:src|href|srcset)\s*=\s*["']?"""
    r"""(?:https?:)?//""",
    re.IGNORECASE,
)
CSS_EXTERNAL = re.compile(r"""(?:url\(|@import)\s*["']?(?:https?:)?//""", re.IGNORECASE)
FONT_CDNS = ("fonts.googleapis.com", "fonts.gstatic.com")


def _pages(site: Path) -> list[Path]:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 30, pages
    return pages


def test_the_strict_build_writes_every_page_of_the_nav(built_site: Path) -> None:
    for page in (
        "index.html",
        "getting-started/index.html",
        "concepts/index.html",
        "configuration/index.html",
        "architecture/index.html",
        "sending/otlp/index.html",
        "pages/triage/index.html",
        "ko/getting-started/index.html",
        "ko/concepts/index.html",
    ):
        assert (built_site / page).is_file(), page
    assert (built_site / "search" / "search_index.json").is_file()


def test_no_page_loads_a_script_style_or_font_from_another_host(built_site: Path) -> None:
    found = []
    for page in _pages(built_site):
        html, name = page.read_text(encoding="utf-8"), page.relative_to(built_site)
        found += [f"{name}: {m.group(0)}" for m in EXTERNAL_ASSET.finditer(html)]
        found += [f"{name}: {cdn}" for cdn in FONT_CDNS if cdn in html]
        # Material loads Mermaid from a CDN for a mermaid block, and asks GitHub's API for a
        # repository's facts when repo_url is set: neither may appear.
        if 'class="mermaid"' in html:
            found.append(f"{name}: a mermaid diagram")
        if "md-source" in html:
            found.append(f"{name}: a repository link (repo_url)")
    for sheet in built_site.rglob("*.css"):
        css, name = sheet.read_text(encoding="utf-8"), sheet.relative_to(built_site)
        found += [f"{name}: {m.group(0)}" for m in CSS_EXTERNAL.finditer(css)]
    assert not found, "\n".join(found)


def test_search_is_served_from_the_build_in_english_and_korean(built_site: Path) -> None:
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert index["config"]["lang"] == ["en", "ko"]
    korean = [doc["location"] for doc in index["docs"] if "실행 상태" in doc["text"]]
    assert any(location.startswith("ko/concepts/") for location in korean), korean
    lunr = built_site / "assets" / "javascripts" / "lunr" / "min"
    assert (lunr / "lunr.ko.min.js").is_file() and (lunr / "lunr.multi.min.js").is_file()


def test_the_diagrams_are_files_of_the_site(built_site: Path) -> None:
    html = (built_site / "architecture" / "index.html").read_text(encoding="utf-8")
    for diagram in ("data-flow.svg", "dependency-rules.svg"):
        assert f"assets/{diagram}" in html
        svg = (built_site / "assets" / diagram).read_text(encoding="utf-8")
        assert "<script" not in svg and not CSS_EXTERNAL.search(svg)
