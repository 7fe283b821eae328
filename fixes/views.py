"""The fixes list, and the group page's resolve-with-a-fix and verify actions.

The list is of the collections its reader sees (fixes.selectors). A group or a fix of another
team is not found (404); resolving or verifying needs the permission on its collection (403
when the person's role in the owning team lacks it)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.views.decorators.http import require_POST, require_safe

from core.drafts import draft_keep, errors_in_words
from fixes import selectors, services
from fixes.forms import FixesFilterForm, ResolveWithFixForm
from fixes.models import FixKind, Verdict
from organisation import roles
from organisation.access import has_collection_perm, visible_q
from triage.forms import group_draft_key, group_page_url, posted_back
from triage.models import FailureGroup, GroupAction

VIEW_FIXES = "triage.view_failuregroup"


@require_safe
@login_required
@permission_required(VIEW_FIXES, raise_exception=True)
def fixes_page(request: HttpRequest) -> HttpResponse:
    form = FixesFilterForm(request.GET)
    context: dict[str, Any] = {
        "form": form,
        "kinds": FixKind.choices,
        "verdicts": Verdict.choices,
    }
    if not form.is_valid():
        return render(request, "fixes/fixes.html", context, status=400)
    overview = selectors.fixes_overview(
        filters=form.filters(), now=timezone.now(), user=request.user
    )
    context.update(overview=overview, limit=selectors.LIST_LIMIT)
    return render(request, "fixes/fixes.html", context)


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def resolve_view(request: HttpRequest, group_id: int) -> HttpResponse:
    """Resolve a group from its page, with its release and the fix behind it (if said)."""
    group = get_object_or_404(
        FailureGroup.objects.filter(visible_q(request.user, "collection")), pk=group_id
    )
    if not has_collection_perm(request.user, roles.ACT_ON_GROUP, group.collection):
        raise PermissionDenied
    form = ResolveWithFixForm(
        request.POST, user=request.user, group=group, runbooks=services.group_runbooks(group)
    )
    back = posted_back(request.POST)
    if (
        form.is_valid()
        and form.cleaned_data["verify"]
        and not has_collection_perm(request.user, roles.RUN_QUALITY_LAB, group.collection)
    ):
        form.add_error("verify", gettext("Verifying runs Quality Lab: your role may not."))
    if not form.is_valid():
        messages.error(
            request, gettext("Nothing was changed. %(errors)s") % {"errors": errors_in_words(form)}
        )
        draft_keep(request, key=group_draft_key(group.pk), form=form, extra={"form": "act"})
        return HttpResponseRedirect(group_page_url(group.pk, back))
    data = form.cleaned_data
    try:
        recorded = services.fix_record(
            group=group,
            actor=request.user,
            kind=data["fix_kind"],
            url=data["fix_url"],
            note=data["note"] or "",
            runbook=data["runbook"],
            resolved_in_release=data["resolved_in_release"],
            resolved_in_next_release=data["resolved_in_next_release"],
            verify=data["verify"],
            query=back,
        )
    except services.FixError as exc:
        messages.error(request, str(exc))
        draft_keep(request, key=group_draft_key(group.pk), form=form, extra={"form": "act"})
        return HttpResponseRedirect(group_page_url(group.pk, back))
    if recorded.undoable_id is not None:
        request.session["last_group_action_id"] = recorded.undoable_id
    fix = recorded.fix
    if fix is not None and fix.verification_run_id is not None:
        messages.success(
            request,
            gettext("Verifying the fix: run #%(run)s resolves the group when every case passes.")
            % {"run": fix.verification_run_id},
        )
    elif fix is not None:
        messages.success(
            request, gettext("Resolved, with the fix: the desk measures whether it holds.")
        )
    else:
        messages.success(
            request, gettext("%(action)s: done.") % {"action": capfirst(GroupAction.RESOLVE.label)}
        )
    return HttpResponseRedirect(group_page_url(group.pk, back))


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
@permission_required(roles.RUN_QUALITY_LAB, raise_exception=True)
def verify_view(request: HttpRequest, fix_id: int) -> HttpResponse:
    """Verify a recorded fix again with the cases made from its group's failures."""
    fix = get_object_or_404(
        selectors.visible_fixes(user=request.user).select_related("group"),
        pk=fix_id,
        group__isnull=False,
    )
    if not all(
        has_collection_perm(request.user, perm, fix.collection)
        for perm in (roles.ACT_ON_GROUP, roles.RUN_QUALITY_LAB)
    ):
        raise PermissionDenied
    group = fix.group
    assert group is not None
    try:
        fix = services.fix_verify(fix=fix, actor=request.user)
    except services.FixError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            gettext("Verifying the fix with run #%(run)s.") % {"run": fix.verification_run_id},
        )
    return HttpResponseRedirect(group_page_url(group.pk, posted_back(request.POST), "#fixes"))
