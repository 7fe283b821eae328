"""The ingestion page (batch ledger, API keys, unmapped reasons, retention ledger) and the
tool-policy pages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from core.http import is_partial
from organisation import roles
from organisation.access import can_see, global_perms, has_collection_perm
from organisation.models import Team
from triage import selectors
from triage.forms import (
    ApiKeyCreateForm,
    ApiKeyScopeForm,
    IngestionQueryForm,
    PolicyQueryForm,
    ToolPolicyForm,
)
from triage.models import ApiKey, ToolPolicy
from triage.pages import ingestion_selectors
from triage.services import ApiKeyError, api_key_create, api_key_revoke, api_key_scope_set
from triage.vocabulary import taxonomy

VIEW_LEDGER = "triage.view_ingestbatch"
VIEW_POLICIES = "triage.view_toolpolicy"
# The first item the "copy this key now" box suggests sending; a test posts it for real.
CURL_EXAMPLE_BODY = json.dumps(
    {
        "items": [
            {
                "type": "failure",
                "id": "first-failure-1",
                "body": {
                    "stage": "execute",
                    "reason": "timeout",
                    "tool": "getOrderDetail",
                    "message": "read timed out after 30s",
                    "evidence": {"timeout_ms": 30000, "request_sent": True},
                },
            }
        ]
    }
)


@dataclass(frozen=True)
class NewKey:
    """A key just created: the only moment its secret exists outside the runtime."""

    api_key: ApiKey
    secret: str


def _render_ingestion(
    request: HttpRequest,
    *,
    create_form: ApiKeyCreateForm | None = None,
    new_key: NewKey | None = None,
    status: int = 200,
) -> HttpResponse:
    query_form = IngestionQueryForm(request.GET)
    valid = query_form.cleaned_data if query_form.is_valid() else {}
    before, selected = valid.get("before"), valid.get("batch")
    if query_form.errors and status == 200:
        status = 400  # the page shows what it refused
    # Batches, keys and unmapped reasons of the person's teams; the desk-wide figures no
    # collection carries (rejections per code, retention runs) for those who see them all.
    user = request.user
    ledger = ingestion_selectors.ingest_ledger(before_id=before, user=user)
    detail = (
        ingestion_selectors.ingest_batch_detail(batch_id=selected, user=user) if selected else None
    )
    context: dict[str, Any] = {
        "ledger": ledger,
        "before": before,
        "detail": detail,
        "detail_on_page": detail is not None
        and any(batch.pk == detail.batch.pk for batch in ledger.batches),
        "query_form": query_form,
    }
    if is_partial(request):
        return render(request, "triage/ingestion.html#ledger", context, status=status)
    can_manage = request.user.has_perm(roles.MANAGE_API_KEYS)
    context.update(
        {
            "totals": ingestion_selectors.ingest_totals(
                since=timezone.now() - timedelta(hours=24), user=user
            ),
            "rejected_codes": selectors.rejections_by_code(user=user),
            "api_keys": list(ingestion_selectors.api_keys_list(user=user)),
            "now": timezone.now(),
            "unmapped": ingestion_selectors.unmapped_reasons_queue(user=user),
            "adapter_reasons": taxonomy.adapter_reasons(),
            "can_manage_keys": can_manage,
            "create_form": (create_form or ApiKeyCreateForm()) if can_manage else None,
            "teams": list(Team.objects.values_list("pk", "name")) if can_manage else [],
            "new_key": new_key,
            "ingest_url": request.build_absolute_uri(reverse("api:api-ingest")),
            "read_url": request.build_absolute_uri(reverse("api:api-groups")),
            "curl_example_body": CURL_EXAMPLE_BODY,
            "retention_days": settings.TRIAGE_RETENTION_DAYS,
            "retention_runs": ingestion_selectors.retention_runs_recent(user=user),
        }
    )
    return render(request, "triage/ingestion.html", context, status=status)


@require_safe
@login_required
@permission_required(VIEW_LEDGER, raise_exception=True)
def ingestion_page(request: HttpRequest) -> HttpResponse:
    return _render_ingestion(request)


@require_POST
@login_required
@permission_required(roles.MANAGE_API_KEYS, raise_exception=True)
def api_key_create_view(request: HttpRequest) -> HttpResponse:
    form = ApiKeyCreateForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            api_key, secret = api_key_create(
                name=data["name"],
                owner=data["owner"].strip(),
                scopes=data["scopes"],
                expires_days=data["expires_days"],
                collections=data["collections"],
                team=data["team"],
                actor=request.user,
            )
        except ApiKeyError as exc:
            form.add_error(None, str(exc))
        else:
            # The secret is rendered into this response and nowhere else. Redirecting
            # (post/redirect/get) would need it to survive until the next request: in the
            # URL it would reach server logs and browser history, in a message it would sit
            # in the session or the messages cookie. It is shown once, here, and not cached.
            response = _render_ingestion(
                request, new_key=NewKey(api_key=api_key, secret=secret), status=201
            )
            add_never_cache_headers(response)
            return response
    return _render_ingestion(request, create_form=form, status=400)


@require_POST
@login_required
@permission_required(roles.MANAGE_API_KEYS, raise_exception=True)
def api_key_revoke_view(request: HttpRequest, key_id: int) -> HttpResponse:
    api_key = get_object_or_404(ApiKey, pk=key_id)
    was_revoked = api_key.revoked_at is not None
    api_key_revoke(api_key=api_key, actor=request.user)
    if was_revoked:
        messages.info(
            request, gettext("The key %(name)s was already revoked.") % {"name": api_key.name}
        )
    else:
        messages.success(
            request,
            gettext("Revoked %(name)s: the API now refuses it with 401 revoked_api_key.")
            % {"name": api_key.name},
        )
    return HttpResponseRedirect(reverse("triage:ingestion") + "#keys")


@require_POST
@login_required
@permission_required(roles.MANAGE_API_KEYS, raise_exception=True)
def api_key_scope_view(request: HttpRequest, key_id: int) -> HttpResponse:
    """Change what a key serves (its collections and team); the change is audited."""
    api_key = get_object_or_404(ApiKey, pk=key_id)
    form = ApiKeyScopeForm(request.POST)
    if not form.is_valid():
        errors = " ".join(str(error) for errors in form.errors.values() for error in errors)
        messages.error(
            request, gettext("The scope was not changed: %(errors)s") % {"errors": errors}
        )
        return _render_ingestion(request, status=400)
    api_key_scope_set(
        api_key=api_key,
        collections=form.cleaned_data["collections"],
        team=form.cleaned_data["team"],
        actor=request.user,
    )
    messages.success(request, gettext("Changed what %(name)s serves.") % {"name": api_key.name})
    return HttpResponseRedirect(reverse("triage:ingestion") + "#keys")


# --- tool policies ---------------------------------------------------------------------------


@require_safe
@login_required
@permission_required(VIEW_POLICIES, raise_exception=True)
def policies_page(request: HttpRequest) -> HttpResponse:
    query_form = PolicyQueryForm(request.GET)
    text = query_form.cleaned_data["q"].strip() if query_form.is_valid() else ""
    context = {
        "policies": list(ingestion_selectors.tool_policies(text=text, user=request.user)),
        "q": text,
        "query_form": query_form,
        "can_add": request.user.has_perm(roles.ADD_TOOL_POLICY),
        "can_change": request.user.has_perm(roles.CHANGE_TOOL_POLICY),
    }
    template = (
        "triage/policies.html#policy-table" if is_partial(request) else "triage/policies.html"
    )
    return render(request, template, context, status=400 if query_form.errors else 200)


def _policy_form_page(request: HttpRequest, *, policy: ToolPolicy | None) -> HttpResponse:
    """GET shows the form; POST saves and goes back to the list, or shows the errors."""
    if request.method != "POST":
        form = ToolPolicyForm(instance=policy)
        return render(request, "triage/policy_form.html", {"form": form, "policy": policy})
    form = ToolPolicyForm(request.POST, instance=policy)
    perm = roles.CHANGE_TOOL_POLICY if policy else roles.ADD_TOOL_POLICY
    collection = form.cleaned_data.get("collection", "") if form.is_valid() else ""
    if form.is_valid() and not _may_set_policies(request.user, perm, collection):
        form.add_error(
            "collection", gettext("Your role does not let you set this collection's policies.")
        )
    if form.is_valid():
        try:
            # validate_unique already caught an existing (collection, tool); this covers
            # two people saving the same pair at the same moment.
            with transaction.atomic():
                saved = form.save()
        except IntegrityError:
            form.add_error(None, gettext("A policy for this collection and tool already exists."))
        else:
            where = saved.collection or gettext("all collections")
            text = (
                gettext("Updated the policy for %(tool)s in %(where)s.")
                if policy
                else gettext("Added the policy for %(tool)s in %(where)s.")
            )
            messages.success(request, text % {"tool": saved.tool, "where": where})
            return HttpResponseRedirect(
                f"{reverse('triage:policies')}?{urlencode({'q': saved.tool})}"
            )
    # A duplicate (collection, tool) is the likeliest error: link to the policy to edit instead.
    existing = ingestion_selectors.tool_policy_for(
        collection=form.cleaned_data.get("collection", ""),
        tool=form.cleaned_data.get("tool", ""),
        other_than=policy,
        user=request.user,
    )
    context = {"form": form, "policy": policy, "existing": existing}
    return render(request, "triage/policy_form.html", context, status=400)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(roles.ADD_TOOL_POLICY, raise_exception=True)
def policy_create_view(request: HttpRequest) -> HttpResponse:
    return _policy_form_page(request, policy=None)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(roles.CHANGE_TOOL_POLICY, raise_exception=True)
def policy_edit_view(request: HttpRequest, policy_id: int) -> HttpResponse:
    seen = ToolPolicy.objects.filter(ingestion_selectors.policies_seen_by(request.user))
    policy = get_object_or_404(seen, pk=policy_id)  # another team's policy: no such policy
    if not _may_set_policies(request.user, roles.CHANGE_TOOL_POLICY, policy.collection):
        raise PermissionDenied
    return _policy_form_page(request, policy=policy)


def _may_set_policies(user: Any, perm: str, collection: str) -> bool:
    """A collection's policies are set by those whose role allows it in the team that owns
    it (or outside teams); the policies for all collections ("") apply to every team's, so
    only a role held outside teams sets them."""
    if not collection:
        return bool(user.is_superuser) or perm in global_perms(user)
    return can_see(user, collection) and has_collection_perm(user, perm, collection)


urlpatterns: list[URLPattern] = [
    path("ingestion/", ingestion_page, name="ingestion"),
    path("ingestion/keys/new", api_key_create_view, name="apikey-create"),
    path("ingestion/keys/<int:key_id>/revoke", api_key_revoke_view, name="apikey-revoke"),
    path("ingestion/keys/<int:key_id>/scope", api_key_scope_view, name="apikey-scope"),
    path("policies/", policies_page, name="policies"),
    path("policies/new", policy_create_view, name="policy-create"),
    path("policies/<int:policy_id>/edit", policy_edit_view, name="policy-edit"),
]
