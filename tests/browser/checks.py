"""What several browser tests check on a page: English left on a Korean page (outside codes,
identifiers and names), and a table that stacks on a phone and stays a table at a desk."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from graph_tool_call.learning import SUGGESTION_TYPES
from playwright.sync_api import expect

from qualitylab.models import CaseMode, LearningMode
from triage.vocabulary import taxonomy

PHONE = 390

# --- English left on a Korean page -----------------------------------------------------------

ALLOWED_FILE = Path(__file__).with_name("korean_allowed_words.txt")
ALLOWED = {
    line.strip().lower()
    for line in ALLOWED_FILE.read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
}
# The codes, identical in both languages: stages, reasons, lanes, execution states, sources,
# side-effect grades, Quality Lab's case and learning modes, suggestion types.
CODES = {
    *taxonomy.STAGES, *taxonomy.REASONS, *taxonomy.LANES, *taxonomy.EXECUTION_STATES,
    *taxonomy.SOURCES, *taxonomy.SIDE_EFFECT_GRADES, *CaseMode.values, *LearningMode.values,
    *SUGGESTION_TYPES,
}  # fmt: skip
# The test world's own names (the URL matrix's people, keys and cases): data, not interface.
TEST_DATA = re.compile(r"^(mtx-|search-|bo-dev)")
HANGUL = re.compile(r"[\uac00-\ud7a3]")
# A word starts after a space or punctuation, never inside a number or a flag: 5xx, --base-url.
WORD = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9_.@:/'\u2019+-]*")

# The visible text of the page: text nodes and the attributes a person reads (titles,
# placeholders, labels, confirmations), outside code, data marked translate="no", choices
# shown as their own value, and anything in another language on purpose (the switch's
# "English").
VISIBLE_TEXT = """() => {
  const skip = (el) => el.closest(
    'code, kbd, pre, script, style, .code, .evidence, [translate="no"], [lang]:not([lang="ko"])');
  const parts = [document.title];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const element = walker.currentNode.parentElement;
    // A choice shown as its own value is a code or an identifier (a lane, a time zone).
    const ownValue = element && element.tagName === 'OPTION'
      && element.value === element.textContent.trim();
    if (element && !skip(element) && !ownValue) parts.push(walker.currentNode.textContent);
  }
  for (const element of document.querySelectorAll(
      '[title], [placeholder], [aria-label], [data-confirm]')) {
    if (skip(element)) continue;
    for (const name of ['title', 'placeholder', 'aria-label', 'data-confirm']) {
      if (element.hasAttribute(name)) parts.push(element.getAttribute(name));
    }
  }
  return parts.join('\\n');
}"""

# A placeholder a script fills in ("{action}" in a confirmation): code, not a word.
PLACEHOLDER = re.compile(r"\{\w+\}")


def english_words(text: str) -> list[str]:
    """Latin words that are neither codes nor identifiers nor allowed names."""
    found = []
    for word in WORD.findall(PLACEHOLDER.sub(" ", text)):
        word = word.rstrip(".:'\u2019-")
        if (
            len(word) < 2
            or re.search(r"[\d_./@:+]", word)  # codes, versions, paths, hosts, ids
            or re.search(r"[a-z][A-Z]", word)  # camelCase: tool names, exception types
            or word.isupper()  # acronyms and variable names: HTTP, API, TRIAGE_...
            or word.lower() in ALLOWED
            or word in CODES
            or TEST_DATA.match(word)
            or all(part.lower() in ALLOWED for part in word.split("-") if part)
        ):
            continue
        found.append(word)
    return found


def english_left(tab: Any) -> list[str]:
    """The English words a Korean page shows (its closed <details> opened first), sorted."""
    tab.locator("details").evaluate_all("(all) => all.forEach((d) => { d.open = true; })")
    text = tab.evaluate(VISIBLE_TEXT)
    assert HANGUL.search(text), tab.url
    return sorted(set(english_words(text)))


# --- tables on a phone and at a desk -----------------------------------------------------------

# Each data-label of a table's rows against the header of its column, and what the cell
# shows: its display and the text its ::before puts in front of the value.
CELLS = """table => {
  const heads = Array.from(table.querySelectorAll(":scope > thead th"))
    .map(th => th.textContent.trim());
  return Array.from(table.querySelectorAll(":scope > tbody > tr")).flatMap(row =>
    Array.from(row.children).map((td, column) => ({
      label: td.dataset.label ?? null,
      head: heads.length ? heads[column] ?? null : null,
      display: getComputedStyle(td).display,
      before: getComputedStyle(td, "::before").content,
      shown: td.getClientRects().length > 0,
    })));
}"""

# Whatever is cut inside a table (wider than its box, or reaching past the screen's edges).
CUT = """(table, width) => Array.from(table.querySelectorAll("td, td *"))
  .filter(e => e.getClientRects().length && !e.closest("details:not([open]) > :not(summary)"))
  .filter(e => {
    const r = e.getBoundingClientRect();
    return e.scrollWidth > e.clientWidth + 1 || r.left < -0.5 || r.right > width + 0.5;
  })
  .map(e => `${e.tagName}.${e.className} ${e.textContent.trim().slice(0, 40)}`)"""


def assert_stacked(table: Any) -> None:
    """On a phone: every row a block, each labelled cell named by its column's header and
    showing that label before its value, nothing cut or past the screen's edge."""
    cells = table.evaluate(CELLS)
    labelled = [c for c in cells if c["label"] is not None]
    assert labelled, cells
    for cell in cells:
        assert cell["display"] == "block" or not cell["shown"], cell
    for cell in labelled:
        if cell["head"] is not None:
            assert cell["label"] == cell["head"], cell
        assert cell["before"] == f'"{cell["label"]}: "', cell
    assert table.evaluate(CUT, PHONE) == []
    head = table.locator(":scope > thead")
    if head.count():
        assert head.evaluate("e => e.getBoundingClientRect().width") <= 1


def assert_table(table: Any) -> None:
    """At a desk: a table as before, its header shown, no label in front of any value."""
    assert table.evaluate("e => getComputedStyle(e).display") == "table"
    assert table.locator(":scope > thead").evaluate("e => e.getBoundingClientRect().height") > 10
    for cell in table.evaluate(CELLS):
        assert cell["display"] == "table-cell", cell
        assert cell["before"] == "none", cell


def check_table(table: Any, width: int) -> None:
    """Stacked on a phone, a table at a desk."""
    expect(table).to_be_visible()
    if width == PHONE:
        assert_stacked(table)
    else:
        assert_table(table)


def fits(tab: Any) -> None:
    """The page scrolls only up and down."""
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), tab.evaluate(
        "[document.documentElement.scrollWidth, window.innerWidth]"
    )
