"""bench/ingest.py's verdicts on made-up runs: no ratio from a path whose check failed, and
--sweep crowns only a configuration that passed its check."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from bench import ingest
from bench.ingest import Measurement, ServerConfig
from bench.verdict import EXIT_BROKEN, EXIT_MET, EXIT_MISSED


def measured(
    path: str, records_per_second: float, *, consistent: bool = True, errors: tuple[str, ...] = ()
) -> Measurement:
    return Measurement(
        path=path,
        server="sync 2w",
        connections=2,
        records=10_000,
        seconds=10_000 / records_per_second,
        p50_ms=80.0,
        p95_ms=120.0,
        kb_per_record=1.0,
        cpu_busy=0.9,
        cpu_ours=0.8,
        consistent=consistent,
        errors=list(errors),
        server_log="",
    )


def verdict_of(rows: list[Measurement], *, strict: bool) -> int:
    verdicts = ingest.check_paths(rows, key=lambda row: row.path)
    ingest.judge_paths(verdicts, rows, naive=True, otlp=True)
    return verdicts.exit_status(strict=strict)


def test_two_checked_paths_give_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [measured("fast", 6_000), measured("otlp", 5_000), measured("naive", 1_000)]
    assert verdict_of(rows, strict=True) == EXIT_MET
    out = capsys.readouterr().out
    assert "PASS  ratio (fast / naive) = 6.00x (target >= 3x)" in out
    assert "PASS  fast 6000 records/s (target >= 5000)" in out


def test_a_naive_path_that_stored_nothing_gives_no_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The naive path of 2026-12 answered 500 on every batch: its "rate" was the errors'.
    rows = [
        measured("fast", 6_000),
        measured("otlp", 5_000),
        measured(
            "naive",
            150_000,
            consistent=False,
            errors=("batch 0: HTTP 500, 0/500 accepted: 'Request' object has no attribute",),
        ),
    ]
    assert verdict_of(rows, strict=False) == EXIT_BROKEN
    out = capsys.readouterr().out
    assert "ratio (fast / naive) =" not in out
    assert "MISS  ratio (fast / naive): not judged, the naive path failed its check" in out
    assert "BROKEN  naive: sync 2w: batch 0: HTTP 500" in out
    ingest.print_table(rows)
    naive_row = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("naive")
    )
    assert "150000" not in naive_row and "MISMATCH, BROKEN" in naive_row


def test_a_missed_target_fails_only_with_strict() -> None:
    rows = [measured("fast", 4_000), measured("otlp", 3_900), measured("naive", 2_000)]
    assert verdict_of(rows, strict=False) == EXIT_MET
    assert verdict_of(rows, strict=True) == EXIT_MISSED


def sweep(
    rates: dict[ServerConfig, tuple[float, bool]],
) -> tuple[argparse.Namespace, Callable[..., Measurement]]:
    def run(path: str, app: str, config: ServerConfig, records: int) -> Measurement:
        rate, consistent = rates[config]
        row = measured(path, rate, consistent=consistent)
        row.server, row.connections = config.label, config.connections
        if not consistent:
            row.errors.append("database holds 0 records, expected 10000")
        return row

    args = argparse.Namespace(
        app=ingest.FAST_APP, records=10_000, repeat=1, strict=False, results_dir=None
    )
    return args, run


def test_the_sweep_never_crowns_a_configuration_that_failed_its_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rates: dict[ServerConfig, Any] = {config: (5_500.0, True) for config in ingest.SWEEP}
    rates[ingest.SWEEP[1]] = (9_000.0, False)  # the fastest stored nothing
    rates[ingest.SWEEP[2]] = (6_000.0, True)
    args, run = sweep(rates)
    assert ingest.run_sweep(args, run) == EXIT_BROKEN
    out = capsys.readouterr().out
    assert "PASS  best: sync 4w, 4 connections, 6000 records/s" in out
    assert "9000" not in out


def test_the_sweep_crowns_nothing_when_every_configuration_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args, run = sweep({config: (7_000.0, False) for config in ingest.SWEEP})
    assert ingest.run_sweep(args, run) == EXIT_BROKEN
    assert "best: none, no configuration passed its check" in capsys.readouterr().out


def test_the_fast_path_is_judged_against_the_copy_limit_only_when_both_were_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def judged(copy: Measurement) -> int:
        rows = [measured("fast", 6_000), copy]
        verdicts = ingest.check_paths(rows, key=lambda row: row.path)
        ingest.judge_paths(verdicts, rows, naive=False, otlp=False, copy=True)
        return verdicts.exit_status(strict=True)

    assert judged(measured("copy", 40_000)) == EXIT_MET
    assert "PASS  ratio (fast / COPY) = 0.150x: ingest runs at 15.0%" in capsys.readouterr().out
    assert judged(measured("copy", 60_000)) == EXIT_MISSED  # 10%
    assert "MISS  ratio (fast / COPY) = 0.100x" in capsys.readouterr().out
    lost = measured("copy", 90_000, consistent=False, errors=("the table holds 9 rows",))
    assert judged(lost) == EXIT_BROKEN
    assert "ratio (fast / COPY) =" not in capsys.readouterr().out


def test_a_copy_row_carries_the_items_fields_and_the_rest_in_extra() -> None:
    columns = [
        ("stage", "character varying", False),
        ("reason", "character varying", False),
        ("evidence", "jsonb", False),
        ("extra", "jsonb", False),
        ("group_id", "bigint", False),
        ("assigned_at", "timestamp with time zone", True),
    ]
    item = {"body": {"stage": "execute", "reason": "http_5xx", "evidence": {"http_status": 503},
                     "runtime": {"name": "r"}}}  # fmt: skip
    (row,) = ingest.copy_rows([item], columns)
    assert row[:3] == ("execute", "http_5xx", '{"http_status":503}')
    assert row[3] == '{"runtime":{"name":"r"}}'
    assert row[4:] == (0, None)
