"""The learning review page, one suggestion's page, decisions and collection policies.

Each page shows only the collections its reader sees (organisation.access). A suggestion or a
collection of another team is not found (404, so ids and names do not leak); a decision or a
policy change needs the permission on that suggestion's collection (403 when a person's role
in the owning team lacks it)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import push_url

from core.drafts import errors_in_words
from core.http import is_partial
from learning import selectors, services
from learning.forms import ApproveForm, DemoteForm, PolicyForm, QueueFilterForm, RejectForm
from learning.models import RejectionReason, Suggestion
from organisation import roles
from organisation.access import has_collection_perm, visible_q
from qualitylab.models import Collection, LearningMode

VIEW_SUGGESTIONS = "learning.view_suggestion"
PAGE_SIZE = 25


def _granted(request: HttpRequest, perm: str) -> Callable[[str], bool]:
    """Whether the person may do ``perm`` on a collection's things, asked once a collection
    (and never when no role of theirs has it at all)."""
    if not request.user.has_perm(perm):
        return lambda collection: False
    return functools.cache(functools.partial(has_collection_perm, request.user, perm))


def _suggestion(request: HttpRequest, suggestion_id: int, *, perm: str = "") -> Suggestion:
    """The suggestion if its reader sees its collection (else 404) and, for an action, may do
    ``perm`` there (else 403)."""
    suggestion = get_object_or_404(
        selectors.visible_suggestions(user=request.user).select_related(
            "collection", "promoted_by"
        ),
        pk=suggestion_id,
    )
    if perm and not has_collection_perm(request.user, perm, suggestion.collection.name):
        raise PermissionDenied
    return suggestion


def _decision_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "can_review": request.user.has_perm(roles.REVIEW_SUGGESTION),
        "rejection_reasons": RejectionReason.choices,
        "thresholds": {
            "observations": settings.LEARNING_MIN_SUCCESS_OBSERVATIONS,
            "failure_ratio": settings.LEARNING_MAX_RECENT_FAILURE_RATIO,
            "agreement": settings.LEARNING_MIN_TARGET_AGREEMENT,
            "recent": settings.LEARNING_RECENT_ATTEMPTS,
        },
    }


@require_safe
@login_required
@permission_required(VIEW_SUGGESTIONS, raise_exception=True)
def review_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    collections = selectors.learning_collections(user=user)
    form = QueueFilterForm(request.GET or None, collections=[c.name for c in collections])
    filters = form.filters()
    page = Paginator(selectors.suggestion_queue(filters=filters, user=user), PAGE_SIZE).get_page(
        form.page_number()
    )
    may_review = _granted(request, roles.REVIEW_SUGGESTION)
    for shown in page.object_list:
        shown.reviewable = may_review(shown.collection.name)
    # Links keep the filters the form knows and accepted, nothing else from the address.
    kept = [
        (key, value)
        for key, value in request.GET.items()
        if value and key in form.fields and key not in form.errors
    ]
    query = urlencode(kept)
    here = f"{request.path}?{query}" if query else request.path
    context = {
        **_decision_context(request),
        "form": form,
        "filters": filters,
        "page": page,
        "here": here,
        "page_query": urlencode([(key, value) for key, value in kept if key != "page"]),
        "counts": selectors.status_counts(user=user, collection=filters.collection),
    }
    status = 400 if form.errors else 200  # the page shows what it refused
    if is_partial(request):
        return push_url(render(request, "learning/review.html#queue", context, status=status), here)
    may_change = _granted(request, roles.CHANGE_COLLECTION)
    for collection in collections:
        collection.policy_editable = may_change(collection.name)  # type: ignore[attr-defined]
    context.update(
        {
            "collections": collections,
            "modes": LearningMode.choices,
            "reviews": selectors.recent_reviews(user=user),
        }
    )
    return render(request, "learning/review.html", context, status=status)


@require_safe
@login_required
@permission_required(VIEW_SUGGESTIONS, raise_exception=True)
def suggestion_page(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    suggestion = _suggestion(request, suggestion_id)
    suggestion.reviewable = _granted(request, roles.REVIEW_SUGGESTION)(  # type: ignore[attr-defined]
        suggestion.collection.name
    )
    context = {
        **_decision_context(request),
        "suggestion": suggestion,
        "here": request.path,
        "attempts": selectors.suggestion_attempts(suggestion=suggestion),
        "failures": selectors.family_failures(suggestion=suggestion),
        "shadow_cases": selectors.shadow_cases(suggestion=suggestion),
        "history": selectors.suggestion_history(suggestion=suggestion),
    }
    return render(request, "learning/suggestion.html", context)


@require_POST
@login_required
@permission_required(roles.REVIEW_SUGGESTION, raise_exception=True)
def suggestion_approve_view(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    suggestion = _suggestion(request, suggestion_id, perm=roles.REVIEW_SUGGESTION)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, gettext("Approving needs a reason: it is kept as the promotion reason.")
        )
        return _back(request, suggestion)
    try:
        services.suggestion_approve(
            suggestion=suggestion, reviewer=request.user, reason=form.cleaned_data["reason"]
        )
    except services.DecisionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, gettext("Promoted %(suggestion)s.") % {"suggestion": _label(suggestion)}
        )
    return _back(request, suggestion)


@require_POST
@login_required
@permission_required(roles.REVIEW_SUGGESTION, raise_exception=True)
def suggestion_reject_view(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    suggestion = _suggestion(request, suggestion_id, perm=roles.REVIEW_SUGGESTION)
    form = RejectForm(request.POST)
    if not form.is_valid():
        messages.error(request, gettext("Rejecting needs a reason code and a note."))
        return _back(request, suggestion)
    try:
        services.suggestion_reject(
            suggestion=suggestion,
            reviewer=request.user,
            reason=form.cleaned_data["reason"],
            note=form.cleaned_data["note"],
        )
    except services.DecisionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            gettext("Rejected %(suggestion)s (%(reason)s).")
            % {"suggestion": _label(suggestion), "reason": form.cleaned_data["reason"]},
        )
    return _back(request, suggestion)


@require_POST
@login_required
@permission_required(roles.REVIEW_SUGGESTION, raise_exception=True)
def suggestion_demote_view(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    return _undo_decision(
        request,
        suggestion_id,
        services.suggestion_demote,
        needs_reason=gettext("Demoting needs a reason: it is kept in the history."),
        done=gettext("Demoted %(suggestion)s: it is %(status)s again."),
    )


@require_POST
@login_required
@permission_required(roles.REVIEW_SUGGESTION, raise_exception=True)
def suggestion_reopen_view(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    return _undo_decision(
        request,
        suggestion_id,
        services.suggestion_reopen,
        needs_reason=gettext("Reopening needs a reason: it is kept in the history."),
        done=gettext("Reopened %(suggestion)s: it is %(status)s again."),
    )


def _undo_decision(
    request: HttpRequest,
    suggestion_id: int,
    undo: Callable[..., Suggestion],
    *,
    needs_reason: str,
    done: str,
) -> HttpResponse:
    """Demote a promotion or reopen a rejection: both take a reason kept in the history and
    leave the suggestion in the status the gate gives it now."""
    suggestion = _suggestion(request, suggestion_id, perm=roles.REVIEW_SUGGESTION)
    form = DemoteForm(request.POST)
    if not form.is_valid():
        messages.error(request, needs_reason)
        return _back(request, suggestion)
    try:
        undone = undo(
            suggestion=suggestion, reviewer=request.user, reason=form.cleaned_data["reason"]
        )
    except services.DecisionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            done % {"suggestion": _label(suggestion), "status": undone.get_status_display()},
        )
    return _back(request, suggestion)


@require_POST
@login_required
@permission_required(roles.CHANGE_COLLECTION, raise_exception=True)
def collection_policy_view(request: HttpRequest, name: str) -> HttpResponse:
    visible = Collection.objects.filter(visible_q(request.user, "name"))
    collection = get_object_or_404(visible, name=name)
    if not has_collection_perm(request.user, roles.CHANGE_COLLECTION, collection.name):
        raise PermissionDenied
    form = PolicyForm(request.POST)
    back = reverse("learning:home") + "#policies"
    if not form.is_valid():
        messages.error(request, errors_in_words(form))
        return HttpResponseRedirect(back)
    data = form.cleaned_data
    try:
        changes = services.collection_learning_policy_set(
            collection=collection,
            actor=request.user,
            learning_mode=data["learning_mode"],
            learning_allowed=data["learning_allowed"],
            write_capable=data["write_capable"],
        )
    except services.DecisionError as exc:
        messages.error(request, str(exc))
    else:
        if changes:
            messages.success(request, f"{collection.name}: {', '.join(changes)}.")
        else:
            messages.info(
                request,
                gettext("%(collection)s: nothing changed.") % {"collection": collection.name},
            )
    return HttpResponseRedirect(back)


def _label(suggestion: Suggestion) -> str:
    return gettext("%(type)s %(target)s for “%(family)s”") % {
        "type": suggestion.type,
        "target": suggestion.target,
        "family": suggestion.query_family,
    }


def _back(request: HttpRequest, suggestion: Suggestion) -> HttpResponseRedirect:
    """Back where the decision was taken (the filtered queue or the suggestion's page)."""
    target = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    if not safe or not target.startswith(reverse("learning:home")):
        target = reverse("learning:suggestion", args=[suggestion.pk])
    return HttpResponseRedirect(f"{target}#suggestion-{suggestion.pk}")
