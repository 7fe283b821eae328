"""The receipts page (seed 004) and recording what reconciling uncertain work found."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST, require_safe

from core.http import is_partial
from organisation import roles
from triage import receipts
from triage.forms import ReconcileForm
from triage.models import Receipt, Reconciliation, ReconciliationFinding
from triage.pages.visibility import require_collection_perm, visible_or_404
from triage.services import ReconcileError, receipt_reconcile

VIEW_RECEIPTS = "triage.view_receipt"
PAGE = "triage/receipts.html"
QUEUE = "triage/receipts.html#queue"


@dataclass(frozen=True)
class PendingFinding:
    """A finding posted once and not yet confirmed: what the page asks the person to confirm."""

    receipt: Receipt
    finding: str
    note: str
    corrects: Reconciliation | None

    @property
    def finding_label(self) -> str:
        return str(ReconciliationFinding(self.finding).label)

    @property
    def consequence(self) -> str:
        return receipts.finding_consequence(finding=self.finding, receipt=self.receipt)


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        "now": timezone.now(),
        "can_reconcile": request.user.has_perm(roles.RECONCILE_RECEIPT),
        "findings": ReconciliationFinding.choices,
        **extra,
    }


def _render(
    request: HttpRequest,
    *,
    notice: str = "",
    notice_tag: str = "success",
    form: ReconcileForm | None = None,
    receipt_id: int = 0,
    corrects_id: int = 0,
    pending: PendingFinding | None = None,
) -> HttpResponse:
    """The queue alone for htmx, else the whole page; a failed form or a finding waiting
    for confirmation shows on its own row (the queue's, or the reconciled run's)."""
    context = _context(
        request,
        notice=notice,
        notice_tag=notice_tag,
        failed_form=form,
        failed_receipt_id=receipt_id,
        failed_corrects_id=corrects_id,
        pending=pending,
    )
    if is_partial(request):
        return render(
            request,
            QUEUE,
            {
                **context,
                "queue": receipts.reconciliation_queue(now=context["now"], user=request.user),
            },
        )
    overview = receipts.receipts_overview(now=context["now"], user=request.user)
    return render(request, PAGE, {**context, "overview": overview, "queue": overview.queue})


@require_safe
@login_required
@permission_required(VIEW_RECEIPTS, raise_exception=True)
def receipts_page(request: HttpRequest) -> HttpResponse:
    return _render(request)


@require_POST
@login_required
@permission_required(roles.RECONCILE_RECEIPT, raise_exception=True)
def receipt_reconcile_view(request: HttpRequest, receipt_id: int) -> HttpResponse:
    """Record a finding, or a correction of the run's current one, after a confirmation."""
    # Another team's run is no run at all (404); a run of a team whose role here is only
    # to read is refused (403).
    receipt = visible_or_404(Receipt.objects.all(), user=request.user, pk=receipt_id)
    require_collection_perm(request.user, roles.RECONCILE_RECEIPT, [receipt.collection])
    form = ReconcileForm(request.POST)
    if not form.is_valid():
        corrects_raw = request.POST.get("corrects", "")
        return _render(
            request,
            form=form,
            receipt_id=receipt.pk,
            corrects_id=int(corrects_raw) if corrects_raw.isdigit() else 0,
            notice=gettext("Nothing was recorded: choose what the remote side did and say why."),
            notice_tag="error",
        )
    data = form.cleaned_data
    corrects = None
    if data["corrects"]:
        corrects = Reconciliation.objects.filter(pk=data["corrects"], receipt=receipt).first()
        if corrects is None:
            notice = gettext("That finding is not one of %(run)s's; nothing was recorded.") % {
                "run": receipt.tool_run_id
            }
            return _done(request, notice=notice, level=messages.WARNING)
    elif not receipts.receipt_awaits_reconciliation(receipt=receipt):
        notice = gettext("%(run)s is not waiting for reconciliation; nothing was recorded.") % {
            "run": receipt.tool_run_id
        }
        return _done(request, notice=notice, level=messages.WARNING)
    if data["step"] == ReconcileForm.STEP_EDIT:
        return _render(
            request, form=form, receipt_id=receipt.pk, corrects_id=corrects.pk if corrects else 0
        )
    if data["step"] != ReconcileForm.STEP_CONFIRM:
        pending = PendingFinding(
            receipt=receipt, finding=data["finding"], note=data["note"], corrects=corrects
        )
        return _render(request, pending=pending)
    try:
        reconciliation = receipt_reconcile(
            receipt=receipt,
            actor=request.user,
            finding=data["finding"],
            note=data["note"],
            corrects=corrects,
        )
    except ReconcileError as exc:
        return _done(request, notice=str(exc), level=messages.WARNING)
    template = (
        gettext("%(run)s: finding corrected to %(finding)s.")
        if corrects
        else gettext("%(run)s reconciled (%(finding)s).")
    )
    notice = template % {
        "run": receipt.tool_run_id,
        "finding": reconciliation.get_finding_display(),
    }
    return _done(request, notice=notice, level=messages.SUCCESS)


def _done(request: HttpRequest, *, notice: str, level: int) -> HttpResponse:
    # An htmx swap shows the notice inside the queue; a message would surface a page later.
    # The redirect lands on the top of the page, where the message is, just above the queue.
    if is_partial(request):
        return _render(request, notice=notice, notice_tag=messages.DEFAULT_TAGS[level])
    messages.add_message(request, level, notice)
    return HttpResponseRedirect(reverse("triage:receipts"))


urlpatterns: list[URLPattern] = [
    path("receipts/", receipts_page, name="receipts"),
    path("receipts/<int:receipt_id>/reconcile", receipt_reconcile_view, name="receipt-reconcile"),
]
