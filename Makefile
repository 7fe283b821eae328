# Triage Desk. `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: install messages browser demo test lint typecheck check pytest docs docs-serve bench bench-report bench-scale bench-incident clean

## DJANGO_DEBUG defaults to off (production). The development targets run the development
## settings (a fixed dev-only secret key, plain HTTP, local hosts); a value already exported
## wins. The benchmarks set production settings for the servers they start.
demo test lint typecheck check pytest: export DJANGO_DEBUG ?= 1

install: $(VENV)/.installed messages

$(VENV)/.installed: pyproject.toml client/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,docs]' -e ./client
	@touch $@

## The message catalogs (locale/<language>/LC_MESSAGES/django.po), compiled with gettext's
## msgfmt; Debian's gettext is installed when msgfmt is missing, as `make browser` does for
## Chromium. --check refuses a translation whose placeholders differ from its English.
CATALOGS := $(patsubst %.po,%.mo,$(wildcard locale/*/LC_MESSAGES/django.po))
messages: $(CATALOGS)

locale/%/LC_MESSAGES/django.mo: locale/%/LC_MESSAGES/django.po
	@command -v msgfmt >/dev/null || apt-get install -y -q gettext || \
		(apt-get update -q && apt-get install -y -q gettext)
	msgfmt --check -o $@ $<

## Debian's Chromium (and a CJK font for Korean text) for the browser tests; Playwright
## never downloads a browser here.
browser:
	@(test -x /usr/bin/chromium && test -d /usr/share/fonts/opentype/noto) || \
		apt-get install -y -q chromium fonts-noto-cjk || \
		(apt-get update -q && apt-get install -y -q chromium fonts-noto-cjk) || \
		echo "Could not install chromium: browser tests will be skipped."

## Install, migrate, load the demo through the real ingest API, start web + worker.
## Execute cases may call the sandbox's loopback port and no other (see Security).
DEMO_SANDBOX_PORT ?= 8090
demo: install
	DEMO_SANDBOX_PORT=$(DEMO_SANDBOX_PORT) \
	QUALITYLAB_ALLOWED_PRIVATE_HOSTS=127.0.0.1:$(DEMO_SANDBOX_PORT) $(PY) manage.py demo

## Lint, type-check, Django checks, migrations check, the docs' strict build and the whole
## test suite.
test: install browser lint typecheck check docs pytest

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy .

check:
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

pytest:
	$(BIN)/pytest

## The documentation site (docs/, mkdocs.yml) into site/: strict, so a broken link or anchor,
## or a page missing from the nav, fails. docs-serve rebuilds it as files change, on
## 127.0.0.1:$(DOCS_PORT) (8004: the demo takes 8000-8002).
DOCS_PORT ?= 8004
docs docs-serve: export NO_MKDOCS_2_WARNING = 1
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

docs-serve: install
	$(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:$(DOCS_PORT)

## Every benchmark checks its path's answers and stored rows before a figure counts: a path
## that fails its check is BROKEN (exit 2); --strict makes a missed target fail too (exit 1).
## Each runs whatever the one before it found; make fails at the end if any of them did.
bench: install
	@status=0; \
	$(PY) bench/ingest.py --strict || status=1; \
	$(PY) bench/qualitylab.py --strict || status=1; \
	$(PY) bench/mcp_middleware.py --strict || status=1; \
	$(PY) bench/reporter.py --strict || status=1; \
	$(PY) bench/scrub.py --strict || status=1; \
	$(PY) bench/alerts.py --strict || status=1; \
	exit $$status

## The table of docs/benchmarks.md from the newest result each benchmark wrote.
bench-report: install
	$(PY) bench/report.py

## 100k then 1M records into PostgreSQL (DATABASE triage_scale), then page times: ~10 min;
## then the contracts page with 1,000 tools over a million records (DATABASE
## triage_contracts; bench/contracts.py --reuse measures again without loading); then the
## partitions migration and the drop of a day of a million records (DATABASE triage_partitions).
bench-scale: install
	$(PY) bench/triage_scale.py --strict
	$(PY) bench/contracts.py --strict
	$(PY) bench/partitions.py --strict

## Pages under an ingest flood: viewers and senders on shared and split pools (~4 min after
## the million-record database of bench-scale is loaded), then the ingest pool with its
## senders' connections on one worker against spread over its workers (~6 min).
bench-incident: install
	$(PY) bench/incident.py --strict
	$(PY) bench/crowded.py --strict

clean:
	rm -rf var/celery var/test-artifacts
