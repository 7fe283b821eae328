"""The run page compares with the run a person picks, by default the one that makes sense
(the run a re-run came from, else the previous run of the same suite and mode), and the
collection's lines are not bent by repeats and re-runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from qualitylab import selectors, services
from qualitylab.models import CaseResult, CaseRun, Collection
from tests.qualitylab import test_views as views
from tests.qualitylab.test_views import SEARCH_FAILURES, execute, make_collection, start_run

# The run page tests' fixtures, as fixtures of this module too.
capture = views.capture
shop = views.shop
viewer = views.viewer

pytestmark = pytest.mark.django_db


def _page(client: Client, run: CaseRun, **params: Any) -> Any:
    return client.get(f"/qualitylab/runs/{run.pk}/", params)


def _rerun(run: CaseRun, capture: Any) -> CaseRun:
    with capture():
        rerun = services.run_rerun_failed(run=run)
    return execute(rerun)


def test_a_re_run_is_compared_with_the_run_it_came_from(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    fifth = execute(start_run(shop, capture))
    sixth = execute(start_run(shop, capture))
    rerun = _rerun(fifth, capture)  # of #5's failures, started after #6
    response = _page(viewer, rerun)
    comparison = response.context["view"].comparison
    assert (comparison.previous.pk, comparison.why) == (fifth.pk, "rerun_of")
    assert sorted(comparison.still_failing) == sorted(SEARCH_FAILURES)
    assert comparison.regressed == [] and comparison.new == []
    content = response.content.decode()
    assert "the run whose failed cases this one ran again" in content
    assert sixth.pk != comparison.previous.pk


def test_the_default_skips_re_runs_and_other_modes(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    full = execute(start_run(shop, capture))
    _rerun(full, capture)
    execute(start_run(shop, capture, mode="search"))  # another mode: not comparable by default
    latest = execute(start_run(shop, capture))
    comparison = _page(viewer, latest).context["view"].comparison
    assert (comparison.previous.pk, comparison.why) == (full.pk, "previous")
    previous = selectors.previous_finished_run(run=latest)
    assert previous is not None and previous.pk == full.pk


def test_the_person_picks_the_run_to_compare_with_in_the_url(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    first = execute(start_run(shop, capture))
    CaseResult.objects.filter(run=first, case__case_id="search-coupons-en").update(passed=False)
    second = execute(start_run(shop, capture))
    third = execute(start_run(shop, capture))
    default = _page(viewer, third).context["view"].comparison
    assert default.previous.pk == second.pk and default.fixed == []

    response = _page(viewer, third, compare=first.pk)
    assert response.status_code == 200
    comparison = response.context["view"].comparison
    assert (comparison.previous.pk, comparison.why) == (first.pk, "chosen")
    assert comparison.fixed == ["search-coupons-en"]
    content = response.content.decode()
    assert "the run you picked" in content
    options = re.findall(r'<option value="(\d+)"( selected)?>', content)
    assert [int(pk) for pk, _ in options] == [second.pk, first.pk]
    assert dict(options)[str(first.pk)] == " selected"
    assert f'href="/qualitylab/runs/{third.pk}/">default comparison</a>' in content
    # A later run may be picked too; it says so.
    later = _page(viewer, first, compare=third.pk)
    assert later.context["view"].comparison.previous.pk == third.pk
    assert "· later</option>" in later.content.decode()


def test_the_pass_rate_has_one_line_per_mode(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    search = execute(start_run(shop, capture, mode="search"))
    every = execute(start_run(shop, capture))
    again = execute(start_run(shop, capture, mode="search"))
    rates = [s for s in selectors.metric_history(collection=shop) if s.key == "pass_rate"]
    assert [(s.mode, [run for run, _ in s.points]) for s in rates] == [
        ("search", [search.pk, again.pk]),
        ("", [every.pk]),
    ]
    content = viewer.get(f"/qualitylab/{shop.name}/").content.decode()
    for label in ("pass rate, search runs", "pass rate, runs of every mode"):
        assert f"<span>{label}</span>" in content
    assert "<span>hit@K</span>" in content  # the other metrics keep one line each


@pytest.mark.parametrize("value", ["zzz", "-1", "0", str(2**63), "self", "other", "missing"])
def test_a_run_that_cannot_be_compared_with_is_refused_on_the_page(
    viewer: Client, shop: Collection, capture: Any, value: str
) -> None:
    first = execute(start_run(shop, capture))
    second = execute(start_run(shop, capture))
    elsewhere = make_collection("other", capture)
    services.cases_import(
        collection=elsewhere,
        documents=[{"id": "c1", "mode": "search", "query": "list orders",
                    "expected_target": "listOrders"}],
    )  # fmt: skip
    foreign = execute(start_run(elsewhere, capture))
    chosen = {"self": second.pk, "other": foreign.pk, "missing": 10**9}.get(value, value)
    response = _page(viewer, second, compare=chosen)
    assert response.status_code == 400
    content = response.content.decode()
    assert "cannot show what the address asks for" in content
    assert "Showing the default comparison instead." in content
    assert response.context["view"].comparison.previous.pk == first.pk


def test_the_pass_rate_line_counts_cases_once_and_leaves_re_runs_out(
    viewer: Client, shop: Collection, capture: Any
) -> None:
    single = execute(start_run(shop, capture, mode="search"))
    repeated = execute(start_run(shop, capture, mode="search", repeat=3))
    # One repetition of one passing case failed: that case is flaky, not passed.
    CaseResult.objects.filter(run=repeated, case__case_id="search-coupons-en", repetition=2).update(
        passed=False
    )
    rerun = _rerun(single, capture)
    cases = CaseResult.objects.filter(run=single).count()
    passed = CaseResult.objects.filter(run=single, passed=True).count()

    [pass_rate, *_] = selectors.metric_history(collection=shop)
    assert pass_rate.key == "pass_rate"
    points = dict(pass_rate.points)
    assert rerun.pk not in points and pass_rate.left_out == [rerun.pk]
    assert points[single.pk] == pytest.approx(passed / cases, abs=1e-4)
    assert points[repeated.pk] == pytest.approx((passed - 1) / cases, abs=1e-4)
    # The result-level rate would have said otherwise: 3 failed repetitions of 3 per case.
    assert repeated.pass_rate != points[repeated.pk]

    content = viewer.get(f"/qualitylab/{shop.name}/").content.decode()
    assert "counted by case: a case repeated several times counts once" in content
    assert "Left out: 1 re-run of failed cases" in content
    assert f'<a href="/qualitylab/runs/{rerun.pk}/">#{rerun.pk}</a>' in content
