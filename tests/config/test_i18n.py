"""The message catalogs: every string a person sees is marked, and Korean translates all of it.

- The committed catalog is what makemessages extracts from the code today (run into a
  temporary copy of the project), so a marked string without an entry, or an entry whose
  string is gone, fails here.
- Korean has no untranslated and no fuzzy entry, and keeps every placeholder (msgfmt --check).
- Templates have no literal text outside {% translate %} / {% blocktranslate %}, codes,
  comments and examples; forms that show labels have translatable ones.
"""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from django import forms
from django.template.base import Lexer, TokenType
from django.utils.functional import Promise

ROOT = Path(__file__).resolve().parents[2]
KOREAN = ROOT / "locale" / "ko" / "LC_MESSAGES" / "django.po"
# What makemessages reads: the apps, the settings package and the templates.
SOURCES = (
    "config",
    "core",
    "organisation",
    "triage",
    "learning",
    "qualitylab",
    "alerts",
    "contracts",
    "fixes",
    "demo",
    "templates",
)


def _entries(path: Path) -> list[dict[str, object]]:
    """The entries of a .po file: msgctxt, msgid, msgid_plural, msgstr(s), flags, obsolete."""
    entries: list[dict[str, object]] = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        entry: dict[str, object] = {"flags": "", "obsolete": False, "msgstr": []}
        field = ""
        values: dict[str, str] = {}
        for line in block.strip().splitlines():
            if line.startswith("#~"):
                entry["obsolete"] = True
                continue
            if line.startswith("#,"):
                entry["flags"] = line
                continue
            if line.startswith("#"):
                continue
            match = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line)
            if match:
                field = match.group(1)
                values[field] = _unquote(match.group(2))
            elif line.startswith('"') and field:
                values[field] += _unquote(line)
        if "msgid" not in values:
            continue
        entry["msgctxt"] = values.get("msgctxt", "")
        entry["msgid"] = values["msgid"]
        entry["plural"] = "msgid_plural" in values
        entry["msgstr"] = [value for name, value in values.items() if name.startswith("msgstr")]
        entries.append(entry)
    return entries


def _unquote(quoted: str) -> str:
    import json

    return str(json.loads(quoted))


def _keys(entries: list[dict[str, object]]) -> set[tuple[object, object]]:
    return {
        (entry["msgctxt"], entry["msgid"])
        for entry in entries
        if entry["msgid"] and not entry["obsolete"]
    }


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """A fresh catalog from makemessages, run in a copy of the project (never touching the
    committed one)."""
    if shutil.which("xgettext") is None:
        pytest.skip("needs gettext's xgettext (apt-get install gettext; make install does)")
    copy = tmp_path_factory.mktemp("catalog") / "project"
    copy.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "migrations")
    for name in SOURCES:
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    shutil.copy(ROOT / "manage.py", copy / "manage.py")
    (copy / "locale").mkdir()
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "ko", "--no-location"],
        cwd=copy,
        check=True,
        capture_output=True,
        env={**__import__("os").environ, "DJANGO_DEBUG": "1", "PYTHONPATH": str(copy)},
        timeout=300,
    )
    return _entries(copy / "locale" / "ko" / "LC_MESSAGES" / "django.po")


def test_every_marked_string_has_a_korean_entry_and_every_entry_is_still_used(
    extracted: list[dict[str, object]],
) -> None:
    committed = _keys(_entries(KOREAN))
    fresh = _keys(extracted)
    missing = sorted(fresh - committed, key=str)
    stale = sorted(committed - fresh, key=str)
    assert not missing, (
        f"{len(missing)} marked strings are not in locale/ko (run makemessages -l ko and "
        f"translate them): {missing[:20]}"
    )
    assert not stale, f"{len(stale)} catalog entries no code uses any more: {stale[:20]}"


def test_korean_has_no_untranslated_or_fuzzy_entry() -> None:
    entries = [entry for entry in _entries(KOREAN) if entry["msgid"] and not entry["obsolete"]]
    assert len(entries) > 500
    untranslated = [entry["msgid"] for entry in entries if not all(entry["msgstr"])]  # type: ignore[arg-type]
    fuzzy = [entry["msgid"] for entry in entries if "fuzzy" in str(entry["flags"])]
    assert not untranslated, untranslated[:20]
    assert not fuzzy, fuzzy[:20]
    # The header must not be fuzzy either: gettext ignores a fuzzy header's plural forms.
    assert "#, fuzzy" not in KOREAN.read_text(encoding="utf-8").split("msgid", 1)[0]


