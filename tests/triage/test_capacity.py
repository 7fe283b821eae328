"""triage.intake.capacity: a pool works on a bounded number of batches; a flood beyond it is
answered 503 ingest_busy with Retry-After, stored nowhere, and served again once a slot frees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from tests.factories import failure_item
from triage.intake import capacity
from triage.intake.capacity import ingest_slot
from triage.models import FailureRecord, IngestBatch

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def _post(client: APIClient) -> Any:
    return client.post("/api/v1/ingest", {"items": [failure_item()]}, format="json")


def test_a_saturated_process_answers_503_with_retry_after_then_recovers(
    settings: Any, ingest_client: APIClient
) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 1
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0.2
    taken, release = threading.Event(), threading.Event()

    def hold_the_slot() -> None:
        with ingest_slot():
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_slot)
    holder.start()
    try:
        assert taken.wait(5)
        busy = _post(ingest_client)
    finally:
        release.set()
        holder.join()
    assert busy.status_code == 503
    assert busy.json()["error"]["code"] == "ingest_busy"
    assert busy["Retry-After"] == "1"
    assert not FailureRecord.objects.exists() and not IngestBatch.objects.exists()
    assert _post(ingest_client).status_code == 200
    assert FailureRecord.objects.count() == 1


def test_slots_bound_concurrent_batches_not_requests_in_sequence(
    settings: Any, ingest_client: APIClient
) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 2
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0
    for _ in range(5):
        assert _post(ingest_client).status_code == 200
    taken, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with ingest_slot():
            taken.wait(5)
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    try:
        taken.wait(5)
        assert _post(ingest_client).status_code == 503  # both slots held
    finally:
        release.set()
        for holder in holders:
            holder.join()
    assert _post(ingest_client).status_code == 200


# The slots are the pool's: every worker of one gunicorn master takes them from one directory.

HOLDER = """
import sys, django
django.setup()
from triage.intake import capacity
capacity.share_with_pool(int(sys.argv[1]))
with capacity.ingest_slot():
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def pool_tmp(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A temporary directory of this test's for the pool's slot files, and no slots yet."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(capacity, "_directory", None)
    return tmp_path


def _pools() -> Path:
    """The parent of every pool's slot directory (in pool_tmp)."""
    return capacity.pool_directory(0).parent


def _holder(master: int, tmp: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp), "DJANGO_SETTINGS_MODULE": "config.settings",
           "TRIAGE_INGEST_CONCURRENT_BATCHES": "1"}  # fmt: skip
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(master)], cwd=ROOT, env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_slot_held_by_another_worker_of_the_pool_is_taken_until_it_exits(
    settings: Any, ingest_client: APIClient, pool_tmp: Any
) -> None:
    """Another process of the same pool holds the one slot: this process's batch is refused
    whatever its own threads hold; SIGKILL frees the slot with its holder."""
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 1
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0.1
    master = os.getpid()  # stands in for the gunicorn master both workers were forked by
    capacity.share_with_pool(master)
    holder = _holder(master, pool_tmp)
    try:
        busy = _post(ingest_client)
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "ingest_busy"
    finally:
        holder.kill()
        holder.wait(10)
    assert _post(ingest_client).status_code == 200


def test_pools_of_different_masters_do_not_share_slots(
    settings: Any, ingest_client: APIClient, pool_tmp: Any
) -> None:
    settings.TRIAGE_INGEST_CONCURRENT_BATCHES = 1
    settings.TRIAGE_INGEST_SLOT_WAIT_SECONDS = 0
    capacity.share_with_pool(os.getpid())
    holder = _holder(os.getppid(), pool_tmp)  # another master's pool
    try:
        assert _post(ingest_client).status_code == 200
    finally:
        holder.kill()
        holder.wait(10)


def test_a_pool_whose_master_is_gone_is_swept_and_a_live_one_kept(pool_tmp: Any) -> None:
    parent = _pools()
    parent.mkdir(mode=0o700)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (parent / str(gone.pid)).mkdir()
    (parent / str(gone.pid) / "slot-0").touch()
    (parent / str(os.getppid())).mkdir()
    capacity.share_with_pool(os.getpid())
    assert sorted(path.name for path in parent.iterdir()) == sorted(
        [str(os.getpid()), str(os.getppid())]
    )


@pytest.mark.parametrize("mode", [0o755, 0o777])
def test_a_slot_directory_others_may_enter_is_refused(pool_tmp: Any, mode: int) -> None:
    """Someone else's slot files could be held by them: the worker does not start on them."""
    parent = _pools()
    parent.mkdir()
    parent.chmod(mode)
    with pytest.raises(ImproperlyConfigured, match="no one else may enter"):
        capacity.share_with_pool(os.getpid())


def test_a_symlink_or_a_file_in_place_of_the_slot_directory_is_refused(pool_tmp: Any) -> None:
    elsewhere = pool_tmp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    parent = _pools()
    parent.symlink_to(elsewhere)
    with pytest.raises(ImproperlyConfigured):
        capacity.share_with_pool(os.getpid())
    parent.unlink()
    parent.write_text("")
    with pytest.raises(ImproperlyConfigured):
        capacity.share_with_pool(os.getpid())


def test_slot_files_removed_under_a_running_pool_are_made_again(
    settings: Any, ingest_client: APIClient, pool_tmp: Any
) -> None:
    """A cleaner of the temporary directory removed the pool's directory: batches go on."""
    capacity.share_with_pool(os.getpid())
    assert _post(ingest_client).status_code == 200
    shutil.rmtree(_pools())
    assert _post(ingest_client).status_code == 200
