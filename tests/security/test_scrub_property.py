"""Property: no planted secret survives ingest, and clean values pass through unchanged.

Hypothesis generates batches of 100 items of every type (failures, runner events, receipts,
audit events, learning attempts), each carrying 1-4 secrets of 26 kinds
(tests/security/scrub_strategies.py) in 11 positions and 11 encodings. 100 batches, 10,000
payloads, go through the real write path: ``triage.intake.ingest.batch_ingest`` or
``POST /api/v1/ingest``, the on-commit hooks, and the Celery task that ingest publishes
(learning derivation: its message is published on kombu's in-memory transport, read back
and run here as a worker would). Afterwards no needle of any planted secret may appear in:

* any column of any table of the database (each example runs in a savepoint rolled back
  at its end, so the dump holds that example's rows),
* any log record of any logger at DEBUG (raw records, before handlers' filters: a handler
  an operator adds, such as Sentry's, may not carry the scrubbing filter),
* any Celery message (body, headers, properties),
* the API's answer.

A failure lists each survivor: the kind, encoding and position of the plant, what was
planted and where a fragment of it survived. Then pure-function properties run many more
examples of the scrubber alone, and a generated corpus of clean values measures how often
the scrubber changes something it should not (it must be under 1%).
"""

from __future__ import annotations

import io
import json
import logging
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from config.celery import app as celery_app
from tests.security.scrub_strategies import (
    ENCODINGS,
    KINDS,
    POSITIONS,
    SECRETS,
    Batch,
    LeakFinder,
    Plant,
    Secret,
    Survivor,
    batches,
    clean_corpus,
    in_sentence,
)
from triage.intake.ingest import batch_ingest
from triage.models import FailureRecord
from triage.scrub import ScrubLogFilter, scrub_payload, scrub_text

KEY = b"property-test-hash-key-0123456789"
BATCHES = 100
BATCH_SIZE = 100
MIN_PAYLOADS = 10_000
CLEAN_CORPUS_SIZE = 6_000
ONE_IN_FOUR = st.sampled_from([True, False, False, False])


# --- where values could survive -------------------------------------------------------------
def _strings(value: Any) -> Iterator[str]:
    """Every string in a cell: JSON text is decoded too, so escaping hides nothing."""
    if isinstance(value, str):
        yield value
        if value[:1] in ("{", "[", '"'):
            try:
                decoded = json.loads(value)
            except ValueError:
                return
            yield from _strings(decoded)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (bytes, memoryview)):
        yield bytes(value).decode("utf-8", "replace")
    elif value is not None:
        yield str(value)


def _database_rows() -> Iterator[tuple[str, str]]:
    """(where, text) for every row of every table."""
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [column[0] for column in cursor.description]
            for row in cursor.fetchall():
                cells = [
                    f"{column}={' '.join(_strings(cell))}"
                    for column, cell in zip(columns, row, strict=True)
                ]
                yield f"table {table} (row {row[0]})", "\n".join(cells)


_STANDARD_RECORD_ATTRIBUTES = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
}


def _log_text(record: logging.LogRecord) -> str:
    try:
        parts = [record.getMessage()]
    except Exception:  # bad format args: the template and the args, as a handler would see
        parts = [str(record.msg), repr(record.args)]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    parts += [record.exc_text or "", record.stack_info or ""]
    # extra={...} becomes record attributes, which structured log handlers serialize.
    parts += [
        f"{name}={value!r}"
        for name, value in record.__dict__.items()
        if name not in _STANDARD_RECORD_ATTRIBUTES
    ]
    return "\n".join(parts)


class _Keep(logging.Handler):
    """Keeps the text of each record as it arrives: ScrubLogFilter rewrites records in place
    for the handlers after it, and this handler runs first."""

    def __init__(self, records: list[tuple[str, str]]) -> None:
        super().__init__(level=logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((f"log record of {record.name}", _log_text(record)))


@pytest.fixture
def every_log_record() -> Iterator[list[tuple[str, str]]]:
    """(where, text) of every record of every logger at DEBUG, raw (before any filter)."""
    records: list[tuple[str, str]] = []
    handler = _Keep(records)
    root = logging.getLogger()
    loggers = [root] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]  # fmt: skip
    levels = {logger: logger.level for logger in loggers}
    isolated = [logger for logger in loggers if not logger.propagate]
    disabled = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    for logger in [root, *isolated]:
        logger.handlers.insert(0, handler)
    try:
        yield records
    finally:
        for logger in [root, *isolated]:
            logger.removeHandler(handler)
        for logger, level in levels.items():
            logger.setLevel(level)
        logging.disable(disabled)