def test_korean_keeps_every_placeholder_of_its_english() -> None:
    if shutil.which("msgfmt") is None:
        pytest.skip("needs gettext's msgfmt (apt-get install gettext; make install does)")
    result = subprocess.run(
        ["msgfmt", "--check", "-o", "/dev/null", str(KOREAN)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    # Brace placeholders (format_html) are not checked by msgfmt --check for Python.
    for entry in _entries(KOREAN):
        wanted = sorted(re.findall(r"\{\w*\}", str(entry["msgid"])))
        for text in entry["msgstr"]:  # type: ignore[attr-defined]
            assert sorted(re.findall(r"\{\w*\}", text)) == wanted, (entry["msgid"], text)


# --- literal text in templates ------------------------------------------------------------

# Words a template may show as they are: the product's name, protocols and units.
TEMPLATE_WORDS = {"Triage", "Desk", "HTTP", "LLM", "OTLP", "JSON", "API", "ms", "Top", "URL"}
# Elements whose text is code, data or an example, never interface text.
_CODE_ELEMENT = re.compile(
    r"<(code|kbd|pre|script|style)\b[^>]*>.*?</\1>"
    r"|<(\w+)\b[^>]*\bclass=\"[^\"]*\bcode\b[^\"]*\"[^>]*>[^<]*</\2>",
    re.S,
)
_VISIBLE_ATTRIBUTE = re.compile(r'\b(?:title|placeholder|aria-label|alt|data-confirm)="([^"]*)"')
_TAG = re.compile(r"<[^>]*>")
# The retrieval metrics' names are codes too (hit@K, top-1: DESIGN.md section 8).
_METRIC = re.compile(r"\b(?:hit@K|[Tt]op-(?:K|1))\b")
_WORD = re.compile(r"[A-Za-z][\w'\u2019-]*")


def _literal_words(source: str) -> list[str]:
    """Words of text a template writes as is: outside translation tags, comments, template
    variables and code elements, with the visible attributes' values included."""
    text: list[str] = []
    skip_depth = 0
    for token in Lexer(source).tokenize():
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split(" ", 1)[0]
            if name in ("blocktranslate", "blocktrans", "comment"):
                skip_depth += 1
            elif name in ("endblocktranslate", "endblocktrans", "endcomment"):
                skip_depth -= 1
            else:
                text.append(" \x00 ")  # a tag separates text like whitespace
            continue
        if token.token_type == TokenType.VAR:
            text.append("\x00")
            continue
        if token.token_type == TokenType.TEXT and not skip_depth:
            text.append(token.contents)
    html = _CODE_ELEMENT.sub(" ", "".join(text))
    visible = " ".join(_VISIBLE_ATTRIBUTE.findall(html))
    body = _TAG.sub(" ", html)
    return [
        word
        for word in _WORD.findall(_METRIC.sub(" ", f"{body} {visible}"))
        # snake_case words are codes (reasons, lanes, rejection reasons): never translated
        if word not in TEMPLATE_WORDS and "_" not in word and len(word) > 1
    ]


def _templates() -> list[Path]:
    return sorted(
        path
        for base in [ROOT / "templates", *ROOT.glob("*/templates")]
        for path in base.rglob("*.html")
        if ".venv" not in path.parts
    )


@pytest.mark.parametrize("template", _templates(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_template_has_no_literal_interface_text(template: Path) -> None:
    words = _literal_words(template.read_text(encoding="utf-8"))
    assert not words, f"unmarked text in {template.relative_to(ROOT)}: {words[:15]}"


def test_the_literal_text_check_finds_unmarked_text() -> None:
    assert _literal_words('<p title="Plain title">Hello {{ name }}</p>') == [
        "Hello",
        "Plain",
        "title",
    ]
    assert (
        _literal_words(
            '{% load i18n %}<p>{% translate "Hello" %} <code>not_started</code></p>'
            "{% blocktranslate %}Hi {{ name }}{% endblocktranslate %}"
            '<span class="code small">retry_safe</span>'
        )
        == []
    )


# --- forms --------------------------------------------------------------------------------


# Every field has a translatable label: a page shows it next to the field, and a refused
# form or address names the field by it ("Mute until: ...", "Window (window in the address)").
def _form_classes() -> list[type[forms.BaseForm]]:
    found: list[type[forms.BaseForm]] = []
    for module_name in ("triage.forms", "learning.forms", "qualitylab.forms", "alerts.forms"):
        module = import_module(module_name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, forms.BaseForm) and cls.__module__ == module_name:
                found.append(cls)
    return found


@pytest.mark.parametrize("form_class", _form_classes(), ids=lambda cls: cls.__name__)
def test_a_form_shows_only_translatable_labels_help_texts_and_choices(
    form_class: type[forms.BaseForm],
) -> None:
    for name, field in form_class.base_fields.items():  # type: ignore[attr-defined]
        assert isinstance(field.label, Promise), (form_class.__name__, name, field.label)
        if field.help_text:
            assert isinstance(field.help_text, Promise), (form_class.__name__, name)
        if isinstance(field, forms.ModelChoiceField):
            continue  # rows of the database, shown by their names
        for value, label in getattr(field, "choices", None) or []:
            # A choice is a code shown as itself, a translatable label, or Django's blank "-----".
            assert (
                isinstance(label, Promise)
                or label in (value, "---------")
                or isinstance(label, list)
            ), (
                form_class.__name__,
                name,
                value,
                label,
            )
