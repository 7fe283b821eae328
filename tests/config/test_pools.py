"""The two pools of one image (TRIAGE_POOL): the web pool serves everything, the ingest pool
only the ingest doors and /healthz, at a lower CPU priority."""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest.mock
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from config.priority import AUTOGROUP_SWITCH
from tests.factories import failure_item
from tests.faults.processes import Gunicorn, base_env, wait_until
from triage.intake import capacity
from triage.models import FailureRecord

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["/", "/receipts/", "/ingestion/", "/qualitylab/", "/learning/", "/accounts/login/",
         "/api/v1/failures", "/api/v1/groups", "/api/docs/", "/admin/"]  # fmt: skip


def _post(client: APIClient) -> Any:
    return client.post("/api/v1/ingest", {"items": [failure_item()]}, format="json")


def _export(client: APIClient) -> Any:
    from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record

    body = export_request(record([FAILING_CALLS["http_5xx"]], chat=False)).SerializeToString()
    return client.post("/v1/traces", data=body, content_type="application/x-protobuf")


@pytest.mark.django_db
def test_the_ingest_pool_serves_ingest_and_health_and_refuses_pages(
    settings: Any, ingest_client: APIClient, client_as: Any
) -> None:
    settings.ROOT_URLCONF = "config.urls_ingest"
    admin = client_as("admin")
    for url in PAGES:
        assert admin.get(url).status_code == 404, url
    assert Client().get("/healthz").json() == {"status": "ok"}
    assert _post(ingest_client).status_code == 200
    assert FailureRecord.objects.count() == 1
    assert _export(ingest_client).status_code == 200  # the OTLP door too
    assert FailureRecord.objects.filter(source="otlp").count() == 1


@pytest.mark.django_db
def test_the_web_pool_still_serves_ingest_when_routed_there(
    ingest_client: APIClient, client_as: Any
) -> None:
    assert _post(ingest_client).status_code == 200
    assert _export(ingest_client).status_code == 200
    assert client_as("viewer").get("/").status_code == 200