@dataclass
class CeleryMessages:
    """Task messages published on kombu's in-memory transport instead of the broker."""

    connection: Any
    queue: Any

    def drain(self) -> list[Any]:
        simple = self.connection.SimpleQueue(self.queue)
        messages = []
        while True:
            try:
                message = simple.get(block=False)
            except simple.Empty:
                break
            message.ack()
            messages.append(message)
        simple.close()
        return messages


@pytest.fixture
def celery_messages(monkeypatch: pytest.MonkeyPatch) -> Iterator[CeleryMessages]:
    """Every task the code under test publishes goes, serialized as for the real broker, to
    kombu's in-memory transport, where the test reads it back."""
    amqp: Any = celery_app.amqp  # celery-types does not describe AMQP's queues and Producer
    memory: Any = celery_app.connection_for_write("memory://")
    queue = amqp.queues[celery_app.conf.task_default_queue]
    queue(memory.default_channel).declare()
    send_task = celery_app.send_task

    def send_to_memory(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("connection", None)
        kwargs["producer"] = amqp.Producer(memory)
        return send_task(*args, **kwargs)

    monkeypatch.setattr(celery_app, "send_task", send_to_memory)
    captured = CeleryMessages(memory, queue)
    captured.drain()  # whatever an earlier test left in the process-wide memory broker
    yield captured
    memory.release()


def _message_text(message: Any) -> str:
    body = message.body.decode() if isinstance(message.body, bytes) else str(message.body)
    return "\n".join(
        [body, json.dumps(message.headers, default=str), json.dumps(message.properties)]
    )


def _report(survivors: list[Survivor]) -> str:
    lines = [f"{len(survivors)} planted value(s) survived:"]
    for survivor in survivors[:25]:
        plant = survivor.plant
        lines.append(
            f"- {plant.secret.kind} ({plant.encoding}, {plant.position}) in {plant.item_type} "
            f"{plant.item_id}\n    planted:  {plant.planted[:300]!r}\n"
            f"    secret:   {plant.secret.text[:300]!r}\n"
            f"    survived: {survivor.fragment!r} in {survivor.where}\n"
            f"    context:  ...{survivor.context!r}..."
        )
    return "\n".join(lines)


# --- the property through the real ingest path ---------------------------------------------
@dataclass
class Totals:
    payloads: int = 0
    plants: int = 0
    batches_over_http: int = 0
    celery_messages: int = 0
    tasks_run: int = 0
    log_records: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    positions: Counter[str] = field(default_factory=Counter)
    encodings: Counter[str] = field(default_factory=Counter)
    item_types: Counter[str] = field(default_factory=Counter)


def _ingest(batch: Batch, *, client: APIClient | None) -> tuple[dict[str, Any], str]:
    if client is None:
        outcome = batch_ingest(owner="runtime-a", items=batch.items, channel="api").as_dict()
        return outcome, json.dumps(outcome)
    response = client.post(
        "/api/v1/ingest", data=json.dumps({"items": batch.items}), content_type="application/json"
    )
    assert response.status_code in (200, 207), response.content[:2000]
    return response.json(), response.content.decode()


def test_no_planted_secret_survives_in_the_database_logs_celery_or_the_answer(
    ingest_client: APIClient,
    django_capture_on_commit_callbacks: Any,
    every_log_record: list[tuple[str, str]],
    celery_messages: CeleryMessages,
) -> None:
    totals = Totals()

    @settings(
        max_examples=BATCHES,
        deadline=None,
        # No shrinking: the report names every survivor (kind, encoding, position, what was
        # planted and where a fragment of it survived), and shrinking 100-item batches
        # through the database would take minutes.
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(batch=batches(BATCH_SIZE), over_http=ONE_IN_FOUR, run_worker=ONE_IN_FOUR)
    def ingest_one_batch(batch: Batch, over_http: bool, run_worker: bool) -> None:
        every_log_record.clear()
        texts: list[tuple[str, str]] = []
        with transaction.atomic():
            with django_capture_on_commit_callbacks(execute=True):
                outcome, answer = _ingest(batch, client=ingest_client if over_http else None)
            texts.append(("the API answer", answer))
            # Every message is read; in one batch of four its task also runs here, as a
            # worker would (deriving suggestions from attempts is the slowest step).
            for _ in range(10):
                messages = celery_messages.drain()
                totals.celery_messages += len(messages)
                for message in messages:
                    task = message.headers["task"]
                    texts.append((f"celery message {task}", _message_text(message)))
                    if run_worker:
                        args, kwargs, _embed = message.decode()
                        with django_capture_on_commit_callbacks(execute=True):
                            celery_app.tasks[task](*args, **kwargs)
                        totals.tasks_run += 1
                if not (messages and run_worker):
                    break
            texts.extend(_database_rows())
            texts += every_log_record
            transaction.set_rollback(True)

        finder = LeakFinder(batch.plants)
        survivors = finder.find(texts)
        assert not survivors, _report(survivors)
        statuses = {item["id"]: item["status"] for item in outcome["items"]}
        expected = {
            item["id"]: "rejected" if item["id"] in batch.rejected_ids else "accepted"
            for item in batch.items
        }
        assert statuses == expected, [
            item for item in outcome["items"] if item["status"] != expected[item["id"]]
        ]
        totals.payloads += len(batch.items)
        totals.plants += len(batch.plants)
        totals.batches_over_http += over_http
        totals.log_records += len(every_log_record)
        totals.kinds.update(plant.secret.kind for plant in batch.plants)
        totals.positions.update(plant.position for plant in batch.plants)
        totals.encodings.update(plant.encoding for plant in batch.plants)
        totals.item_types.update(item["type"] for item in batch.items)

    ingest_one_batch()

    print(
        f"\n{totals.payloads} payloads ({totals.batches_over_http} of {BATCHES} batches over "
        f"HTTP), {totals.plants} planted secrets, {totals.celery_messages} Celery messages "
        f"({totals.tasks_run} tasks run), {totals.log_records} log records\n"
        f"kinds: {dict(totals.kinds)}\npositions: {dict(totals.positions)}\n"
        f"encodings: {dict(totals.encodings)}\nitem types: {dict(totals.item_types)}"
    )
    assert totals.payloads >= MIN_PAYLOADS
    assert set(totals.kinds) == set(KINDS) and len(KINDS) >= 12
    assert set(totals.encodings) == set(ENCODINGS)
    assert {"message", "dict_key", "sensitive_key", "headers", "url"} <= set(totals.positions)
    assert len(totals.item_types) == 5
    assert totals.celery_messages > 0 and totals.tasks_run > 0  # attempts queue derivation


# --- the scrubber alone, many more examples --------------------------------------------------
@settings(max_examples=4_000, deadline=None)
@given(
    secret=SECRETS,
    encoding=st.sampled_from(sorted(ENCODINGS)),
    seed=st.integers(0, 2**32 - 1),
)
def test_scrub_text_removes_every_kind_in_every_encoding(
    secret: Secret, encoding: str, seed: int
) -> None:
    rng = random.Random(seed)
    encoded = ENCODINGS[encoding](secret, rng)
    text = in_sentence(rng, encoded)
    scrubbed = scrub_text(text)
    plant = Plant(secret, "-", "text", "free text", encoding, text)
    survivors = LeakFinder([plant]).find([("scrub_text output", scrubbed)])
    assert not survivors, _report(survivors)
    assert scrub_text(scrubbed) == scrubbed  # idempotent


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batch=batches(5))
def test_scrub_payload_removes_every_plant_and_is_idempotent(batch: Batch) -> None:
    finder = LeakFinder(batch.plants)
    for item in batch.items:
        once = scrub_payload(item["body"], hash_key=KEY)
        where = f"scrubbed body of {item['id']}"
        survivors = finder.find(
            [(where, json.dumps(once, ensure_ascii=False)), (where, "\n".join(_strings(once)))]
        )
        assert not survivors, _report(survivors)
        assert scrub_payload(once, hash_key=KEY) == once


@contextmanager
def _written_log() -> Iterator[io.StringIO]:
    """What the handlers that config.settings attaches (with the scrubbing filter) write."""
    handlers = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler, logging.StreamHandler)
        and any(isinstance(item, ScrubLogFilter) for item in handler.filters)
    ]
    assert handlers, "config.settings.LOGGING attaches no handler with the scrubbing filter"
    stream = io.StringIO()
    streams = [handler.setStream(stream) for handler in handlers]
    try:
        yield stream
    finally:
        for handler, previous in zip(handlers, streams, strict=True):
            if previous is not None:
                handler.setStream(previous)


