"""The contracts page (seed 004's rollout plan) and a tool's findings with their examples,
both of the collections their reader sees (contracts.selectors)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from contracts import selectors
from contracts.forms import ContractsFilterForm
from contracts.models import CONTRACT_FIELDS, FindingKind

# What the page shows is what receipts and failure records show, summed per tool.
VIEW_CONTRACTS = "triage.view_receipt"


def _form(request: HttpRequest) -> tuple[ContractsFilterForm, int]:
    form = ContractsFilterForm(request.GET)
    return form, (200 if form.is_valid() else 400)


@require_safe
@login_required
@permission_required(VIEW_CONTRACTS, raise_exception=True)
def contracts_page(request: HttpRequest) -> HttpResponse:
    form, status = _form(request)
    now = timezone.now()
    context = {
        "form": form,
        "window_choices": selectors.WINDOW_CHOICES,
        "fields": CONTRACT_FIELDS,
        "first_batch_size": selectors.FIRST_BATCH_SIZE,
        "now": now,
    }
    if status == 200:
        context["overview"] = selectors.contracts_overview(
            now=now,
            filters=form.filters(),
            limit=None if request.GET.get("all") == "1" else selectors.LIST_LIMIT,
            user=request.user,
        )
    return render(request, "contracts/contracts.html", context, status=status)


@require_safe
@login_required
@permission_required(VIEW_CONTRACTS, raise_exception=True)
def findings_page(request: HttpRequest) -> HttpResponse:
    form, status = _form(request)
    context = {"form": form, "kinds": FindingKind.choices}
    if status == 200:
        rows, total = selectors.findings_list(
            now=timezone.now(),
            filters=form.filters(),
            kind=form.cleaned_data["kind"] or None,
            user=request.user,
        )
        context.update(rows=rows, total=total, filters=form.filters(), limit=selectors.LIST_LIMIT)
    return render(request, "contracts/findings.html", context, status=status)