def _setting(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "TRIAGE_POOL"}
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         f"from django.conf import settings; print(settings.{name})"],
        cwd=ROOT, env={**clean, "DJANGO_DEBUG": "1", **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_pool_is_chosen_by_one_variable() -> None:
    assert _setting("ROOT_URLCONF").stdout.split()[-1] == "config.urls"
    assert _setting("ROOT_URLCONF", TRIAGE_POOL="ingest").stdout.split()[-1] == "config.urls_ingest"
    wrong = _setting("ROOT_URLCONF", TRIAGE_POOL="pages")
    assert wrong.returncode != 0 and "TRIAGE_POOL must be web or ingest" in wrong.stderr


def test_a_worker_collects_young_garbage_less_often_and_keeps_its_startup_frozen() -> None:
    """config.wsgi, as a gunicorn worker loads it: a young collection every 20,000
    allocations, not Python's 700, and what startup loaded out of the full collections."""
    clean = {k: v for k, v in os.environ.items() if k != "TRIAGE_POOL"}
    probe = subprocess.run(
        [sys.executable, "-c",
         "import gc, config.wsgi; print(*gc.get_threshold(), gc.get_freeze_count())"],
        cwd=ROOT, env={**clean, "DJANGO_DEBUG": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    young, middle, old, frozen = (int(value) for value in probe.stdout.split()[-4:])
    assert (young, middle, old) == (20_000, 10, 10)
    assert frozen > 10_000


def _autogroup(pid: int | str) -> list[str]:
    """A process's autogroup as the kernel prints it (``/autogroup-12 nice 7``); the kernel
    prints nothing for a process in the root group (init's session: a CI runner started
    without a session of its own, and so this test), which is named ``root`` here."""
    return Path(f"/proc/{pid}/autogroup").read_text().split() or ["root", "nice", "0"]


def _nice(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19: nice


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_a_real_ingest_pool_runs_niced_and_answers_only_its_urls(
    tmp_path: Path, make_api_key: Any
) -> None:
    key = make_api_key("pool-runtime")
    env = base_env(TRIAGE_POOL="ingest", TRIAGE_INGEST_NICE="7")
    with Gunicorn.serving(env=env, log_dir=tmp_path) as server:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            assert response.status == 200  # the worker has loaded the app
        assert _nice(server.worker_pid()) == _nice(os.getpid()) + 7
        assert _nice(server.process.pid) == _nice(os.getpid())  # the master is not niced
        if AUTOGROUP_SWITCH.read_text().strip() == "1":
            # Niceness counts only inside a session's autogroup: the worker's is its own.
            worker = _autogroup(server.worker_pid())
            assert worker[0] not in {_autogroup("self")[0], "root"}
            assert worker[1:] == ["nice", "7"]
            # The master, and so the web pool, keep theirs.
            assert _autogroup(server.process.pid)[0] != worker[0]
        with pytest.raises(urllib.error.HTTPError) as page:
            urllib.request.urlopen(f"{base}/", timeout=10)
        assert page.value.code == 404
        request = urllib.request.Request(
            f"{base}/api/v1/ingest",
            data=json.dumps({"items": [failure_item()]}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
            assert json.load(response)["accepted"] == 1
        # Its PostgreSQL backend, which does most of a batch's work, runs niced too (the
        # database is on this host); this test's own backend keeps its priority.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
            backends = [pid for (pid,) in cursor.fetchall()]
            cursor.execute("SELECT pg_backend_pid()")
            (own,) = cursor.fetchone()
        assert _nice(os.getpid()) + 7 in {_nice(pid) for pid in backends}
        assert _nice(own) == _nice(os.getpid())
        if AUTOGROUP_SWITCH.read_text().strip() == "1":
            # Each backend leads a session of its own: its autogroup is niced with it.
            assert "7" in {_autogroup(pid)[-1] for pid in backends}
            assert _autogroup(own)[-1] == "0"


def _one_slot_pool(tmp_path: Path) -> dict[str, str]:
    """An ingest pool's environment with one batch slot, no wait for it, and its slot files
    under `tmp_path` (its temporary directory)."""
    return base_env(
        TRIAGE_POOL="ingest", TRIAGE_INGEST_CONCURRENT_BATCHES="1",
        TRIAGE_INGEST_SLOT_WAIT_SECONDS="0", TMPDIR=str(tmp_path),
    )  # fmt: skip


def _the_slot(server: Gunicorn, tmp_path: Path) -> Path:
    """The one slot file of a pool started with _one_slot_pool(tmp_path)."""
    with unittest.mock.patch.object(tempfile, "tempdir", str(tmp_path)):
        return capacity.slot_file(capacity.pool_directory(server.process.pid), 0)


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_the_batch_slots_are_the_pools_whichever_worker_holds_the_connection(
    tmp_path: Path, make_api_key: Any
) -> None:
    """A pool of two workers with one slot: while something else of the pool holds that slot,
    every batch is refused, on whichever worker its connection lands; then served again."""
    key = make_api_key("pool-runtime")
    env = _one_slot_pool(tmp_path)

    def post() -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/api/v1/ingest",
            data=json.dumps({"items": [failure_item()]}).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    with Gunicorn.serving(env=env, log_dir=tmp_path, threads=4, workers=2) as server:
        assert post() == 200  # a worker has made the pool's slot files
        wait_until(lambda: len(server.worker_pids()) == 2, timeout=30, what="two workers")
        with _the_slot(server, tmp_path).open("w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            answers = [post() for _ in range(12)]  # each on a new connection
        assert answers == [503] * 12
        assert post() == 200


def _door(door: str) -> tuple[str, str, bytes]:
    """(path, content type, a body over the 64 KB gunicorn drains) of one ingest door."""
    if door == "native":
        body = json.dumps({"items": [failure_item() for _ in range(400)]}).encode()
        return "/api/v1/ingest", "application/json", body
    from tests.triage.intake.otlp_helpers import FAILING_CALLS, export_request, record

    spans = record([FAILING_CALLS["http_5xx"]] * 600, chat=False)
    body = export_request(spans).SerializeToString()
    assert len(body) > 64 * 1024
    return "/v1/traces", "application/x-protobuf", body


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("door", ["native", "otlp"])
def test_a_batch_refused_503_leaves_its_keep_alive_connection_usable(
    tmp_path: Path, make_api_key: Any, door: str
) -> None:
    """A batch refused for want of a slot has been read whole: the sender's next batch on
    the same connection is served, not met by a closed socket (gunicorn drains at most
    64 KB of a body the answer left unread, then closes the connection)."""
    key = make_api_key("pool-runtime")
    env = _one_slot_pool(tmp_path)
    path, content_type, body = _door(door)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": content_type}
    with Gunicorn.serving(env=env, log_dir=tmp_path, threads=4) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("POST", path, body=body, headers=headers)
        first = conn.getresponse()
        first.read()
        assert first.status == 200  # the pool's slot files are made
        with _the_slot(server, tmp_path).open("w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            conn.request("POST", path, body=body, headers=headers)
            refused = conn.getresponse()
            refused.read()
        assert refused.status == 503 and refused.getheader("Retry-After") == "1"
        conn.request("POST", path, body=body, headers=headers)
        again = conn.getresponse()
        assert again.status == 200, again.read()[:300]
        conn.close()


@pytest.mark.services("postgres")
@pytest.mark.django_db(transaction=True)
def test_a_slow_upload_holds_no_slot(tmp_path: Path, make_api_key: Any) -> None:
    """The pool's one slot is not held while a sender's body trickles in: another sender's
    batch is served meanwhile, and the slow one too once its body is complete."""
    key = make_api_key("pool-runtime")
    env = _one_slot_pool(tmp_path)
    body = json.dumps({"items": [failure_item() for _ in range(50)]}).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with Gunicorn.serving(env=env, log_dir=tmp_path, threads=4) as server:
        slow = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        slow.putrequest("POST", "/api/v1/ingest")
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            slow.putheader(name, value)
        slow.endheaders(body[: len(body) // 2])
        time.sleep(0.5)  # the server has the headers and half the body, and waits for more
        fast = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        fast.request("POST", "/api/v1/ingest", body=body, headers=headers)
        answer = fast.getresponse()
        assert answer.status == 200, answer.read()[:300]
        answer.read()
        slow.send(body[len(body) // 2 :])
        finished = slow.getresponse()
        assert finished.status == 200, finished.read()[:300]
        assert json.load(finished)["duplicates"] == 50  # the same items: stored once
        slow.close()
        fast.close()