def _log_with_secret(logger: logging.Logger, shape: str, secret: Secret, text: str) -> None:
    if shape == "argument":
        logger.warning("call to %s failed: %s", "getOrderDetail", text)
    elif shape == "message":
        logger.warning(text)
    elif shape == "split":  # the secret starts in the template and ends in an argument
        logger.warning(f"upstream said {secret.text[:4]}%s (retrying)", secret.text[4:])
    elif shape == "mapping":
        logger.warning("request %s", {"headers": {"X-Debug": text}, "note": text})
    else:
        try:
            raise RuntimeError(f"connect failed: {text}")
        except RuntimeError:
            logger.exception("request failed", stack_info=shape == "stack")


@settings(max_examples=500, deadline=None)
@given(
    secret=SECRETS,
    encoding=st.sampled_from(sorted(ENCODINGS)),
    shape=st.sampled_from(["argument", "message", "split", "mapping", "exception", "stack"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_log_lines_written_with_the_scrubbing_filter_hold_no_planted_secret(
    secret: Secret, encoding: str, shape: str, seed: int
) -> None:
    rng = random.Random(seed)
    text = in_sentence(rng, ENCODINGS[encoding](secret, rng))
    with _written_log() as written:
        _log_with_secret(logging.getLogger("triage.intake.ingest"), shape, secret, text)
    output = written.getvalue()
    assert output.strip()  # the line was written
    plant = Plant(secret, "-", "log line", shape, encoding, text)
    survivors = LeakFinder([plant]).find([("the written log", output)])
    assert not survivors, _report(survivors)


def test_the_strategies_cover_what_the_issue_asks() -> None:
    assert len(KINDS) >= 12
    assert {"plain", "url_encoded", "json_escaped", "wrapped", "letter_case"} <= set(ENCODINGS)
    assert {"message", "nested_value", "list_item", "dict_key", "sensitive_key"} <= set(POSITIONS)
    assert {"url", "headers", "text_blob"} <= set(POSITIONS)


# --- clean values ------------------------------------------------------------------------------
def test_clean_values_are_changed_in_fewer_than_one_percent_of_cases(
    ingest_client: APIClient,
) -> None:
    corpus = clean_corpus(seed=20261129, size=CLEAN_CORPUS_SIZE)
    distinct = len(set(corpus))
    by_text = [(key, value) for key, value in corpus if scrub_text(value) != value]
    by_payload = [
        (key, value)
        for key, value in corpus
        if scrub_payload({key: value}, hash_key=KEY) != {key: value}
    ]
    # And through ingest: stored evidence must equal what was sent.
    items = []
    for index in range(0, len(corpus), 60):
        values = [{key: value} for key, value in corpus[index : index + 60]]
        items.append(
            {
                "type": "failure",
                "id": f"clean-{index:05d}",
                "body": {
                    "stage": "execute",
                    "reason": "http_5xx",
                    "message": "clean corpus",
                    "tool": "getOrderDetail",
                    "collection": "shop",
                    "evidence": {"values": values},
                },
            }
        )
    response = ingest_client.post(
        "/api/v1/ingest", data=json.dumps({"items": items}), content_type="application/json"
    )
    assert response.status_code == 200, response.content[:2000]
    stored: list[Any] = []
    for record in FailureRecord.objects.filter(message="clean corpus").order_by("client_id"):
        stored.extend(record.evidence["values"])
    sent = [{key: value} for key, value in corpus]
    by_ingest = [pair for pair, kept in zip(sent, stored, strict=True) if pair != kept]

    rates = {
        "scrub_text": len(by_text) / len(corpus),
        "scrub_payload": len(by_payload) / len(corpus),
        "ingest": len(by_ingest) / len(corpus),
    }
    summary = (
        f"clean corpus: {len(corpus)} values ({distinct} distinct); changed by "
        + ", ".join(f"{name} {rate:.2%}" for name, rate in rates.items())
        + f"\nchanged by scrub_text: {Counter(by_text).most_common(20)}"
        + f"\nchanged by ingest: {Counter(map(str, by_ingest)).most_common(20)}"
    )
    print("\n" + summary)
    assert len(corpus) >= 5_000 and distinct >= 4_000
    assert all(rate < 0.01 for rate in rates.values()), summary
