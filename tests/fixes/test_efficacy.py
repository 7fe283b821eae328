"""The rule that says whether a fix held (fixes.efficacy), on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fixes import efficacy

T = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)


def read(fb: int, sb: int, fa: int, sa: int) -> efficacy.Reading:
    return efficacy.read(
        failures_before=fb, successes_before=sb, failures_after=fa, successes_after=sa
    )


@pytest.mark.parametrize(
    ("figures", "verdict"),
    [
        ((100, 900, 5, 995), "held"),  # 10% → 0.5%: 95% fewer
        ((100, 900, 10, 990), "held"),  # exactly 90% fewer
        ((100, 900, 11, 989), "partly_held"),
        ((100, 900, 50, 950), "partly_held"),  # exactly half
        ((100, 900, 51, 949), "not_held"),
        ((100, 900, 200, 800), "not_held"),  # it rose
        # Fewer failures only because fewer calls: the rate stayed at 10%.
        ((100, 900, 5, 45), "not_held"),
    ],
)
def test_the_verdict_compares_failure_rates(figures: tuple[int, ...], verdict: str) -> None:
    reading = read(*figures)
    assert reading.verdict == verdict
    assert reading.normalised


def test_without_any_success_the_rate_is_the_count_and_says_so() -> None:
    reading = read(40, 0, 2, 0)
    assert (reading.verdict, reading.normalised) == ("held", False)
    assert reading.rate_before == 40.0 and reading.rate_after == 2.0
    assert reading.drop == pytest.approx(0.95)


def test_no_failure_before_or_no_call_after_cannot_be_told() -> None:
    assert read(0, 500, 0, 500).why == "no_failures_before"
    assert read(0, 0, 3, 0).verdict == "unmeasurable"
    silent = read(10, 90, 0, 0)
    assert (silent.verdict, silent.why) == ("unmeasurable", "no_calls_after")


def test_a_span_closes_an_hour_after_it_ends() -> None:
    assert efficacy.closed_spans(T, T + timedelta(hours=24, minutes=59)) == []
    assert efficacy.closed_spans(T, T + timedelta(hours=25)) == ["day"]
    assert efficacy.closed_spans(T, T + timedelta(days=7, hours=1)) == ["day", "week"]


def test_windows_are_the_same_length_on_both_sides() -> None:
    week = efficacy.windows(T, "week")
    assert week["before"] == (T - timedelta(days=7), T)
    assert week["after"] == (T, T + timedelta(days=7))
