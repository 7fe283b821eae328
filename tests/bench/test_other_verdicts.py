"""The checks of bench/qualitylab.py, bench/alerts.py, bench/scrub.py and
bench/triage_scale.py, on made-up results: each finds the wrong result it exists for, and a
run with one exits non-zero."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from bench import qualitylab, scrub, triage_scale
from bench.alerts import delivery_problems
from bench.verdict import EXIT_BROKEN, EXIT_MET, EXIT_MISSED

# --- Quality Lab --------------------------------------------------------------------------


def test_a_worker_that_judges_a_case_otherwise_than_the_engine_is_found() -> None:
    engine = {"a": (True, "", ""), "b": (False, "search", "not_retrieved"), "c": (True, "", "")}
    assert qualitylab.verdict_differences(dict(engine), engine) == []
    worker = {**engine, "b": (True, "", ""), "d": (True, "", "")}
    del worker["c"]
    assert qualitylab.verdict_differences(worker, engine) == [
        "case b: the worker says passed, the engine failed at search: not_retrieved",
        "case c: the worker says nothing, the engine passed",
        "case d: a result for no case sent",
    ]


def test_a_large_spec_import_that_lost_tools_is_broken() -> None:
    assert qualitylab.import_problems(1, {"engine": 1223, "desk": 1223}) == []
    assert qualitylab.import_problems(2, {"engine": 1223, "desk": 1190}) == [
        "attempt 2: the worker built 1190 tools, graph-tool-call's own build 1223"
    ]
    assert qualitylab.import_problems(1, {"engine": 0, "desk": 0})  # nothing built at all


# --- alerts -----------------------------------------------------------------------------


def test_the_expected_deliveries_are_the_rules_not_what_arrived() -> None:
    arrived = [(1.0, True)] * 41
    assert delivery_problems(41, arrived, "after the samples") == []
    assert delivery_problems(42, arrived, "at the end") == [
        "at the end: 41 webhooks arrived, the rules must send 42"
    ]
    assert delivery_problems(40, arrived, "at the end") == [
        "at the end: 41 webhooks arrived, the rules must send 40"
    ]
    forged = [*arrived[:40], (1.0, False)]
    assert delivery_problems(41, forged, "x") == ["x: 1 webhooks whose signature did not verify"]
    assert delivery_problems(41, forged, "x", signatures=False) == []


# --- scrub ------------------------------------------------------------------------------


def run_scrub(
    monkeypatch: pytest.MonkeyPatch, shapes: list[str], *argv: str, kilobytes: int = 3
) -> int:
    monkeypatch.setattr(
        scrub, "HOSTILE_SHAPES", {name: scrub.HOSTILE_SHAPES[name] for name in shapes}
    )
    arguments = ["--kilobytes", str(kilobytes), "--rounds", "1", *argv]
    monkeypatch.setattr(sys, "argv", ["scrub.py", *arguments])
    return scrub.main()


def test_the_scrub_bench_times_shapes_it_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without --strict only a broken shape fails the run (timings on a busy machine vary).
    assert run_scrub(monkeypatch, [scrub.ORDINARY, "card numbers", "near-cards"]) == EXIT_MET
    out = capsys.readouterr().out
    assert "BROKEN" not in out and "not judged" not in out
    assert "  card numbers: " in out and "  near-cards: " in out  # judged: PASS or MISS


def test_a_scrubber_that_lets_a_card_through_is_broken(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from triage import scrub as scrubber

    monkeypatch.setattr(scrubber, "scrub_payload", lambda body, **kwargs: body)
    assert run_scrub(monkeypatch, [scrub.ORDINARY, "card numbers"]) == EXIT_BROKEN
    out = capsys.readouterr().out
    assert "BROKEN  card numbers: 3,000 chars: the planted '4111 1111 1111 1111' came out" in out
    assert "MISS  card numbers: not judged" in out


def test_a_refused_shape_is_a_miss_not_a_fast_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The budget refuses this one (scrub_failed): its time would be the refusal's, which
    # stops early. It used to be timed and printed PASS.
    shapes = [scrub.ORDINARY, "secrets, encoded and escaped"]
    assert run_scrub(monkeypatch, shapes, kilobytes=20) == EXIT_MET
    assert run_scrub(monkeypatch, shapes, "--strict", kilobytes=20) == EXIT_MISSED
    out = capsys.readouterr().out
    assert "MISS  secrets, encoded and escaped: refused by the work budget (scrub_failed) at" in out
    assert "PASS  secrets" not in out


# --- triage at scale --------------------------------------------------------------------


def endpoint(url: str, *, api: bool = False) -> triage_scale.Endpoint:
    return triage_scale.Endpoint(url, url, api=api)


def test_an_endpoint_is_checked_before_it_is_timed() -> None:
    assert triage_scale.endpoint_problems(endpoint("/"), 200, b"<html>") == []
    assert triage_scale.endpoint_problems(endpoint("/"), 302, b"") == ["/: HTTP 302"]
    api = endpoint("/api/v1/groups", api=True)
    assert triage_scale.endpoint_problems(api, 200, b'{"results": [{"id": 1}]}') == []
    assert triage_scale.endpoint_problems(api, 200, b'{"results": []}') == [
        "/api/v1/groups: no rows in the answer"
    ]


def size(records: int, loaded: int, p95_ms: float, **fields: Any) -> triage_scale.SizeResult:
    timing = triage_scale.Timing(
        "triage page, defaults (24h, active)", [p95_ms] * 20, 11, triage_page=True
    )
    return triage_scale.SizeResult(
        records, None, {"records": loaded, "groups": 9}, [timing], **fields
    )


def test_a_size_whose_database_is_short_is_never_judged(capsys: pytest.CaptureFixture[str]) -> None:
    passed = triage_scale.report([size(100_000, 100_000, 40.0), size(1_000_000, 1_000_000, 50.0)])
    assert passed.exit_status(strict=True) == EXIT_MET
    assert "PASS  triage page, defaults (24h, active): p95 50.0 ms" in capsys.readouterr().out
    short = triage_scale.report([size(100_000, 100_000, 40.0), size(1_000_000, 640_000, 30.0)])
    assert short.exit_status(strict=False) == EXIT_BROKEN
    out = capsys.readouterr().out
    assert "BROKEN  1,000,000 records: the database holds 640,000 records" in out
    assert "30.0" not in out


def test_an_error_while_timing_breaks_the_size(capsys: pytest.CaptureFixture[str]) -> None:
    failed = size(1_000_000, 1_000_000, 50.0, problems=["API groups, recently seen: HTTP 500"])
    found = triage_scale.report([size(100_000, 100_000, 40.0), failed])
    assert found.exit_status(strict=False) == EXIT_BROKEN


def test_with_teams_a_page_that_adds_a_query_misses_and_the_result_has_its_own_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def teamed(records: int, queries: int) -> triage_scale.SizeResult:
        timing = triage_scale.Timing(
            "triage page, defaults (24h, active)", [40.0] * 20, queries, triage_page=True,
            unfiltered_queries=9,
        )  # fmt: skip
        return triage_scale.SizeResult(records, None, {"records": records}, [timing])

    same = triage_scale.report([teamed(100_000, 9), teamed(1_000_000, 9)])
    assert same.exit_status(strict=True) == EXIT_MET
    more = triage_scale.report([teamed(100_000, 9), teamed(1_000_000, 10)])
    assert more.exit_status(strict=True) == EXIT_MISSED
    out = capsys.readouterr().out
    assert "10 queries with the team filter, 9 without (target: the same)" in out
    assert triage_scale.result_name([100_000, 1_000_000], team=True) == "triage-scale-team"
    assert triage_scale.result_name([100_000, 1_000_000]) == "triage-scale"


# --- the reporter and the MCP middleware ------------------------------------------------


def test_the_reporters_worst_call_is_judged_over_every_round_and_a_broken_one_never() -> None:
    from bench.reporter import CallerCost, judge_caller
    from bench.verdict import Verdicts

    def cost(p99: float, worst: float) -> CallerCost:
        return CallerCost(
            label="desk up", calls=1000, p50_us=40.0, p99_us=p99, worst_us=worst,
            floor_p50_us=30.0, floor_p99_us=35.0,
        )  # fmt: skip

    said: list[str] = []
    verdicts = Verdicts(say=said.append)
    verdicts.check("append, desk up", [])
    judge_caller(verdicts, "append", "desk up", [cost(45.0, 900.0), cost(60.0, 7000.0)])
    assert verdicts.judged == [("append p99 desk up", True), ("append worst desk up", False)]
    assert verdicts.exit_status(strict=True) == EXIT_MISSED

    broken = Verdicts(say=said.append)
    broken.check("append, desk up", ["append, desk up failed (errors above)"])
    judge_caller(broken, "append", "desk up", [cost(45.0, 900.0)])
    assert broken.judged == [("append p99 desk up", False), ("append worst desk up", False)]
    assert broken.exit_status(strict=False) == EXIT_BROKEN


def test_the_middlewares_added_p99_is_judged_only_on_a_server_that_delivered() -> None:
    from bench.mcp_middleware import Row, judge_added
    from bench.verdict import Verdicts

    row = Row(
        desk="up", calls=100, bare_p50_us=200, bare_p99_us=400, bare_worst_us=900,
        contract_p50_us=280, contract_p99_us=600, contract_worst_us=1500,
        added_p50_us=80, added_p99_us=200, enqueue_p50_us=80, enqueue_p99_us=120,
    )  # fmt: skip
    verdicts = Verdicts(say=lambda line: None)
    verdicts.check("desk up", [])
    judge_added(verdicts, row)
    assert verdicts.judged == [("desk up: added p99", True)]
    assert verdicts.exit_status(strict=True) == EXIT_MET
    broken = Verdicts(say=lambda line: None)
    broken.check("desk up", ["desk up failed (errors above)"])
    judge_added(broken, row)
    assert broken.exit_status(strict=True) == EXIT_BROKEN


def test_the_scale_bench_splits_a_pages_time_into_sql_python_and_template() -> None:
    timing = triage_scale.Timing(
        "triage page",
        [100.0, 120.0, 140.0],
        10,
        parts_ms=[(50.0, 20.0), (60.0, 25.0), (70.0, 30.0)],
    )
    assert timing.profile() == (60.0, 35.0, 25.0)  # 120 - 60 - 25 is Python
    assert triage_scale.Timing("api", [10.0], 2).profile() == (0.0, 10.0, 0.0)


def test_a_scale_run_of_other_sizes_keeps_its_result_beside_the_default_one() -> None:
    assert triage_scale.result_name([100_000, 1_000_000]) == "triage-scale"
    assert triage_scale.result_name([1_000_000, 10_000_000]) == "triage-scale-1m-10m"
    assert triage_scale.result_name([50_000, 1_000_000]) == "triage-scale-50k-1m"


def test_the_pages_clock_reads_the_time_the_loaded_traffic_ends() -> None:
    """A 10M load takes about an hour and a --reuse run may come days later: the measuring
    processes read the time a second after the newest record of any database, so "the last
    24 hours" holds a day of traffic and the first screen finds its last hour busy."""
    from datetime import UTC, datetime, timedelta

    wall = datetime(2026, 12, 6, 15, 0, tzinfo=UTC)
    newest = [
        datetime(2026, 12, 6, 13, 29, tzinfo=UTC),
        None,
        datetime(2026, 12, 6, 13, 30, tzinfo=UTC),
    ]
    assert triage_scale.clock_lag(newest, wall) == timedelta(hours=1, minutes=29, seconds=59)
    assert triage_scale.clock_lag([None], wall) == timedelta(0)
    # A record ahead of the wall clock never sets the pages' clock forward.
    assert triage_scale.clock_lag([wall + timedelta(minutes=5)], wall) == timedelta(0)


def test_the_clock_is_set_back_from_the_wall_clock_however_often_it_is_set() -> None:
    from datetime import UTC, datetime, timedelta

    from django.utils import timezone

    wall_now = timezone.now
    try:
        for _ in range(2):
            triage_scale.set_clock_back(timedelta(hours=2))
            shifted = timezone.now()
            lag = datetime.now(UTC) - shifted
            assert timedelta(hours=2) <= lag < timedelta(hours=2, seconds=5)
        triage_scale.set_clock_back(timedelta(0))
        assert datetime.now(UTC) - timezone.now() < timedelta(seconds=5)
    finally:
        timezone.now = wall_now
