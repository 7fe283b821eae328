"""The documented examples (the README's first failure, and the docs' pages for MCP servers,
MCP clients, envelopes, OpenInference and OpenLLMetry), run as written: each code block is
saved to a file and run in a fresh interpreter against a live desk (gunicorn + PostgreSQL),
with only the environment variables the page names. What the page says the desk stores is
what it stores."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.processes import Gunicorn, base_env, free_port, wait_until
from triage.models import FailureRecord

pytestmark = [pytest.mark.services("postgres"), pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def example(page: str, language: str = "python", after: str = "") -> str:
    """The first block in `language` of a page (README.md or a docs page), after `after`."""
    text = (ROOT / page).read_text(encoding="utf-8")
    start = text.index(after) if after else 0
    found = re.compile(rf"```{language}\n(.*?)```", re.DOTALL).search(text, start)
    assert found is not None, (page, after)
    return found.group(1)


@pytest.fixture(scope="module")
def desk(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with Gunicorn.serving(env=base_env(), log_dir=tmp_path_factory.mktemp("gunicorn")) as server:
        yield f"http://127.0.0.1:{server.port}"


@pytest.fixture
def environment(desk: str, make_api_key: Callable[..., str], tmp_path: Path) -> dict[str, str]:
    key = make_api_key("weather", scopes=("ingest", "read"))
    return {
        **os.environ,
        "TRIAGE_DESK_URL": desk,
        "TRIAGE_KEY": key,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{desk}/v1/traces",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{key}",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "SPOOL_DIR": str(tmp_path / "spool"),
    }


def run(page: str, name: str, where: Path, env: dict[str, str], after: str = "") -> str:
    script = where / name
    script.write_text(example(page, after=after), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=where, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def stored() -> list[tuple[str, str, str, str, str, str]]:
    return [
        (r.source, r.tool, r.stage, r.reason, r.execution_state, r.lane)
        for r in FailureRecord.objects.order_by("tool")
    ]


def test_the_mcp_server_and_client_examples(environment: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    server_script = tmp_path / "weather_server.py"
    server_script.write_text(example("docs/sending/mcp-server.md"))
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, str(server_script)],
        cwd=tmp_path, env={**environment, "PORT": str(port)}, stdout=log, stderr=log,
    )  # fmt: skip
    try:
        wait_until(lambda: _listening(port), timeout=30, what="the example MCP server")
        printed = run(
            "docs/sending/mcp-client.md",
            "weather_agent.py",
            tmp_path,
            {**environment, "MCP_URL": f"http://127.0.0.1:{port}/mcp"},
        )
        # The server's reporter sends from its spool in the background: on a busy machine
        # the last failure may still be on its way when the agent has finished.
        wait_until(
            lambda: FailureRecord.objects.count() >= 2, timeout=30, what="both failures stored"
        )
    finally:
        server.terminate()
        server.wait(10)
        log.close()
    assert "'next_action': 'retry_with_backoff'" in printed
    assert "'next_action': 'query_by_idempotency_key'" in printed
    assert stored() == [
        ("runtime", "book_courier", "execute", "timeout", "started_unknown", "reconcile_first"),
        ("runtime", "get_forecast", "execute", "http_5xx", "completed", "retry_safe"),
    ]
    booking = FailureRecord.objects.get(tool="book_courier")
    assert booking.idempotency_key == "b-1"
    assert booking.extra["envelope"]["retry"]["next_action"] == "query_by_idempotency_key"


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_envelope_example(environment: dict[str, str], tmp_path: Path) -> None:
    """The envelope page's curl, with the desk's address in place of the demo's."""
    command = example("docs/sending/envelope.md", "sh")
    command = command.replace("http://127.0.0.1:8000", environment["TRIAGE_DESK_URL"])
    done = subprocess.run(
        ["bash", "-c", command], env=environment, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"accepted"' in done.stdout, done.stdout
    record = FailureRecord.objects.get()
    assert (record.tool, record.stage, record.reason) == ("send_invoice", "execute", "timeout")
    assert (record.lane, record.execution_state) == ("reconcile_first", "started_unknown")
    assert record.idempotency_key == "notify:invoice-819:2026-10-29"


def test_the_openinference_example(environment: dict[str, str], tmp_path: Path) -> None:
    run("docs/sending/openinference.md", "weather_openinference.py", tmp_path, environment)
    assert stored() == [
        ("otlp", "get_weather", "execute", "timeout", "started_unknown", "reconcile_first")
    ]
    assert FailureRecord.objects.get().collection == "weather-agent"


def test_the_openllmetry_example(environment: dict[str, str], tmp_path: Path) -> None:
    run("docs/sending/openllmetry.md", "weather_openllmetry.py", tmp_path, environment)
    assert stored() == [
        ("otlp", "get_alerts", "execute", "network_error", "not_started", "retry_safe")
    ]


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_readme_first_failure_by_curl_and_by_the_reporter(
    environment: dict[str, str], tmp_path: Path
) -> None:
    command = example("README.md", "sh", after="**With curl**")
    command = command.replace("http://127.0.0.1:8000", environment["TRIAGE_DESK_URL"])
    done = subprocess.run(
        ["bash", "-c", command], env=environment, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0 and '"accepted":1' in done.stdout.replace(" ", ""), done.stdout
    run("README.md", "first_failure.py", tmp_path, environment, after="**From a Python runtime**")
    assert stored() == [
        ("runtime", "getOrderDetail", "execute", "http_5xx", "completed", "retry_safe"),
        ("runtime", "sendInvoice", "execute", "timeout", "started_unknown", "reconcile_first"),
    ]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
