FROM python:3.11-slim

# DJANGO_DEBUG is off by default; stated here too so no environment can inherit it on.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DJANGO_DEBUG=0
WORKDIR /app

COPY pyproject.toml ./
COPY config ./config
COPY core ./core
COPY triage ./triage
COPY learning ./learning
COPY qualitylab ./qualitylab
COPY alerts ./alerts
COPY contracts ./contracts
COPY client ./client
RUN pip install --upgrade pip && pip install . ./client

COPY . .
# The Korean (and any other) message catalogs, compiled with gettext's msgfmt.
RUN apt-get update && apt-get install -y --no-install-recommends gettext \
    && for po in locale/*/LC_MESSAGES/django.po; do msgfmt --check -o "${po%.po}.mo" "$po"; done \
    && apt-get purge -y gettext && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 1000 triage && mkdir -p /app/var && chown -R triage /app/var
USER triage

EXPOSE 8000
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--access-logfile", "-"]
