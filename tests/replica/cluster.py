"""A real streaming replica of the test database's PostgreSQL, on loopback: a second cluster of
the same version made with Debian's pg_createcluster, its data directory replaced by a
pg_basebackup of the primary (-R: it starts as a standby streaming from the primary), dropped
at the end. Not a second database on the same cluster: reads from it lag, pause and fail as a
replica's do."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from django.db import connections

from core.replica import LAG_SQL

# The cluster's name carries the pid of the test process that made it, so a run can drop the
# clusters of runs that died before their teardown.
NAME_PREFIX = "triage_replica_"
REPLICATION_RULE = "host replication all 127.0.0.1/32 trust"
_REPLICATION_LINE = re.compile(
    r"^host\s+replication\s+all\s+127\.0\.0\.1/32\s+trust\s*$", re.MULTILINE
)
# Settings a hot standby must have at least as high as its primary's.
_AT_LEAST_THE_PRIMARYS = (
    "max_connections",
    "max_worker_processes",
    "max_wal_senders",
    "max_prepared_transactions",
    "max_locks_per_transaction",
)
LOOPBACK = ("127.0.0.1", "localhost", "")


def primary_settings() -> dict[str, Any]:
    return connections["default"].settings_dict


def connect_primary(dbname: str = "postgres") -> psycopg.Connection[Any]:
    db = primary_settings()
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 5432),
        user=db["USER"] or "postgres",
        password=db["PASSWORD"] or None,
        dbname=dbname,
        autocommit=True,
        connect_timeout=5,
    )


def _run(command: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def _as_cluster_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def missing_requirement() -> str | None:
    """Why this machine cannot make a replica of the test database, or None."""
    if connections["default"].vendor != "postgresql":
        return "needs PostgreSQL (set DATABASE_URL=postgres://...)"
    if primary_settings()["HOST"] not in LOOPBACK:
        return "needs the PostgreSQL of DATABASE_URL on this machine (127.0.0.1)"
    for tool in ("pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_lsclusters"):
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian's postgresql-common)"
    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != "postgres":
        return "needs root or the postgres user to create a PostgreSQL cluster"
    return None


def allow_replication(primary: psycopg.Connection[Any]) -> str | None:
    """Make sure the primary's pg_hba.conf lets replication connections in from loopback
    (.ci/run does the same); None when it does, else why not."""
    (hba_file,) = primary.execute("SHOW hba_file").fetchone() or ("",)
    path = Path(hba_file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return f"cannot read {path} ({exc})"
    if _REPLICATION_LINE.search(text):
        return None
    if not os.access(path, os.W_OK):
        return f"{path} lacks '{REPLICATION_RULE}' (.ci/run adds it)"
    with path.open("a", encoding="utf-8") as hba:
        hba.write(("" if text.endswith("\n") else "\n") + REPLICATION_RULE + "\n")
    primary.execute("SELECT pg_reload_conf()")
    return None


def _abandoned(name: str) -> bool:
    """A name this helper gave, in a test run that is gone (died before its teardown)."""
    pid = name.removeprefix(NAME_PREFIX)
    return (
        name.startswith(NAME_PREFIX)
        and pid.isdigit()
        and int(pid) != os.getpid()
        and not Path(f"/proc/{pid}").exists()
    )


def drop_abandoned(primary: psycopg.Connection[Any], version: int) -> None:
    """The clusters, and their replication slots on the primary (which keep its WAL), of test
    runs that died before dropping them."""
    listing = _run(["pg_lsclusters", "--no-header"]).stdout
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == str(version) and _abandoned(fields[1]):
            subprocess.run(["pg_dropcluster", "--stop", str(version), fields[1]], timeout=120)
    slots = primary.execute(
        "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s AND NOT active",
        [NAME_PREFIX + "%"],
    ).fetchall()
    for (slot,) in slots:
        if _abandoned(slot):
            primary.execute("SELECT pg_drop_replication_slot(%s)", [slot])


def _empty(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


class StreamingReplica:
    """The replica cluster: its name, port and data directory, and the few things a test does
    to it (stop, start, pause and resume replay, wait until it caught up)."""

    def __init__(self, *, version: int, name: str, port: int) -> None:
        self.version = version
        self.name = name
        self.port = port
        self.data_directory = Path(f"/var/lib/postgresql/{version}/{name}")
        self.hba_file = Path(f"/etc/postgresql/{version}/{name}/pg_hba.conf")

    @classmethod
    def create(cls) -> StreamingReplica:
        with connect_primary() as primary:
            version = int(primary.execute("SHOW server_version_num").fetchone()[0]) // 10000  # type: ignore[index]
            refused = allow_replication(primary)
            if refused:
                raise RuntimeError(refused)
            (hba_file,) = primary.execute("SHOW hba_file").fetchone()  # type: ignore[misc]
            options = [
                f"{name}={primary.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
                for name in _AT_LEAST_THE_PRIMARYS
            ]
            drop_abandoned(primary, version)
        replica = cls(version=version, name=f"{NAME_PREFIX}{os.getpid()}", port=free_port())
        pgoptions = [flag for option in options for flag in ("-o", option)]
        _run(
            [
                "pg_createcluster", str(version), replica.name, "--port", str(replica.port),
                "--start-conf=manual", "-o", "shared_buffers=32MB", "-o", "hot_standby=on",
                *pgoptions,
            ]
        )  # fmt: skip
        try:
            # Clients authenticate to the replica as to its primary (trust on loopback here).
            replica.hba_file.write_text(Path(hba_file).read_text(encoding="utf-8"))
            replica._clone_primary()
            replica.start()
        except BaseException:
            replica.drop()
            raise
        return replica

    def _clone_primary(self) -> None:
        """The primary's data directory, streamed: -R makes it a standby of the primary."""
        db = primary_settings()
        _empty(self.data_directory)  # made by pg_createcluster (owned by postgres): emptied
        command = _as_cluster_owner(
            [
                f"/usr/lib/postgresql/{self.version}/bin/pg_basebackup",
                "-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432),
                "-U", db["USER"] or "postgres",
                "-D", str(self.data_directory), "-R", "-X", "stream", "--checkpoint=fast",
                # A slot of its own: the primary keeps the WAL the replica has not received
                # (a busy primary recycles it within seconds), until drop() drops the slot.
                "--create-slot", "--slot", self.name,
            ]
        )  # fmt: skip
        for attempt in range(3):  # a reload of pg_hba.conf may take a moment
            result = subprocess.run(command, capture_output=True, text=True, timeout=600)
            if result.returncode == 0:
                return
            if attempt == 2 or "pg_hba.conf" not in result.stderr:
                raise RuntimeError(f"pg_basebackup failed:\n{result.stderr}")
            _empty(self.data_directory)
            time.sleep(1)

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        db = primary_settings()
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=db["USER"] or "postgres",
            password=db["PASSWORD"] or None,
            dbname=dbname,
            autocommit=True,
            connect_timeout=2,
        )

    def answers(self) -> bool:
        try:
            with self.connect() as replica:
                return bool(replica.execute("SELECT pg_is_in_recovery()").fetchone()[0])  # type: ignore[index]
        except psycopg.OperationalError:
            return False

    def streaming(self) -> bool:
        try:
            with self.connect() as replica:
                return replica.execute("SELECT count(*) FROM pg_stat_wal_receiver").fetchone() == (
                    1,
                )
        except psycopg.OperationalError:
            return False

    def start(self) -> None:
        _run(["pg_ctlcluster", "--skip-systemctl-redirect", str(self.version), self.name, "start"])
        try:
            # It replays the WAL written during its copy first: long when the primary is busy.
            wait_until(self.streaming, timeout=300, what=f"the replica {self.name} to stream")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; its log ends:\n{self.log_tail()}") from None

    def log_tail(self) -> str:
        log = Path(f"/var/log/postgresql/postgresql-{self.version}-{self.name}.log")
        try:
            return "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        _run(["pg_ctlcluster", "--skip-systemctl-redirect", str(self.version), self.name, "stop"])

    def drop(self) -> None:
        """The cluster, then its slot: nothing of it is left on the primary."""
        subprocess.run(
            ["pg_dropcluster", "--stop", str(self.version), self.name],
            capture_output=True,
            timeout=120,
        )
        with connect_primary() as primary:
            primary.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                [self.name],
            )

    def wait_caught_up(self, *, timeout: float = 120) -> None:
        """Until the replica replayed everything the primary wrote so far."""
        with connect_primary() as primary:
            (written,) = primary.execute("SELECT pg_current_wal_lsn()").fetchone()  # type: ignore[misc]

        def replayed() -> bool:
            with self.connect() as replica:
                row = replica.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [str(written)]
                ).fetchone()
                return bool(row and row[0])

        wait_until(replayed, timeout=timeout, what="the replica to replay the primary's writes")

    def lag_seconds(self) -> float:
        """The lag as core.replica measures it, asked directly."""
        with self.connect() as replica:
            row = replica.execute(LAG_SQL).fetchone()
        return float(row[0]) if row and row[0] is not None else float("inf")

    @contextmanager
    def replay_paused(self) -> Iterator[None]:
        """WAL still arrives, but is not applied: what the primary writes meanwhile is
        missing here, as behind a slow replica."""
        with self.connect() as replica:
            replica.execute("SELECT pg_wal_replay_pause()")
            wait_until(
                lambda: (
                    replica.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()
                    == ("paused",)
                ),
                timeout=30,
                what="replay to pause",
            )
        try:
            yield
        finally:
            self.resume_replay()

    def resume_replay(self) -> None:
        if self.answers():
            with self.connect() as replica:
                replica.execute("SELECT pg_wal_replay_resume()")
